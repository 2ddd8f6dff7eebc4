/**
 * Server configuration: what a host (the CLI, Electron main, a test) decides. Everything has a
 * safe default, so `createServer({ dataDir })` is a loopback-only workstation server.
 */
import { availableParallelism } from 'node:os';
import { z } from 'zod';
import type { Clock } from '#server/clock.ts';
import { systemClock } from '#server/clock.ts';
import type { SecretBox } from '#server/sync/hub-link.ts';
import { DEFAULT_LOG_ROTATION, logRotationSchema, type LogRotation } from '#server/log.ts';
import { dicomConfigSchema, type DicomConfig, type DicomConfigInput } from '#server/dimse/scp-config.ts';

const rateLimitSchema = z.object({
  /** Requests a key (or an address without a key) may make per window. */
  requests: z.number().int().positive(),
  windowMs: z.number().int().positive(),
  /** Failed authentications an address may make per window before it is slowed down. */
  authFailures: z.number().int().positive(),
});
export type RateLimitConfig = z.infer<typeof rateLimitSchema>;

/** What one client may hold of the HTTP server (issue 10: 1,500 half-open sockets were held). */
const httpLimitsSchema = z
  .object({
    /** Sockets open at once; further ones are closed as they arrive. */
    maxConnections: z.number().int().min(1).max(65_536),
    /** A request's headers must be complete this long after it starts: idle, half-sent and
     * trickling connections (slowloris) get 408 and are closed. */
    headersTimeoutMs: z.number().int().positive(),
    /** A whole request, body included; generous, as a 2 GiB upload on a slow network takes minutes. */
    requestTimeoutMs: z.number().int().positive(),
    /** An idle kept-alive connection is closed after this. */
    keepAliveTimeoutMs: z.number().int().positive(),
    /** Parts of one multipart upload (POST /v1/instances); more are 413. */
    maxUploadParts: z.number().int().min(1).max(100_000),
    /** An answer whose client stopped reading (its bytes wait, none leave) this long is cut,
     * and its file closed (http/send-stall.ts). */
    sendStallMs: z.number().int().positive(),
  })
  // Node refuses a header timeout longer than the request timeout.
  .refine((limits) => limits.headersTimeoutMs <= limits.requestTimeoutMs, { message: 'headersTimeoutMs must not exceed requestTimeoutMs' });
export type HttpLimits = z.infer<typeof httpLimitsSchema>;

export type ServerConfig = {
  dataDir: string;
  /**
   * A hub's PostgreSQL (postgres://user@host:port/db), shared by every API node; null: the data
   * folder's own SQLite file (workstations). The data folder still holds the archive, exports
   * and logs, on a file system shared by the nodes.
   */
  databaseUrl: string | null;
  /** Extra Host header names accepted besides loopback ones (a hub's DNS name). */
  allowedHosts: readonly string[];
  /**
   * Addresses of reverse proxies in front of a hub whose X-Forwarded-For is believed: the client
   * address that failed-authentication throttling and the audit trail use is then the one the
   * proxy saw, not the proxy's own (every client behind it would share one). Empty: the socket's.
   */
  trustedProxies: readonly string[];
  /** Origins allowed by CORS. Empty: same-origin only; never a wildcard. */
  allowedOrigins: readonly string[];
  /** A hub serves many workstations on the network; some workstation-only routes are off. */
  hubMode: boolean;
  rateLimit: RateLimitConfig;
  httpLimits: HttpLimits;
  clock: Clock;
  /**
   * Seals secrets kept on disk with the OS keychain (the desktop app passes Electron's
   * safeStorage); null headless, where the device key is a 0600 file (server/sync/hub-link.ts).
   */
  secretBox: SecretBox | null;
  /** Where log lines go besides the data folder's log file; tests pass a silent sink. */
  logToStderr: boolean;
  /** Where mia.log goes; null: <data>/logs. Each node of a hub needs its own. */
  logDir: string | null;
  /** mia.log rotates at maxBytes into mia.log.1 ... mia.log.<keep> (default 10 MiB, 5 kept). */
  logRotation: LogRotation;
  /** A folder whose new files are imported once stable (workstations); null: no watching. */
  watchDir: string | null;
  /** How long a watched file's size and mtime must stay unchanged before it is imported. */
  watchStableMs: number;
  /** The built renderer (renderer/dist) served at /; null serves the API alone. */
  uiDir: string | null;
  /** Folders holding bundled models (models/<id>/); null: the repo's models/ beside server/.
   * Electron passes its resources path here. Users' models live in <data>/models/ in any case. */
  modelsDirs: readonly string[] | null;
  /** The model used until an admin selects another; null: the first valid bundled model. */
  defaultModelId: string | null;
  /** Analyses run at once; each already uses intraOpThreads cores. */
  analysisConcurrency: number;
  /** onnxruntime threads inside one operator (intra) and across operators (inter). */
  intraOpThreads: number;
  interOpThreads: number;
  /** Slices per session.run: bounds the memory of one batch; small batches keep the pipeline
   * between preprocessing and the inference worker short to fill and to drain. */
  analysisBatchSize: number;
  /** Queue an analysis for every scan an import job touched, when the job completes. */
  analyzeAfterImport: boolean;
  /**
   * Worker threads that render a large export (server/exports/parallel-export.ts); 0 renders it
   * in the event loop. Each adds ~75 MB of memory while it runs (BENCHMARKS.md, exports).
   */
  exportWorkers: number;
  /** Days an audit event stays in the database before it moves to <data>/audit-archive/,
   * where GET /v1/audit still reads it; nothing deletes audit events (issue 10). */
  auditRetentionDays: number;
  /** A workstation linked to a hub (mia sync join) syncs this often, ms; 0 turns the background
   * rounds off (mia sync now still works). A hub never runs them. */
  syncIntervalMs: number;
  /** How often a server looks for due send jobs of routing rules, ms; 0: no background sending
   * (jobs then wait for `mia routes send` or a server that sends). */
  routingPollMs: number;
  /** Attempts of a send job before it gives up (transient failures; a refusal gives up at once). */
  routingMaxAttempts: number;
  /** How often a server takes over imports whose process died (a `mia import` killed while the
   * server runs), ms: without it such a job showed `running` and held back automatic analyses
   * until the next start. */
  importTakeoverMs: number;
  /** The DICOM listener (C-ECHO, C-STORE: server/dimse/scp.ts); null: none. */
  dicom: DicomConfig | null;
};

