/**
 * The server's one runtime (issue 12, after Orthanc's ServerContext): every long-lived part -
 * log, database, frame cache, import service, analysis queue, audit retention, and the HTTP
 * listener a host attaches - is built here in dependency order, started in one order and stopped
 * in the reverse, once. Domain code receives the runtime (or the narrow `Services` part of it)
 * instead of looking parts up in registries keyed by an object.
 *
 * Start: open the data folder (crash leftovers are cleaned up as it opens) -> imports resume
 * jobs a dead process left and watch the folder -> the analysis queue requeues abandoned jobs
 * and starts working -> audit retention archives old events.
 * Stop: the analysis queue first (no job starts while requests drain; running ones go back to
 * the queue at their next batch) -> the HTTP listener (no new requests; in-flight ones finish
 * their writes) -> the audit events of those requests are stored -> imports (running jobs
 * reach a batch boundary and are released) -> audit retention -> the log is flushed -> the
 * database closes last, after every writer is gone.
 */
import { AnalysisQueue } from '#server/analysis/analysis-queue.ts';
import { createAuditWriter, type AuditWriter } from '#server/audit/audit-writer.ts';
import { startAuditRetention, type AuditRetention } from '#server/audit/retention.ts';
import { resolveConfig, type ServerConfigInput } from '#server/config.ts';
import { openDataFolder } from '#server/data-folder.ts';
import { createProgressBus } from '#server/events/progress-bus.ts';
import { dimseCStoreSender } from '#server/routing/cstore-sender.ts';
import { objectSource } from '#server/routing/objects.ts';
import { writeAnalysisSr, writeReportSr } from '#server/dicom-sr/structured-reports.ts';
import { createSendWorker, type SendWorker } from '#server/routing/send-worker.ts';
import { createFrameCache, type FrameCache } from '#server/imaging/frame-cache.ts';
import { createImportService, type ImportService } from '#server/imports/import-service.ts';
import { createFileLogger } from '#server/log.ts';
import { createRetrieveRunner, type RetrieveRunner } from '#server/query-retrieve/runner.ts';
import { startDimseScp, type DimseScp } from '#server/dimse/scp.ts';
import { allowListCheck } from '#server/dimse/scp-config.ts';
import { callerAllowed } from '#server/peers/caller-check.ts';
import { createStoreReceiver, INDEX_LINGER_MS } from '#server/dimse/store-import.ts';
import { UPLOADS_DIR } from '#server/imports/upload.ts';
import { stagingTempPath } from '#server/imports/archive.ts';
import { join } from 'node:path';
import type { Services } from '#server/services.ts';
import { readSyncStatus, startSyncAgent, type SyncAgent, type SyncStatus } from '#server/sync/agent.ts';
import { sealHubLink } from '#server/sync/hub-link.ts';
import { isSqlite } from '#server/store/sqlite.ts';
import { startWalCheckpointer, type WalCheckpointer } from '#server/store/wal-checkpointer.ts';
import type { SyncReport } from '#server/sync/client.ts';

/** Sync as the routes see it: the status, and a round on demand (null: not linked or it failed). */
export type SyncControl = { status(): Promise<SyncStatus>; runNow(): Promise<SyncReport | null> };

/** mia's AE title as the calling AE of routing's associations when no DICOM listener is configured. */
const MIA_AE_TITLE = 'MIA';

export type RuntimeState = 'created' | 'running' | 'stopping' | 'stopped';

export type RuntimeOptions = {
  /**
   * A server runs queued analyses, resumes imports and watches the folder by itself; a CLI
   * command runs only the jobs it names (AnalysisQueue.runJob) and starts no background work.
   */
  background: boolean;
};

export type Runtime = Services & {
  readonly frames: FrameCache;
  /** A workstation's sync with its hub; rounds run in the background once started and linked. */
  readonly sync: SyncControl;
  readonly imports: ImportService;
  readonly analyses: AnalysisQueue;
  /** Audit events of requests, written after their responses. */
  readonly audit: AuditWriter;
  /** Sends the send jobs of routing rules (in the background when started with background work). */
  readonly routing: SendWorker;
  /** The DICOM listener's port and AE title once started; null when none is configured. */
  dicomListener(): { port: number; aeTitle: string } | null;
  /** Retrieves from PACS and DICOMweb servers running in this process (server/query-retrieve). */
  readonly retrieves: RetrieveRunner;
  state(): RuntimeState;
  /** Starts background work, once. */
  start(): Promise<void>;
  /** Stops every part in the reverse of the start order, once; later calls wait for the same stop. */
  stop(): Promise<void>;
  /**
   * The first step of stop alone: no analysis starts from here on, a running one goes back to
   * the queue at its next batch. For a host that bounds stop() by a timeout (Electron's quit)
   * and must not leave analysing even if requests are slow to drain.
   */
  quiesce(): Promise<void>;
  /**
   * The HTTP listener's close, run in its place in the stop order (after the analysis queue,
   * before imports and the database).
   */
  attachListener(close: () => Promise<void>): void;
};

