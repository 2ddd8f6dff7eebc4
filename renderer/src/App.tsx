/**
 * The top of the renderer: obtains a key (from Electron's preload, or typed in a browser),
 * checks it with GET /v1/auth/me, and shows the workstation. A 401 later returns a browser to
 * the key screen with the reason. The desktop app has no key to type: it asks main for a fresh
 * session (main re-issues the launch key when it stopped working, e.g. revoked on the Admin
 * screen), and only if that fails too does it show what went wrong and suggest a restart.
 */
import { useCallback, useEffect, useMemo, useRef, useState } from 'react';
import { type ApiError, createClient, describeError, type Client } from './api/client.ts';
import type { Me } from './api/types.ts';
import { Shell } from './Shell.tsx';
import { keyProblemOf, type KeyProblem } from './key-problem.ts';
import { DesktopSessionScreen, KeyScreen } from './screens/KeyScreen.tsx';
import { SessionContext, type Session } from './session.ts';

type Signed = { client: Client; me: Me['user'] };

/** A second refusal this soon after a renewal is not a revoked key but something a new key
 * cannot fix (a disabled local admin, a broken data folder): stop and say so. */
const RENEWAL_QUIET_MS = 30_000;

function serverOrigin(): string {
  return window.location.origin;
}

export function App() {
  const desktop = window.mia ?? null;
  const [signed, setSigned] = useState<Signed | null>(null);
  const [problem, setProblem] = useState<KeyProblem>(null);
  const [busy, setBusy] = useState(false);
  const [scanOrder, setScanOrder] = useState<readonly string[]>([]);
  /** The key in use, when main handed it over and whether in answer to a refusal, and whether
   * main is being asked right now. */
  const current = useRef<{ key: string; at: number; renewal: boolean } | null>(null);
  const renewing = useRef(false);
  const renewRef = useRef<(cause: ApiError | null) => void>(() => undefined);

  const onUnauthorized = useCallback(
    (key: string, error: ApiError) => {
      if (desktop) {
        // Many requests fail together when a key is revoked; only the first one of the key in
        // use asks main, the others (and late replies to an older key) are already answered.
        if (renewing.current || current.current?.key !== key) return;
        renewRef.current(error);
        return;
      }
      setSigned(null);
      setProblem({ kind: 'rejected', message: describeError(error.info) });
    },
    [desktop],
  );

  const signIn = useCallback(
    async (baseUrl: string, key: string) => {
      setBusy(true);
      const client = createClient({ baseUrl, key, onUnauthorized: (error) => onUnauthorized(key, error) });
      try {
        const me = await client.get<Me>('/v1/auth/me');
        setProblem(null);
        setSigned({ client, me: me.user });
      } catch (error) {
        setSigned(null);
        setProblem(keyProblemOf(error));
      } finally {
        setBusy(false);
      }
    },
    [onUnauthorized],
  );

  const renew = useCallback(
    (cause: ApiError | null) => {
      if (!desktop || renewing.current) return;
      const handedOver = current.current;
      if (cause && handedOver?.renewal && Date.now() - handedOver.at < RENEWAL_QUIET_MS) {
        setSigned(null);
        setProblem({ kind: 'rejected', message: describeError(cause.info) });
        return;
      }
      renewing.current = true;
      setBusy(true);
      // Electron: main issued a key for this launch (or a new one, when that one stopped working).
      desktop
        .getSession()
        .then(
          async (session) => {
            current.current = { key: session.apiKey, at: Date.now(), renewal: cause !== null };
            renewing.current = false;
            await signIn(session.baseUrl, session.apiKey);
          },
          (error: unknown) => {
            setSigned(null);
            setProblem(keyProblemOf(error));
          },
        )
        .finally(() => {
          renewing.current = false;
          setBusy(false);
        });
    },
    [desktop, signIn],
  );
  renewRef.current = renew;

  useEffect(() => {
    if (desktop) renew(null);
  }, [desktop, renew]);

  const session = useMemo<Session | null>(
    () =>
      signed
        ? {
            client: signed.client,
            me: signed.me,
            scanOrder,
            setScanOrder,
            desktop,
            // The desktop user has no key to sign in again with: no sign-out there.
            signOut: desktop
              ? null
              : () => {
                  setSigned(null);
                  setProblem(null);
                },
          }
        : null,
    [signed, scanOrder, desktop],
  );

  if (!session) {
    if (desktop) return <DesktopSessionScreen problem={problem} busy={busy} onRetry={() => renew(null)} />;
    return <KeyScreen problem={problem} busy={busy} onSubmit={(key) => void signIn(serverOrigin(), key)} />;
  }
  return (
    <SessionContext.Provider value={session}>
      <Shell />
    </SessionContext.Provider>
  );
}
