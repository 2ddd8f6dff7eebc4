/**
 * Connections whose client stopped reading an answer. Node times out a request's arrival
 * (headersTimeout, requestTimeout) but not the answer's departure: a viewer tab or proxy that
 * stops reading a WADO-RS instance, an export download or an event stream, its connection still
 * up, held the answer's file open and kept the server from closing, for as long as the peer
 * lived. A connection whose written bytes wait unsent, with nothing leaving, for `stallMs` is
 * cut. A slow reader is not stalled: each time its buffer empties the clock starts again.
 */
import type { Server } from 'node:http';
import type { Socket } from 'node:net';

export function cutStalledSends(server: Server, stallMs: number): () => void {
  // When each connection's unsent bytes last stopped moving (absent: none are waiting).
  const stalledSince = new Map<Socket, number>();
  const open = new Set<Socket>();
  server.on('connection', (socket: Socket) => {
    open.add(socket);
    socket.on('drain', () => stalledSince.delete(socket));
    socket.once('close', () => {
      open.delete(socket);
      stalledSince.delete(socket);
    });
  });
  const look = (): void => {
    const now = performance.now();
    for (const socket of open) {
      if (!socket.writableNeedDrain) {
        stalledSince.delete(socket);
        continue;
      }
      const since = stalledSince.get(socket);
      if (since === undefined) stalledSince.set(socket, now);
      else if (now - since >= stallMs) socket.destroy();
    }
  };
  // A few looks per period: a stalled connection is cut between stallMs and 1.25 stallMs.
  const timer = setInterval(look, Math.max(50, Math.min(5_000, Math.floor(stallMs / 4))));
  timer.unref();
  return () => clearInterval(timer);
}
