/**
 * A TCP proxy that misbehaves on purpose, for sync's fault tests (issue 13): a workstation reaches
 * the hub through it. The kernel here has no netem, so delay, loss and partitions are made in
 * user space, per connection and per direction:
 *
 * - delay with jitter: every chunk waits `delayMs` plus up to `jitterMs` (seeded), in order;
 * - drop after N bytes: a connection's answer is cut after `dropAfterBytes` bytes from the target,
 *   both sides closed, as a network that dies mid-response (`dropUploadAfterBytes`: mid-upload);
 * - reset: new connections are answered with a TCP reset;
 * - blackhole: nothing is forwarded either way and nothing is closed (a partition: packets vanish);
 * - cut the answer to one kind of request (`cutAnswerTo`): the lost acknowledgement;
 * - a schedule of plans over time (`schedule`), e.g. partitioned from 2 s to 5 s, then healed.
 *
 * A plan applies from the moment it is set, to connections old and new.
 */
import { createServer, connect, type Server, type Socket } from 'node:net';
import { seededRandom } from './random.ts';

export type FaultPlan = {
  delayMs?: number;
  jitterMs?: number;
  dropAfterBytes?: number;
  /** A connection is cut after this many bytes towards the target: an upload the network kills. */
  dropUploadAfterBytes?: number;
  reset?: boolean;
  blackhole?: boolean;
  /**
   * Cuts the answer to a request whose request line starts with this (e.g. 'POST /v1/sync/push'):
   * the server did the work, the client never hears of it - an acknowledgement lost in transit.
   */
  cutAnswerTo?: string;
  /**
   * Holds the answer to a request whose request line starts with this, until the plan changes:
   * the server has done the work and answered, the client has not heard yet (kill it meanwhile).
   */
  holdAnswerTo?: string;
};

export type FaultProxy = {
  readonly port: number;
  readonly url: string;
  /** The plan from now on. */
  set(plan: FaultPlan): void;
  /** Plans to apply at times after now (ms), in order; the last one stays. */
  schedule(steps: readonly { atMs: number; plan: FaultPlan }[]): void;
  readonly stats: { connections: number; bytesToTarget: number; bytesToClient: number; cut: number; resets: number };
  close(): Promise<void>;
};