export async function createRuntime(input: ServerConfigInput, options: RuntimeOptions = { background: true }): Promise<Runtime> {
  const config = resolveConfig(input);
  const log = createFileLogger(config.dataDir, config.logToStderr, { rotation: config.logRotation, dir: config.logDir });
  const folder = await openDataFolder(config.dataDir, { clock: config.clock, log, databaseUrl: config.databaseUrl });
  const { db, node, replica } = folder;
  const progress = await createProgressBus(db, node.id, log);
  const services: Services = { db, clock: config.clock, dataDir: config.dataDir, config, log, node, progress, replica };
  const frames = createFrameCache();
  const audit = createAuditWriter(db, log);
  const imports = createImportService(services);
  const analyses = new AnalysisQueue(services, { autoRun: options.background });
  const retrieves = createRetrieveRunner({ ...services, imports });
  const routing = createSendWorker(services, {
    source: objectSource({ analysis: writeAnalysisSr, report: writeReportSr }),
    cStore: dimseCStoreSender(join(config.dataDir, UPLOADS_DIR)),
    aeTitle: config.dicom?.aeTitle ?? MIA_AE_TITLE,
    maxAttempts: config.routingMaxAttempts,
    pollMs: config.routingPollMs,
  });
  let auditRetention: AuditRetention | undefined;
  let syncAgent: SyncAgent | undefined;
  let dicomScp: DimseScp | undefined;
  let walCheckpointer: WalCheckpointer | undefined;
  // Instances answered over DICOM are indexed by it; what a process that is gone left answered
  // and not indexed, it indexes at start, with or without a DICOM listener now.
  const storeReceiver = createStoreReceiver(services, { lingerMs: config.dicom?.indexLingerMs ?? INDEX_LINGER_MS });
  let recovering: Promise<void> = Promise.resolve();
  const sync: SyncControl = {
    status: async () => (syncAgent ? await syncAgent.status() : await readSyncStatus(services, false, config.secretBox)),
    runNow: async () => (syncAgent ? await syncAgent.runNow() : null),
  };
  let closeListener: (() => Promise<void>) | undefined;
  let state: RuntimeState = 'created';
  let stopping: Promise<void> | undefined;

  const stopAll = async (): Promise<void> => {
    await syncAgent?.stop();
    await analyses.stop();
    // Before the database closes: a send under way is aborted and its job tried again later.
    await routing.stop();
    const listener = closeListener;
    closeListener = undefined;
    await listener?.();
    // Before the database closes: a retrieve under way is recorded as interrupted.
    await retrieves.stop();
    // Like the HTTP listener: no new associations; a store being imported is answered first.
    // What a failing disk keeps from being indexed stays in the intake log for the next start.
    storeReceiver.stopping();
    await dicomScp?.stop();
    await recovering;
    await storeReceiver.stop();
    // The requests are done; their audit events must be stored before the database closes.
    await audit.stop();
    await imports.stop();
    await auditRetention?.stop();
    await progress.stop();
    // After every writer: the database's close then checkpoints what is left, as before.
    await walCheckpointer?.stop();
    await log.close();
    await folder.close();
    state = 'stopped';
  };

  return {
    ...services,
    frames,
    sync,
    imports,
    analyses,
    audit,
    routing,
    retrieves,
    dicomListener: () => (dicomScp ? { port: dicomScp.port, aeTitle: dicomScp.aeTitle } : null),
    state: () => state,
    async start() {
      if (state !== 'created') return;
      state = 'running';
      // Checkpoints off the event loop; without the worker SQLite's automatic ones stay on.
      if (options.background && isSqlite(db)) {
        walCheckpointer = await startWalCheckpointer(db, { log }).catch((err: unknown) => {
          log.error('store.wal_checkpointer_unavailable', { error: err instanceof Error ? err.message : 'non-error' });
          return undefined;
        });
      }
      if (options.background) imports.start();
      await analyses.start();
      if (options.background) recovering = storeReceiver.recover();
      if (options.background && config.dicom) {
        const dicom = config.dicom;
        const listed = allowListCheck(dicom.allow);
        dicomScp = await startDimseScp({
          ...dicom,
          // Received straight into the archive's staging folder: the import renames the file into
          // place, and a later start removes what a dead process left there (leftovers.ts).
          spoolFile: () => stagingTempPath(config.dataDir),
          // The admin's DICOM peers with "allow incoming", and any --dicom-allow entries.
          isCallerAllowed: async (caller) => (await listed(caller)) || (await callerAllowed(services, caller)),
          receiver: storeReceiver,
          log,
        });
      }
      if (options.background) {
        await retrieves.sweep();
        if (config.routingPollMs > 0) routing.start();
        auditRetention = startAuditRetention({ db, clock: config.clock, dataDir: config.dataDir, retentionDays: config.auditRetentionDays, log });
        // A hub is what workstations sync with; it runs no rounds of its own. An interval of 0
        // leaves rounds to "Sync now" and mia sync now.
        if (!config.hubMode) {
          // A key `mia sync join` wrote in the clear is sealed once the desktop's keychain is here.
          if (config.secretBox && sealHubLink(config.dataDir, config.secretBox)) log.info('sync.key_sealed', {});
          syncAgent = startSyncAgent(services, config.syncIntervalMs);
        }
      }
    },
    stop() {
      if (!stopping) {
        state = 'stopping';
        stopping = stopAll();
      }
      return stopping;
    },
    quiesce() {
      return analyses.stop();
    },
    attachListener(close) {
      closeListener = close;
    },
  };
}
