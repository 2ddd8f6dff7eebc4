/**
 * Starts the API inside the Electron main process and hands the renderer a key for this launch.
 *
 * In-process rather than in a utility process: the server is asynchronous I/O plus SQLite calls
 * of a few milliseconds, and model inference runs on onnxruntime's own threads, so the main
 * event loop stays responsive; one process keeps a single SQLite writer and lets quit run in a
 * known order (revoke the launch key, let in-flight requests finish their writes, close the
 * database) without an IPC protocol to a second process that would also need the native modules.
 */
import type { AuthContext } from '#server/auth/authenticate.ts';
import { issueKeyForUser, revokeKey } from '#server/auth/api-keys.ts';
import { systemClock, type Clock } from '#server/clock.ts';
import { createServer, type MiaServer } from '#server/create-server.ts';
import { findOrCreateUser } from '#server/users/users.ts';

export const LOCAL_ADMIN_EMAIL = 'admin@workstation.local';

export type EmbeddedServer = {
  url: string;
  /** The per-launch key: only in memory, handed over through the preload. */
  apiKey: string;
  keyId: string;
  firstLaunch: boolean;
  server: MiaServer;
  /** Revokes the launch key, waits for in-flight requests, closes the database. */
  stop(): Promise<void>;
};

export type EmbeddedServerOptions = {
  dataDir: string;
  uiDir: string | null;
  clock?: Clock;
};

/** The main process acting for the person at the workstation, who is its local admin. */
const DESKTOP_CALLER: AuthContext = {
  keyRef: 0,
  keyId: 'desktop',
  userRef: 0,
  userId: 'desktop',
  email: 'desktop',
  role: 'admin',
  scopes: ['*'],
};

export async function startEmbeddedServer(options: EmbeddedServerOptions): Promise<EmbeddedServer> {
  const clock = options.clock ?? systemClock;
  const server = createServer({ dataDir: options.dataDir, uiDir: options.uiDir, clock, logToStderr: false });
  const deps = { db: server.services.db, clock };
  // First launch creates the workstation's local admin; later launches find it.
  const { user, created } = findOrCreateUser(deps, { email: LOCAL_ADMIN_EMAIL, role: 'admin' });
  const issued = issueKeyForUser(deps, { userRef: user.id, name: `desktop launch ${clock.now().toISOString()}`, extraScopes: [] });
  let url: string;
  try {
    // Loopback only, on a free port chosen by the OS.
    url = await server.listen(0, '127.0.0.1');
  } catch (error) {
    revokeKey(deps, DESKTOP_CALLER, issued.row.public_id);
    await server.close();
    throw error;
  }
  let stopped = false;
  return {
    url,
    apiKey: issued.key,
    keyId: issued.row.public_id,
    firstLaunch: created,
    server,
    async stop() {
      if (stopped) return;
      stopped = true;
      // Revoked first: a key that outlived the app would be a credential nobody holds.
      revokeKey(deps, DESKTOP_CALLER, issued.row.public_id);
      await server.close();
    },
  };
}
