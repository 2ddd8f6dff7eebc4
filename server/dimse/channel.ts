/**
 * One DICOM connection, for either side: PDUs framed by a bounded reader and handled one at a
 * time (the socket is paused while a handler runs, so a slow disk slows the sender instead of
 * filling memory), a deadline that a silent or trickling peer cannot extend, and the ways a
 * connection ends: release, A-ABORT, or the socket closing.
 */
import type { Socket } from 'node:net';
import { ABORT, encodeAbort, encodePData, PduError } from '#server/dimse/pdu.ts';
import { associationBounds, PduReader, type RawPdu } from '#server/dimse/pdu-reader.ts';
import { encodeCommand, type Command } from '#server/dimse/command-set.ts';

export type PduHandler = (pdu: RawPdu) => Promise<void>;

/** The largest PDU mia sends when the peer announces no limit (PS3.8 D.1: 0 means none). */
export const UNLIMITED_SEND_PDU = 1024 * 1024;

/**
 * How long a send may wait for the peer to take bytes before the connection is aborted. A peer
 * whose process hung with its connection up takes nothing and never closes: a C-STORE of an
 * object larger than the socket buffers then waited for good, and with it every routing send
 * behind it and the server's stop.
 */
export const DEFAULT_SEND_STALL_MS = 60_000;

export class PduChannel {
  private reader: PduReader;
  private readonly queue: Buffer[] = [];
  private pumping = false;
  private ended = false;
  private deadline: NodeJS.Timeout | undefined;
  private endReason: string | null = null;
  readonly closed: Promise<string | null>;

  constructor(
    readonly socket: Socket,
    maxReceivePdu: number,
    private handler: PduHandler,
    private readonly onProblem: (problem: string) => void,
    private readonly sendStallMs = DEFAULT_SEND_STALL_MS,
  ) {
    this.reader = new PduReader(associationBounds(maxReceivePdu));
    socket.setNoDelay(true);
    this.closed = new Promise((resolve) => {
      socket.once('close', () => {
        this.ended = true;
        this.clearDeadline();
        resolve(this.endReason);
      });
    });
    socket.on('error', (err: NodeJS.ErrnoException) => {
      if (!this.ended) this.endReason ??= `socket error ${err.code ?? err.name}`;
    });
    socket.on('data', (chunk: Buffer) => {
      this.queue.push(chunk);
      void this.pump();
    });
    socket.on('end', () => {
      if (!this.ended) this.endReason ??= this.reader.midPdu ? 'peer closed the connection in the middle of a PDU' : 'peer closed the connection';
      socket.end();
    });
  }

  get isOpen(): boolean {
    return !this.ended && !this.socket.destroyed;
  }

  setHandler(handler: PduHandler): void {
    this.handler = handler;
  }

  /**
   * The connection is aborted unless `clearDeadline` or another `setDeadline` comes first.
   * Bytes arriving do not push it back: only the protocol step the caller waits for does.
   */
  setDeadline(ms: number, what: string): void {
    this.clearDeadline();
    this.deadline = setTimeout(() => this.fail(new PduError(`${what} did not happen within ${Math.round(ms / 1000)} s`)), ms);
    this.deadline.unref();
  }

  clearDeadline(): void {
    if (this.deadline) clearTimeout(this.deadline);
    this.deadline = undefined;
  }

  async send(bytes: Buffer): Promise<void> {
    if (!this.isOpen) throw new Error('connection closed');
    if (!this.socket.write(bytes)) {
      await new Promise<void>((resolve, reject) => {
        const settle = (err?: Error): void => {
          clearTimeout(stalled);
          this.socket.off('drain', onDrain);
          this.socket.off('close', onClose);
          if (err) reject(err);
          else resolve();
        };
        const onDrain = (): void => settle();
        const onClose = (): void => settle(new Error('connection closed'));
        const stalled = setTimeout(() => {
          const problem = `the peer took none of what was sent for ${Math.round(this.sendStallMs / 1000)} s`;
          settle(new Error(problem));
          this.fail(new PduError(problem, ABORT.reasonNotSpecified));
        }, this.sendStallMs);
        this.socket.once('drain', onDrain);
        this.socket.once('close', onClose);
      });
    }
  }

  /** Ends the connection after what was written has gone out. */
  close(reason: string | null = null): void {
    this.endReason ??= reason;
    this.ended = true;
    this.clearDeadline();
    this.socket.end();
    // A peer that never closes its side must not keep the descriptor.
    setTimeout(() => this.socket.destroy(), 2000).unref();
  }

  /** A-ABORT (best effort) and close; the problem is reported once. */
  fail(problem: unknown): void {
    if (this.ended) return;
    const message = problem instanceof Error ? problem.message : String(problem);
    const reason = problem instanceof PduError ? problem.abortReason : ABORT.reasonNotSpecified;
    this.endReason = message;
    this.onProblem(message);
    if (!this.socket.destroyed) this.socket.write(encodeAbort(ABORT.sourceProvider, reason));
    this.close(message);
  }

  /** Abort requested by this side's user (the SCU giving up, the server stopping). */
  abort(reason: string): void {
    if (this.ended) return;
    this.endReason = reason;
    if (!this.socket.destroyed) this.socket.write(encodeAbort(ABORT.sourceUser, ABORT.reasonNotSpecified));
    this.close(reason);
  }

  setMaxReceive(maxReceivePdu: number): void {
    if (this.reader.midPdu) return;
    this.reader = new PduReader(associationBounds(maxReceivePdu));
  }

  private async pump(): Promise<void> {
    if (this.pumping) return;
    this.pumping = true;
    this.socket.pause();
    try {
      while (this.queue.length > 0 && !this.ended) {
        const chunk = this.queue.shift() ?? Buffer.alloc(0);
        for (const pdu of this.reader.push(chunk)) {
          await this.handler(pdu);
          if (this.ended) break;
        }
      }
    } catch (err) {
      this.fail(err);
    } finally {
      this.pumping = false;
      if (!this.ended && !this.socket.destroyed) this.socket.resume();
    }
  }
}

/** How many data bytes fit in one PDV of a P-DATA-TF the peer accepts. */
export function fragmentSize(peerMaxPdu: number): number {
  const max = peerMaxPdu === 0 ? UNLIMITED_SEND_PDU : Math.min(peerMaxPdu, UNLIMITED_SEND_PDU);
  return max - 6;
}

/** A DIMSE message's command, then its data set if any, each in PDVs the peer can take. */
export async function sendMessage(channel: PduChannel, contextId: number, peerMaxPdu: number, command: Command, data?: Buffer): Promise<void> {
  const size = fragmentSize(peerMaxPdu);
  await sendFragments(channel, contextId, size, encodeCommand(command), true);
  if (data) await sendFragments(channel, contextId, size, data, false);
}

async function sendFragments(channel: PduChannel, contextId: number, size: number, bytes: Buffer, command: boolean): Promise<void> {
  let at = 0;
  do {
    const end = Math.min(at + size, bytes.length);
    await channel.send(encodePData([{ contextId, command, last: end === bytes.length, data: bytes.subarray(at, end) }]));
    at = end;
  } while (at < bytes.length);
}