export async function startFaultProxy(target: { host: string; port: number }, seed = 1): Promise<FaultProxy> {
  let plan: FaultPlan = {};
  const random = seededRandom(seed);
  const timers = new Set<NodeJS.Timeout>();
  const sockets = new Set<Socket>();
  const stats = { connections: 0, bytesToTarget: 0, bytesToClient: 0, cut: 0, resets: 0 };

  const later = (ms: number, run: () => void): void => {
    const timer = setTimeout(() => {
      timers.delete(timer);
      run();
    }, ms);
    timers.add(timer);
  };

  /** Called when the plan changes: held data goes on once the partition heals. */
  const healers = new Set<() => void>();

  /**
   * Forwards one direction, chunk by chunk, each after the plan's delay and never out of order.
   * During a blackhole the bytes are held, not dropped: TCP under a partition loses packets and
   * sends them again, so the stream resumes whole if the partition ends before either side
   * gives up (dropping bytes from a stream would be a fault no network makes).
   */
  const pipe = (from: Socket, to: Socket, toClient: boolean, cut: () => void, conn: { request: string }): void => {
    const holding = (): boolean => plan.blackhole === true || (toClient && plan.holdAnswerTo !== undefined && conn.request.startsWith(plan.holdAnswerTo));
    let lastDue = 0;
    let sent = 0;
    const held: Buffer[] = [];
    let endHeld = false;
    const deliver = (chunk: Buffer): void => {
      // Bytes for a side that is gone: the peer's TCP answers them with a reset.
      if (to.destroyed) {
        from.destroy();
        return;
      }
      let part = chunk;
      // HTTP/1.1 without pipelining: the answer on a connection is to its latest request line.
      if (!toClient && /^[A-Z]+ \//.test(chunk.subarray(0, 16).toString('latin1'))) conn.request = chunk.subarray(0, 200).toString('latin1').split('\r\n')[0] ?? '';
      if (toClient && plan.cutAnswerTo !== undefined && conn.request.startsWith(plan.cutAnswerTo)) {
        cut();
        return;
      }
      const limit = toClient ? plan.dropAfterBytes : plan.dropUploadAfterBytes;
      if (limit !== undefined && sent + part.length > limit) part = part.subarray(0, Math.max(0, limit - sent));
      sent += part.length;
      if (toClient) stats.bytesToClient += part.length;
      else stats.bytesToTarget += part.length;
      if (part.length > 0) to.write(part);
      if (part.length < chunk.length) cut();
    };
    // One queue per direction, drained by one timer in order: timers of their own per chunk can
    // fire out of order (their delays are rounded to whole milliseconds from different starts).
    const queue: { due: number; run: () => void }[] = [];
    let draining = false;
    const drain = (): void => {
      draining = false;
      while (queue.length > 0 && queue[0]!.due <= performance.now()) queue.shift()!.run();
      if (queue.length > 0) {
        draining = true;
        later(Math.max(1, queue[0]!.due - performance.now()), drain);
      }
    };
    const enqueue = (due: number, run: () => void): void => {
      queue.push({ due, run });
      if (!draining) drain();
    };
    const forward = (chunk: Buffer): void => {
      const wait = (plan.delayMs ?? 0) + (plan.jitterMs ? random() * plan.jitterMs : 0);
      const due = Math.max(lastDue, performance.now() + wait);
      lastDue = due;
      enqueue(due, () => deliver(chunk));
    };
    const finish = (): void => enqueue(lastDue, () => to.end());
    const heal = (): void => {
      if (holding()) return;
      for (const chunk of held.splice(0)) forward(chunk);
      if (endHeld) {
        endHeld = false;
        finish();
      }
    };
    healers.add(heal);
    from.on('close', () => healers.delete(heal));
    from.on('data', (chunk: Buffer) => {
      if (holding() || held.length > 0) held.push(chunk);
      else forward(chunk);
    });
    from.on('end', () => {
      if (holding() || held.length > 0) endHeld = true;
      else finish();
    });
  };

  const server: Server = createServer((client) => {
    stats.connections += 1;
    if (plan.reset) {
      stats.resets += 1;
      client.resetAndDestroy();
      return;
    }
    const upstream = connect(target.port, target.host);
    sockets.add(client);
    sockets.add(upstream);
    const closeBoth = (): void => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    let cutting = false;
    const cut = (): void => {
      if (cutting) return;
      cutting = true;
      stats.cut += 1;
      // Flush what was written, then close: the client sees a short answer and the end.
      client.end(() => closeBoth());
      upstream.destroy();
    };
    const conn = { request: '' };
    pipe(client, upstream, false, cut, conn);
    pipe(upstream, client, true, cut, conn);
    client.on('error', closeBoth);
    upstream.on('error', closeBoth);
    client.on('close', closeBoth);
    // The target went away without ending its side (a crash, a reset): so does the client's.
    let upstreamEnded = false;
    upstream.on('end', () => (upstreamEnded = true));
    upstream.on('close', () => {
      if (!upstreamEnded && !cutting) closeBoth();
    });
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('fault proxy has no port');
  const port = address.port;

  return {
    port,
    url: `http://127.0.0.1:${port}`,
    set(next) {
      plan = { ...next };
      for (const heal of healers) heal();
    },
    schedule(steps) {
      for (const step of steps) {
        later(step.atMs, () => {
          plan = { ...step.plan };
          for (const heal of healers) heal();
        });
      }
    },
    stats,
    async close() {
      for (const timer of timers) clearTimeout(timer);
      timers.clear();
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
