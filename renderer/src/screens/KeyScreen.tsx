/**
 * Where a session starts and where it ends up when the server refuses it. In a browser it asks
 * for an API key; in the desktop app there is no key to type (main issues one per launch), so it
 * offers to ask main again instead. Each problem says what actually happened - a refused key, a
 * server that does not answer, or too many attempts - because each needs a different next step.
 * The key stays in memory only.
 */
import { useState, type FormEvent } from 'react';
import { ClinicalBanner } from '../components/ClinicalBanner.tsx';
import type { KeyProblem, KeyProblemKind } from '../key-problem.ts';

const HEADLINES: Record<KeyProblemKind, string> = {
  rejected: 'Your API key was not accepted.',
  unreachable: 'The mia server did not answer.',
  rate_limited: 'Too many attempts: the server asks to wait.',
  other: 'Signing in failed.',
};

function browserAdvice(kind: KeyProblemKind): string {
  switch (kind) {
    case 'rejected':
      return 'It may have been revoked, mistyped, or rotated more than 24 hours ago. Ask your admin for a new key, or run mia keys create on the server.';
    case 'unreachable':
      return 'Check that the server is running (mia serve or npm start) and that this address is right, then sign in again.';
    case 'rate_limited':
      return 'Too many failed sign-ins came from this machine. Wait the time named above, then try again with the right key.';
    case 'other':
      return 'Try again; if it persists, send the request id above to support.';
  }
}

export function KeyScreen({ problem, onSubmit, busy }: { problem: KeyProblem; onSubmit(key: string): void; busy: boolean }) {
  const [key, setKey] = useState('');
  const submit = (event: FormEvent) => {
    event.preventDefault();
    if (key.trim()) onSubmit(key.trim());
  };
  return (
    <div className="key-screen" data-testid="key-screen">
      <ClinicalBanner />
      <form className="key-card" onSubmit={submit}>
        <h1>mia workstation</h1>
        {problem ? (
          <div className="key-problem" role="alert" data-testid="key-problem" data-kind={problem.kind}>
            <strong>{HEADLINES[problem.kind]}</strong>
            <p>{problem.message}</p>
            <p>{browserAdvice(problem.kind)}</p>
          </div>
        ) : (
          <p>Enter your API key. It is kept in this tab's memory only and forgotten when you close it.</p>
        )}
        <label>
          API key
          <input
            type="password"
            autoComplete="off"
            spellCheck={false}
            placeholder="mia_…"
            value={key}
            onChange={(event) => setKey(event.target.value)}
            data-testid="key-input"
            autoFocus
          />
        </label>
        <button type="submit" disabled={busy || !key.trim()} data-testid="key-submit">
          {busy ? 'Checking…' : 'Sign in'}
        </button>
      </form>
    </div>
  );
}

/**
 * The desktop app's stand-in for the key screen: the person at the workstation never saw a key,
 * so asking for one would be a dead end. Main is asked for a fresh session instead.
 */
export function DesktopSessionScreen({ problem, busy, onRetry }: { problem: KeyProblem; busy: boolean; onRetry(): void }) {
  return (
    <div className="key-screen" data-testid="desktop-session">
      <ClinicalBanner />
      <div className="key-card">
        <h1>mia workstation</h1>
        {problem ? (
          <div className="key-problem" role="alert" data-testid="key-problem" data-kind={problem.kind}>
            <strong>mia could not open a session with its built-in server.</strong>
            <p>{problem.message}</p>
            <p>Press Try again. If this keeps happening, quit mia and start it again.</p>
          </div>
        ) : (
          <p>{busy ? 'Opening a session…' : 'Starting…'}</p>
        )}
        <button type="button" onClick={onRetry} disabled={busy} data-testid="desktop-retry">
          {busy ? 'Trying…' : 'Try again'}
        </button>
      </div>
    </div>
  );
}
