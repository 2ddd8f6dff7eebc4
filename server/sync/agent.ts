/**
 * A linked workstation's background sync: a round every `intervalMs` (sooner when asked, or when
 * the hub's live stream says a change for it was committed), with
 * backoff after failures (up to 5 minutes) so an unreachable hub costs little, and a status the
 * UI header and `mia sync status` show: online or offline, pending changes, last sync, error.
 */
import type { Services } from '#server/services.ts';
import { getSetting } from '#server/store/settings.ts';
import { countPendingOwnChanges, readNewestDeferral } from '#server/store/sync-log.ts';
import { hello, LAST_ATTEMPT, LAST_ERROR, LAST_SUCCESS, readPulledSeq, syncOnce, type SyncReport } from '#server/sync/client.ts';
import { followLive } from '#server/sync/live.ts';
import { openHubLink, readHubLink, readLinkInfo, type SecretBox } from '#server/sync/hub-link.ts';

export type SyncStatus = {
  linked: boolean;
  hub_url: string | null;
  device_id: string | null;
  device_name: string | null;
  /** online: the last round reached the hub; offline: it did not; syncing: a round is running. */
  state: 'not_linked' | 'online' | 'offline' | 'syncing';
  pending: number;
  /** Why the hub asked for some pending changes later (a file not there yet, a clock far ahead). */
  waiting_reason: string | null;
  refused: number;
  last_sync_at: string | null;
  last_attempt_at: string | null;
  last_error: string | null;
};

export type SyncAgent = {
  /** Runs a round now (or waits for the running one), resolving with its report. */
  runNow(): Promise<SyncReport | null>;
  status(): Promise<SyncStatus>;
  stop(): Promise<void>;
};

const MAX_BACKOFF_MS = 5 * 60_000;
/**
 * While the hub is unreachable, full rounds back off, but a cheap hello goes out this often (or
 * at the interval, if longer): when the network heals, sync resumes within seconds rather than
 * at the end of a backoff that grew during the outage.
 */
const PROBE_MS = 5_000;
const PROBE_TIMEOUT_MS = 3_000;

export async function readSyncStatus(s: Pick<Services, 'db' | 'dataDir' | 'replica'>, running: boolean, box: SecretBox | null = null): Promise<SyncStatus> {
  const link = readLinkInfo(s.dataDir);
  const opened = openHubLink(s.dataDir, box);
  const counts = await countPendingOwnChanges(s.db, s.replica.deviceId);
  // A key this process cannot open (sealed by the desktop's keychain, read by the CLI) is the error.
  const lastError = (opened.link === null && link !== null ? opened.reason : (await getSetting(s.db, LAST_ERROR)) || null);
  const lastSync = (await getSetting(s.db, LAST_SUCCESS)) ?? null;
  const state: SyncStatus['state'] = !link ? 'not_linked' : running ? 'syncing' : lastError ? 'offline' : lastSync ? 'online' : 'offline';
  return {
    linked: link !== null,
    hub_url: link?.url ?? null,
    device_id: link?.device_id ?? null,
    device_name: link?.device_name ?? null,
    state,
    pending: counts.pending,
    waiting_reason: counts.pending > 0 ? ((await readNewestDeferral(s.db, s.replica.deviceId)) ?? null) : null,
    refused: counts.rejected,
    last_sync_at: lastSync,
    last_attempt_at: (await getSetting(s.db, LAST_ATTEMPT)) ?? null,
    last_error: lastError,
  };
}

export function startSyncAgent(s: Services, intervalMs: number): SyncAgent {
  const controller = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<SyncReport | null> | undefined;
  let failures = 0;
  let stopped = false;

  const round = async (): Promise<SyncReport | null> => {
    const link = readHubLink(s.dataDir, s.config.secretBox);
    if (!link) return null;
    try {
      const report = await syncOnce(s, link, { signal: controller.signal });
      failures = 0;
      if (report.pushed + report.applied + report.refused > 0) s.log.info('sync.round', { pushed: report.pushed, refused: report.refused, deferred: report.deferred, files: report.files, applied: report.applied });
      return report;
    } catch (err) {
      failures += 1;
      if (!stopped) s.log.error('sync.failed', { error: (err instanceof Error ? err.message : String(err)).slice(0, 300), failures });
      return null;
    }
  };

  let nextRoundAt = 0;
  const schedule = (): void => {
    if (stopped || intervalMs === 0) return;
    const delay = failures === 0 ? intervalMs : Math.min(MAX_BACKOFF_MS, intervalMs * 2 ** Math.min(failures, 10));
    nextRoundAt = Date.now() + delay;
    timer = setTimeout(() => void tick(), failures === 0 ? delay : Math.min(delay, Math.max(intervalMs, PROBE_MS)));
  };

  /** A round when it is due; while failing, a hello first, and a round at once if it answers. */
  const tick = async (): Promise<void> => {
    if (failures === 0 || Date.now() >= nextRoundAt) {
      void runNow();
      return;
    }
    const link = readHubLink(s.dataDir, s.config.secretBox);
    let reachable = false;
    if (link) {
      try {
        await hello(link, AbortSignal.timeout(PROBE_TIMEOUT_MS));
        reachable = true;
      } catch {
        // Still unreachable: keep probing until the round is due.
      }
    }
    if (stopped) return;
    if (reachable) void runNow();
    else {
      const remaining = nextRoundAt - Date.now();
      timer = setTimeout(() => void tick(), Math.max(0, Math.min(remaining, Math.max(intervalMs, PROBE_MS))));
    }
  };

  // A change committed on the hub while a round runs may be past that round's pull: one more.
  let again = false;
  const runNow = (): Promise<SyncReport | null> => {
    if (running) return running;
    if (timer) clearTimeout(timer);
    running = round().finally(() => {
      running = undefined;
      if (again && !stopped) {
        again = false;
        void runNow();
      } else schedule();
      if (failures === 0) follow();
    });
    return running;
  };

  /**
   * Live sync: with rounds on an interval, a stream from the hub says when a change for this
   * workstation was committed, and a round runs at once. Reopened after each good round when it
   * ended; without it, the interval still holds.
   */
  let following = false;
  const follow = (): void => {
    const link = readHubLink(s.dataDir, s.config.secretBox);
    if (following || stopped || intervalMs === 0 || !link) return;
    following = true;
    void followLive(link, controller.signal, (head) => {
      void readPulledSeq(s.db).then((pulled) => {
        if (head <= pulled || stopped) return;
        if (running) again = true;
        else void runNow();
      });
    })
      .catch(() => {
        // The hub is away or older: rounds on the interval go on.
      })
      .finally(() => {
        following = false;
      });
  };

  schedule();
  follow();
  return {
    runNow,
    status: async () => await readSyncStatus(s, running !== undefined, s.config.secretBox),
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      controller.abort();
      await running?.catch(() => undefined);
    },
  };
}