export type ServerConfigInput = Partial<Omit<ServerConfig, 'dicom'>> & { dataDir: string; dicom?: DicomConfigInput | null };

export const DEFAULT_RATE_LIMIT: RateLimitConfig = {
  requests: 30_000,
  windowMs: 60_000,
  authFailures: 60,
};

/** The defaults, listed in docs/security.md. A hub serves a department: more connections. */
export const DEFAULT_HTTP_LIMITS: HttpLimits = {
  maxConnections: 256,
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 10 * 60_000,
  keepAliveTimeoutMs: 5_000,
  maxUploadParts: 1_000,
  sendStallMs: 60_000,
};
export const HUB_MAX_CONNECTIONS = 1_024;

export const DEFAULT_AUDIT_RETENTION_DAYS = 90;
export const DEFAULT_SYNC_INTERVAL_MS = 10_000;

export function resolveConfig(input: ServerConfigInput): ServerConfig {
  return {
    dataDir: input.dataDir,
    databaseUrl: input.databaseUrl ?? null,
    allowedHosts: input.allowedHosts ?? [],
    allowedOrigins: input.allowedOrigins ?? [],
    trustedProxies: input.trustedProxies ?? [],
    hubMode: input.hubMode ?? false,
    rateLimit: rateLimitSchema.parse(input.rateLimit ?? DEFAULT_RATE_LIMIT),
    httpLimits: httpLimitsSchema.parse(
      input.httpLimits ?? { ...DEFAULT_HTTP_LIMITS, maxConnections: input.hubMode ? HUB_MAX_CONNECTIONS : DEFAULT_HTTP_LIMITS.maxConnections },
    ),
    clock: input.clock ?? systemClock,
    secretBox: input.secretBox ?? null,
    logToStderr: input.logToStderr ?? false,
    logDir: input.logDir ?? null,
    logRotation: logRotationSchema.parse(input.logRotation ?? DEFAULT_LOG_ROTATION),
    watchDir: input.watchDir ?? null,
    watchStableMs: input.watchStableMs ?? 3000,
    uiDir: input.uiDir ?? null,
    modelsDirs: input.modelsDirs ?? null,
    defaultModelId: input.defaultModelId ?? null,
    analysisConcurrency: z.number().int().min(1).max(16).parse(input.analysisConcurrency ?? 1),
    // One core is left to read and preprocess the next batch while the others infer
    // (engine.ts); on two cores that is as fast end to end as two inference threads.
    intraOpThreads: z.number().int().min(1).max(64).parse(input.intraOpThreads ?? Math.max(1, Math.min(4, availableParallelism() - 1))),
    interOpThreads: z.number().int().min(1).max(64).parse(input.interOpThreads ?? 1),
    analysisBatchSize: z.number().int().min(1).max(256).parse(input.analysisBatchSize ?? 8),
    analyzeAfterImport: input.analyzeAfterImport ?? false,
    exportWorkers: z.number().int().min(0).max(16).parse(input.exportWorkers ?? Math.min(4, availableParallelism())),
    auditRetentionDays: z.number().int().min(1).max(36_500).parse(input.auditRetentionDays ?? DEFAULT_AUDIT_RETENTION_DAYS),
    syncIntervalMs: z.number().int().min(0).max(24 * 3_600_000).parse(input.syncIntervalMs ?? DEFAULT_SYNC_INTERVAL_MS),
    routingPollMs: z.number().int().min(0).max(3_600_000).parse(input.routingPollMs ?? 1_000),
    routingMaxAttempts: z.number().int().min(1).max(100).parse(input.routingMaxAttempts ?? 8),
    importTakeoverMs: z.number().int().min(50).max(3_600_000).parse(input.importTakeoverMs ?? 30_000),
    dicom: input.dicom ? dicomConfigSchema.parse(input.dicom) : null,
  };
}
