/**
 * Server configuration: what a host (the CLI, Electron main, a test) decides. Everything has a
 * safe default, so `createServer({ dataDir })` is a loopback-only workstation server.
 */
import { z } from 'zod';
import type { Clock } from '#server/clock.ts';
import { systemClock } from '#server/clock.ts';

const rateLimitSchema = z.object({
  /** Requests a key (or an address without a key) may make per window. */
  requests: z.number().int().positive(),
  windowMs: z.number().int().positive(),
  /** Failed authentications an address may make per window before it is slowed down. */
  authFailures: z.number().int().positive(),
});
export type RateLimitConfig = z.infer<typeof rateLimitSchema>;

export type ServerConfig = {
  dataDir: string;
  /** Extra Host header names accepted besides loopback ones (a hub's DNS name). */
  allowedHosts: readonly string[];
  /** Origins allowed by CORS. Empty: same-origin only; never a wildcard. */
  allowedOrigins: readonly string[];
  /** A hub serves many workstations on the network; some workstation-only routes are off. */
  hubMode: boolean;
  rateLimit: RateLimitConfig;
  clock: Clock;
  /** Where log lines go besides the data folder's log file; tests pass a silent sink. */
  logToStderr: boolean;
  /** A folder whose new files are imported once stable (workstations); null: no watching. */
  watchDir: string | null;
  /** How long a watched file's size and mtime must stay unchanged before it is imported. */
  watchStableMs: number;
  /** The built renderer (renderer/dist) served at /; null serves the API alone. */
  uiDir: string | null;
};

export type ServerConfigInput = Partial<ServerConfig> & { dataDir: string };

export const DEFAULT_RATE_LIMIT: RateLimitConfig = {
  requests: 30_000,
  windowMs: 60_000,
  authFailures: 60,
};

export function resolveConfig(input: ServerConfigInput): ServerConfig {
  return {
    dataDir: input.dataDir,
    allowedHosts: input.allowedHosts ?? [],
    allowedOrigins: input.allowedOrigins ?? [],
    hubMode: input.hubMode ?? false,
    rateLimit: rateLimitSchema.parse(input.rateLimit ?? DEFAULT_RATE_LIMIT),
    clock: input.clock ?? systemClock,
    logToStderr: input.logToStderr ?? false,
    watchDir: input.watchDir ?? null,
    watchStableMs: input.watchStableMs ?? 3000,
    uiDir: input.uiDir ?? null,
  };
}
