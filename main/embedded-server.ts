/**
 * Starts the API inside the Electron main process and hands the renderer a key for this launch.
 *
 * In-process rather than in a utility process: the server is asynchronous I/O plus SQLite calls
 * of a few milliseconds, and model inference runs on onnxruntime's own threads, so the main
 * event loop stays responsive; one process keeps a single SQLite writer and lets quit run in a
 * known order without an IPC protocol to a second process that would also need the native
 * modules. Quit order (stop()): main has already closed the window, so no renderer request can
 * meet a stopping server; then no new analysis starts; then the server stops accepting, lets
 * in-flight requests finish their writes and closes the database; the launch key is revoked
 * last. Revoking first, as before, showed the still-open window a 401 and the key screen while
 * the queue kept starting jobs.
 */
import type { DesktopSession } from '../common/desktop-bridge.ts';
import type { AuthContext } from '#server/auth/authenticate.ts';
import { authenticate } from '#server/auth/authenticate.ts';
import { issueKeyForUser, revokeKey } from '#server/auth/api-keys.ts';
import { systemClock, type Clock } from '#server/clock.ts';
import { createServer, type MiaServer } from '#server/create-server.ts';
import type { DicomConfigInput } from '#server/dimse/scp-config.ts';
import { openDatabase } from '#server/store/sqlite.ts';
import { findOrCreateUser } from '#server/users/users.ts';
import type { SecretBox } from '#server/sync/hub-link.ts';

export const LOCAL_ADMIN_EMAIL = 'admin@workstation.local';

export type EmbeddedServer = {
  url: string;
  /** The current launch key: only in memory, handed over through the preload. */
  readonly apiKey: string;
  readonly keyId: string;
  firstLaunch: boolean;
  server: MiaServer;
  /**
   * What the renderer signs in with: the launch key while it works, otherwise (revoked on the
   * Admin screen, rotated and expired) a new one - the person at the workstation is its local
   * admin and never saw a key to paste back in.
   */
  session(): Promise<DesktopSession>;
  /** Stops analyses, closes the server (in-flight writes finish), then revokes the key. */
  stop(): Promise<void>;
};

export type EmbeddedServerOptions = {
  dataDir: string;
  uiDir: string | null;
  /** Folders holding bundled models; see main/desktop-paths.ts. */
  modelsDirs?: readonly string[] | null;
  clock?: Clock;
  /** How long quit waits for the server to close before revoking the key anyway. */
  closeTimeoutMs?: number;
  /** The OS keychain (main/keychain.ts), which seals the device key; null: a 0600 file. */
  secretBox?: SecretBox | null;
  /** mia's DICOM listener (C-ECHO, C-STORE from modalities and PACS); null: none. */
  dicom?: DicomConfigInput | null;
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
  device: null,
  keyRotated: false,
};

export async function startEmbeddedServer(options: EmbeddedServerOptions): Promise<EmbeddedServer> {
  const clock = options.clock ?? systemClock;
  const server = await createServer({ dataDir: options.dataDir, uiDir: options.uiDir, modelsDirs: options.modelsDirs ?? null, clock, logToStderr: false, secretBox: options.secretBox ?? null, dicom: options.dicom ?? null });
  const deps = { db: server.services.db, clock };
  // First launch creates the workstation's local admin; later launches find it.
  const { user, created } = await findOrCreateUser(deps, { email: LOCAL_ADMIN_EMAIL, role: 'admin' });
  const issue = async () => {
    const issued = await issueKeyForUser(deps, { userRef: user.id, name: `desktop launch ${clock.now().toISOString()}`, extraScopes: [] });
    return { key: issued.key, keyId: issued.row.public_id };
  };
  let current = await issue();
  let url: string;
  try {
    // Loopback only, on a free port chosen by the OS.
    url = await server.listen(0, '127.0.0.1');
  } catch (error) {
    await revokeKey(deps, DESKTOP_CALLER, current.keyId);
    await server.close();
    throw error;
  }
  let stopping: Promise<void> | null = null;

  const stop = async (): Promise<void> => {
    // No new analysis starts from here on; a running one goes back to the queue at its next
    // batch and resumes on the next launch.
    try {
      await server.runtime.quiesce();
    } catch {
      // server.close() below stops the queue as well.
    }
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      // Stops accepting, lets in-flight requests finish their writes, stops imports, closes the
      // database. Bounded, so a stuck request cannot keep a revocable key alive forever.
      const timeLimit = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, options.closeTimeoutMs ?? 15_000);
      });
      await Promise.race([server.close(), timeLimit]);
    } finally {
      clearTimeout(timer);
      // Last, whatever happened above: a key that outlived the app would be a credential nobody
      // holds. The server's own connection is closed by now, so a short-lived one records it.
      const db = openDatabase(options.dataDir);
      try {
        await revokeKey({ db, clock }, DESKTOP_CALLER, current.keyId);
      } finally {
        await db.close();
      }
    }
  };

  return {
    url,
    get apiKey() {
      return current.key;
    },
    get keyId() {
      return current.keyId;
    },
    firstLaunch: created,
    server,
    async session() {
      if (stopping) throw new Error('mia is quitting');
      const check = await authenticate(deps.db, clock, `Bearer ${current.key}`);
      if (!check.ok) {
        // Whatever stopped it (revoked, rotated and expired), the old key must not come back.
        await revokeKey(deps, DESKTOP_CALLER, current.keyId);
        current = await issue();
        const again = await authenticate(deps.db, clock, `Bearer ${current.key}`);
        // A new key does not help when the local admin itself cannot sign in (disabled).
        if (!again.ok) throw new Error(`the workstation's local admin cannot sign in: ${again.reason}`);
      }
      return { baseUrl: url, apiKey: current.key };
    },
    stop() {
      // Idempotent, and a second caller (before-quit may fire twice) waits for the same stop.
      stopping ??= stop();
      return stopping;
    },
  };
}
