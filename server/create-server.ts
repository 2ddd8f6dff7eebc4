/**
 * The server as a library: `createServer(config)` builds the runtime (server/runtime.ts), starts
 * it and returns something to listen on and close. Hosts (the CLI, Electron main, tests,
 * benchmarks) all start it this way and reach its parts through `runtime`.
 */
import { createServer as createHttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type express from 'express';
import type { ServerConfig, ServerConfigInput } from '#server/config.ts';
import { createApp } from '#server/http/app.ts';
import { answerClientError } from '#server/http/client-errors.ts';
import { endEventStreams } from '#server/http/event-streams.ts';
import { cutStalledSends } from '#server/http/send-stall.ts';
import { createRuntime, type Runtime } from '#server/runtime.ts';
import type { Services } from '#server/services.ts';

/**
 * How long a stopping server lets in-flight requests finish (an upload, an export being written)
 * before it cuts their connections: under the desktop app's 15 s wait for its server to stop.
 */
const SHUTDOWN_GRACE_MS = 10_000;

export type MiaServer = {
  app: express.Express;
  /** The narrow part domain code takes (database, clock, folder, config, log). */
  services: Services;
  runtime: Runtime;
  config: ServerConfig;
  /** Listens on host:port (port 0 picks a free one) and resolves with the URL. */
  listen(port?: number, host?: string): Promise<string>;
  close(): Promise<void>;
};

export async function createServer(input: ServerConfigInput): Promise<MiaServer> {
  const runtime = await createRuntime(input);
  const { config } = runtime;
  const app = createApp(runtime);
  await runtime.start();

  return {
    app,
    services: runtime,
    runtime,
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
        const stopWatching = cutStalledSends(server, limits.sendStallMs);
        server.on('clientError', (err: Error & { code?: string }, socket) => answerClientError(err, socket, config.clock));
        // Beyond the cap Node closes new sockets as they arrive: each held one costs a descriptor
        // and memory, and a flood of them must not starve the process.
        server.maxConnections = limits.maxConnections;
        server.once('error', reject);
        server.listen(port, host, () => {
          const address = server.address() as AddressInfo;
          runtime.attachListener(async () => {
            // Stop accepting, end event streams, let in-flight requests finish their writes and
            // drop each socket once it is idle; what is still open after the grace is cut.
            const closed = new Promise<void>((resolveClose) => server.close(() => resolveClose()));
            endEventStreams(app);
            server.closeIdleConnections();
            const sweep = setInterval(() => server.closeIdleConnections(), 100);
            const grace = setTimeout(() => server.closeAllConnections(), SHUTDOWN_GRACE_MS);
            await closed;
            clearInterval(sweep);
            clearTimeout(grace);
            stopWatching();
          });
          const shownHost = address.family === 'IPv6' ? `[${address.address}]` : address.address;
          resolve(`http://${shownHost}:${address.port}`);
        });
      });
    },
    close() {
      return runtime.stop();
    },
  };
}
