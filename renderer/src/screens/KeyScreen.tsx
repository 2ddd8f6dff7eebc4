/**
 * Asks for an API key (browser mode), and is where any 401 lands: a revoked or expired key
 * shows why it was refused and what to do, never a blank page. The key stays in memory only.
 */
import { useState, type FormEvent } from 'react';
import { ClinicalBanner } from '../components/ClinicalBanner.tsx';

export type KeyProblem = { message: string } | null;

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
          <div className="key-problem" role="alert" data-testid="key-problem">
            <strong>Your API key was not accepted.</strong>
            <p>{problem.message}</p>
            <p>It may have been revoked, or it was rotated more than 24 hours ago. Ask your admin for a new key, or run <code>mia keys create</code> on the server.</p>
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
