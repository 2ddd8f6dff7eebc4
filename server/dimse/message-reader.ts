/**
 * DIMSE messages out of P-DATA-TF PDVs (PS3.7 6.3, PS3.8 Annex E): a command (bounded, kept in
 * memory) and then, when its Command Data Set Type says so, a data set handed fragment by
 * fragment to a sink the receiver chooses (a file for C-STORE, a bounded buffer for query
 * responses), so a large instance never has to fit in memory.
 */
import { decodeCommand, hasDataSet, MAX_COMMAND_BYTES, type Command } from '#server/dimse/command-set.ts';
import { decodePData, PduError } from '#server/dimse/pdu.ts';

export type DataSink = {
  write(chunk: Buffer): Promise<void>;
  end(): Promise<void>;
  /** Drops what was received (an abort mid-transfer). */
  discard(): Promise<void>;
};

export type DimseMessage<S extends DataSink = DataSink> = { contextId: number; command: Command; data: S | null };

export class MessageReader<S extends DataSink> {
  private commandParts: Buffer[] = [];
  private commandBytes = 0;
  private current: { contextId: number; command: Command; sink: S } | undefined;

  constructor(
    /** Accepted presentation context ids. */
    private readonly contexts: ReadonlySet<number>,
    private readonly openSink: (contextId: number, command: Command) => Promise<S>,
    private readonly onMessage: (message: DimseMessage<S>) => Promise<void>,
  ) {}

  /** True while a data set is being received (an abort now must discard it). */
  get midDataSet(): boolean {
    return this.current !== undefined;
  }

  async receive(body: Buffer): Promise<void> {
    for (const pdv of decodePData(body)) {
      if (!this.contexts.has(pdv.contextId)) throw new PduError(`PDV on presentation context ${pdv.contextId}, which was not accepted`);
      if (pdv.command) {
        if (this.current) throw new PduError('command fragment while a data set was being received');
        this.commandBytes += pdv.data.length;
        if (this.commandBytes > MAX_COMMAND_BYTES) throw new PduError(`command set longer than ${MAX_COMMAND_BYTES} bytes`);
        this.commandParts.push(Buffer.from(pdv.data));
        if (!pdv.last) continue;
        const command = decodeCommand(Buffer.concat(this.commandParts));
        this.commandParts = [];
        this.commandBytes = 0;
        if (hasDataSet(command)) {
          this.current = { contextId: pdv.contextId, command, sink: await this.openSink(pdv.contextId, command) };
        } else {
          await this.onMessage({ contextId: pdv.contextId, command, data: null });
        }
        continue;
      }
      const current = this.current;
      if (!current) throw new PduError('data set fragment without a command before it');
      if (pdv.contextId !== current.contextId) throw new PduError('data set fragment on another presentation context than its command');
      await current.sink.write(pdv.data);
      if (!pdv.last) continue;
      this.current = undefined;
      await current.sink.end();
      await this.onMessage({ contextId: current.contextId, command: current.command, data: current.sink });
    }
  }

  /** Discards a data set left half received. */
  async discard(): Promise<void> {
    const current = this.current;
    this.current = undefined;
    await current?.sink.discard();
  }
}

/** A data set kept in memory, up to a cap (query identifiers, a few KiB). */
export class MemorySink implements DataSink {
  private parts: Buffer[] = [];
  private size = 0;
  constructor(private readonly maxBytes: number) {}
  write(chunk: Buffer): Promise<void> {
    this.size += chunk.length;
    if (this.size > this.maxBytes) return Promise.reject(new PduError(`data set longer than ${this.maxBytes} bytes`));
    this.parts.push(Buffer.from(chunk));
    return Promise.resolve();
  }
  end(): Promise<void> {
    return Promise.resolve();
  }
  discard(): Promise<void> {
    this.parts = [];
    return Promise.resolve();
  }
  bytes(): Buffer {
    return Buffer.concat(this.parts);
  }
}
