/**
 * The server as a library: `createServer(config)` opens the data folder and returns something
 * to listen on and close. Hosts (the CLI, Electron main, tests, benchmarks) all start it this way.
 */
import { createServer as createHttpServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type express from 'express';
import { resolveConfig, type ServerConfig, type ServerConfigInput } from '#server/config.ts';
import { startAnalysisQueue } from '#server/analysis/analysis-queue.ts';
import { startAuditRetention } from '#server/audit/retention.ts';
import { createApp } from '#server/http/app.ts';
import { startImportService } from '#server/imports/import-service.ts';
import { createFileLogger } from '#server/log.ts';
import type { Services } from '#server/services.ts';
import { openDataFolder } from '#server/data-folder.ts';

export type MiaServer = {
  app: express.Express;
  services: Services;
  config: ServerConfig;
  /** Listens on host:port (port 0 picks a free one) and resolves with the URL. */
  listen(port?: number, host?: string): Promise<string>;
  close(): Promise<void>;
};

export function createServer(input: ServerConfigInput): MiaServer {
  const config = resolveConfig(input);
  const log = createFileLogger(config.dataDir, config.logToStderr, { rotation: config.logRotation });
  const db = openDataFolder(config.dataDir, { clock: config.clock, log });
  const services: Services = { db, clock: config.clock, dataDir: config.dataDir, config, log };
  const app = createApp(services);
  const imports = startImportService(services);
  const analyses = startAnalysisQueue(services, { autoRun: true });
  const auditRetention = startAuditRetention({ db, clock: config.clock, dataDir: config.dataDir, retentionDays: config.auditRetentionDays, log });
  let http: Server | undefined;

  return {
    app,
    services,
    config,
    listen(port = 0, host = '127.0.0.1') {
      return new Promise((resolve, reject) => {
        const limits = config.httpLimits;
        const server = createHttpServer(
          {
            headersTimeout: limits.headersTimeoutMs,
            requestTimeout: limits.requestTimeoutMs,
            // Node checks both timeouts on this beat (every 30 s by default, which let half-open
            // sockets stay for half a minute); a socket is now cut at most a second after its time.
            connectionsCheckingInterval: Math.max(50, Math.min(1_000, Math.floor(limits.headersTimeoutMs / 4))),
          },
          app,
        );
        server.keepAliveTimeout = limits.keepAliveTimeoutMs;
        // Beyond the cap Node closes new sockets as they arrive: each held one costs a descriptor
        // and memory, and a flood of them must not starve the process.
        server.maxConnections = limits.maxConnections;
        server.once('error', reject);
        server.listen(port, host, () => {
          const address = server.address() as AddressInfo;
          http = server;
          const shownHost = address.family === 'IPv6' ? `[${address.address}]` : address.address;
          resolve(`http://${shownHost}:${address.port}`);
        });
      });
    },
    async close() {
      const server = http;
      http = undefined;
      // First, so no analysis starts while requests drain: running ones go back to the queue at
      // their next batch, and sessions are released.
      await analyses.stop();
      if (server) {
        // Stop accepting, let in-flight requests finish their writes, then drop idle sockets.
        const closed = new Promise<void>((resolve) => server.close(() => resolve()));
        server.closeIdleConnections();
        await closed;
      }
      await imports.stop();
      await auditRetention.stop();
      await log.close();
      db.close();
    },
  };
}
