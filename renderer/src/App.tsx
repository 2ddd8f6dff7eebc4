/**
 * The top of the renderer: obtains a key (from Electron's preload, or typed in a browser),
 * checks it with GET /v1/auth/me, and shows the workstation. Any 401 later drops back to the
 * key screen with the reason.
 */
import { useCallback, useEffect, useMemo, useState } from 'react';
import { type ApiError, createClient, describeError, type Client } from './api/client.ts';
import type { Me } from './api/types.ts';
import { Shell } from './Shell.tsx';
import { KeyScreen, type KeyProblem } from './screens/KeyScreen.tsx';
import { SessionContext, type Session } from './session.ts';
import { errorText } from './format.ts';

type Signed = { client: Client; me: Me['user'] };

function serverOrigin(): string {
  return window.location.origin;
}

export function App() {
  const desktop = window.mia ?? null;
  const [signed, setSigned] = useState<Signed | null>(null);
  const [problem, setProblem] = useState<KeyProblem>(null);
  const [busy, setBusy] = useState(false);
  const [scanOrder, setScanOrder] = useState<readonly string[]>([]);

  const onUnauthorized = useCallback((error: ApiError) => {
    setSigned(null);
    setProblem({ message: describeError(error.info) });
  }, []);

  const signIn = useCallback(
    async (baseUrl: string, key: string) => {
      setBusy(true);
      const client = createClient({ baseUrl, key, onUnauthorized });
      try {
        const me = await client.get<Me>('/v1/auth/me');
        setProblem(null);
        setSigned({ client, me: me.user });
      } catch (error) {
        setSigned(null);
        setProblem({ message: errorText(error) });
      } finally {
        setBusy(false);
      }
    },
    [onUnauthorized],
  );

  useEffect(() => {
    if (!desktop) return;
    // Electron: main issued a key for this launch and hands it over through the preload.
    desktop.getSession().then(
      (session) => signIn(session.baseUrl, session.apiKey),
      (error: unknown) => setProblem({ message: errorText(error) }),
    );
  }, [desktop, signIn]);

  const session = useMemo<Session | null>(
    () =>
      signed
        ? {
            client: signed.client,
            me: signed.me,
            scanOrder,
            setScanOrder,
            desktop,
            signOut: () => {
              setSigned(null);
              setProblem(null);
            },
          }
        : null,
    [signed, scanOrder, desktop],
  );

  if (!session) {
    return <KeyScreen problem={problem} busy={busy} onSubmit={(key) => void signIn(serverOrigin(), key)} />;
  }
  return (
    <SessionContext.Provider value={session}>
      <Shell />
    </SessionContext.Provider>
  );
}
