/**
 * mia's DIMSE acceptor (SCP): Verification (C-ECHO) and image Storage (C-STORE) on its own AE
 * title and port. It faces any host on the hospital network, so every step is bounded: the
 * number of associations, the time to negotiate one (ARTIM, PS3.8 9.1.5) and the time between
 * PDUs, every length read from the wire (pdu-reader.ts), and the size of a received instance,
 * which streams to a file instead of memory. A peer that breaks the protocol is aborted
 * and logged (without patient data); the listener goes on serving the next one.
 */
import { mkdir, open, rm, type FileHandle } from 'node:fs/promises';
import { createServer, type Server, type Socket } from 'node:net';
import { dirname } from 'node:path';
import type { Logger } from '#server/log.ts';
import { PRIVATE_DIR_MODE, PRIVATE_FILE_MODE } from '#server/private-files.ts';
import { PduChannel, sendMessage } from '#server/dimse/channel.ts';
import { COMMAND, NO_DATA_SET, STATUS, type Command } from '#server/dimse/command-set.ts';
import { MessageReader, type DataSink, type DimseMessage } from '#server/dimse/message-reader.ts';
import { encodeFileMeta, IMPLEMENTATION_CLASS_UID, IMPLEMENTATION_VERSION_NAME } from '#server/dimse/part10.ts';
import {
  APPLICATION_CONTEXT,
  decodeAbort,
  decodeAssociateRq,
  encodeAssociateAc,
  encodeAssociateRj,
  encodeReleaseRp,
  MIN_PDU_LENGTH,
  PC_RESULT,
  PDU,
  PduError,
  REJECT,
  ABORT,
  type AssociateRq,
  type ContextResult,
} from '#server/dimse/pdu.ts';
import type { RawPdu } from '#server/dimse/pdu-reader.ts';
import { IMAGE_STORAGE_CLASSES, isDecodableSyntax, VERIFICATION } from '#server/dimse/sop-classes.ts';
import { parseUid } from '#server/dicom/uid.ts';

export type CallerIdentity = { callingAeTitle: string; calledAeTitle: string; host: string };
/** Decides who may open an association (the DICOM peers module, or a configured list). */
export type IsCallerAllowed = (caller: CallerIdentity) => Promise<boolean>;

export type StoreOutcome = { status: number; errorComment?: string | undefined };
/**
 * A received instance as a Part 10 file: in memory (most), or spooled to a file as it arrived (one
 * larger than DimseScpOptions.memoryInstanceBytes); `synced` settles when the spool file's fsync,
 * started as it ended, has.
 */
export type ReceivedInstance = { kind: 'bytes'; bytes: Buffer } | { kind: 'file'; file: string; synced?: Promise<void> | undefined };
/** What receives the instances of one association: one import job, finished when it ends. */
export type StoreSession = {
  /** Imports the instance; resolves once it is durable (or refused) with the answer to send. */
  store(instance: ReceivedInstance): Promise<StoreOutcome>;
  /** Resolves once every instance stored so far is indexed (or given up on). */
  settled(): Promise<void>;
  close(ending: 'released' | 'aborted'): Promise<void>;
};
export type StoreReceiver = { openSession(caller: CallerIdentity): Promise<StoreSession> };

export type DimseScpOptions = {
  aeTitle: string;
  port: number;
  host: string;
  maxAssociations: number;
  /** From the TCP connection to a complete A-ASSOCIATE-RQ (ARTIM). */
  associationTimeoutMs: number;
  /** Between two complete PDUs of an established association. */
  idleTimeoutMs: number;
  /** The largest P-DATA-TF this side accepts (announced in the A-ASSOCIATE-AC). */
  maxPduLength: number;
  /** The largest data set of one C-STORE. */
  maxInstanceBytes: number;
  /** A data set up to this size is received in memory; a larger one streams to a spool file. */
  memoryInstanceBytes: number;
  /**
   * A new path for one received instance, in a folder only this process writes and that a later
   * start clears of what a dead process left. The runtime names a file in the archive's staging
   * folder, so the import renames it into place instead of copying it (server/imports/archive.ts).
   */
  spoolFile: () => string;
  isCallerAllowed: IsCallerAllowed;
  receiver: StoreReceiver;
  log: Logger;
};

export type DimseScp = { readonly port: number; readonly aeTitle: string; stop(): Promise<void> };

/** "::ffff:10.0.0.5" is how Node names an IPv4 peer on a dual-stack socket. */
export function peerHost(socket: Socket): string {
  const address = socket.remoteAddress ?? '';
  return address.startsWith('::ffff:') ? address.slice(7) : address;
}

/** The transfer syntax accepted for a proposed context, or the reason it is refused. */
function negotiate(abstractSyntax: string, proposed: readonly string[]): { result: number; transferSyntax: string } {
  if (abstractSyntax === VERIFICATION) {
    const syntax = proposed.find((t) => t === '1.2.840.10008.1.2' || t === '1.2.840.10008.1.2.1');
    return syntax ? { result: PC_RESULT.acceptance, transferSyntax: syntax } : { result: PC_RESULT.transferSyntaxesNotSupported, transferSyntax: '' };
  }
  if (!IMAGE_STORAGE_CLASSES.has(abstractSyntax)) return { result: PC_RESULT.abstractSyntaxNotSupported, transferSyntax: '' };
  // The caller's order is its preference (PS3.8 9.3.2.2); the first one mia decodes is taken, so
  // the instance is archived as sent, never transcoded.
  const syntax = proposed.find(isDecodableSyntax);
  return syntax ? { result: PC_RESULT.acceptance, transferSyntax: syntax } : { result: PC_RESULT.transferSyntaxesNotSupported, transferSyntax: '' };
}

/** Spool folders made by this process: one mkdir each, not one per instance. */
const madeSpoolDirs = new Set<string>();

/**
 * Once spooling, received fragments are gathered up to this many bytes before a write: bounded,
 * so a large instance streams to disk in few thread pool round trips.
 */
const SPOOL_WRITE_BYTES = 256 * 1024;

async function openSpoolFile(path: string): Promise<FileHandle> {
  const dir = dirname(path);
  if (!madeSpoolDirs.has(dir)) {
    await mkdir(dir, { recursive: true, mode: PRIVATE_DIR_MODE });
    madeSpoolDirs.add(dir);
  }
  return await open(path, 'wx', PRIVATE_FILE_MODE).catch(async (err: unknown) => {
    // The folder went away (removed by hand while serving): made again, once.
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    madeSpoolDirs.delete(dir);
    await mkdir(dir, { recursive: true, mode: PRIVATE_DIR_MODE });
    madeSpoolDirs.add(dir);
    return await open(path, 'wx', PRIVATE_FILE_MODE);
  });
}

/**
 * A C-STORE data set behind the Part 10 header mia writes: kept in memory up to `memoryBytes`,
 * past that streamed to a spool file (`spoolPath`, made only then).
 */
class InstanceSink implements DataSink {
  private size = 0;
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private handle: FileHandle | undefined;
  /** Set once the data set went past memory: the file it streams to. */
  path: string | undefined;
  /** The whole Part 10 file, once ended in memory. */
  bytes: Buffer | undefined;
  /**
   * The spool file's fsync and close, started when its last fragment is written: it runs while
   * the import reads and checks the file, instead of after, in the one answer's wait.
   */
  synced: Promise<void> | undefined;
  /** A write that failed (a full disk): the rest is drained and the store answered A700. */
  failure: NodeJS.ErrnoException | undefined;

  constructor(
    header: Buffer,
    private readonly spoolPath: () => string,
    private readonly maxBytes: number,
    private readonly memoryBytes: number,
  ) {
    this.pending.push(header);
    this.pendingBytes = header.length;
  }

  /**
   * Kept, not copied: a fragment is a view of its PDU's own buffer, which PduReader allocates per
   * PDU and never writes again. Copying each one cost a second copy of every instance (end()
   * concatenates them once) and its garbage.
   */
  private gather(chunk: Buffer): void {
    if (this.failure) return;
    this.pending.push(chunk);
    this.pendingBytes += chunk.length;
  }

  private async spill(): Promise<void> {
    const path = this.spoolPath();
    this.path = path;
    try {
      this.handle = await openSpoolFile(path);
    } catch (err) {
      this.failure = err as NodeJS.ErrnoException;
      this.pending = [];
      this.pendingBytes = 0;
    }
  }

  private async put(): Promise<void> {
    const handle = this.handle;
    const parts = this.pending;
    const bytes = this.pendingBytes;
    this.pending = [];
    this.pendingBytes = 0;
    if (this.failure || !handle || parts.length === 0) return;
    try {
      const { bytesWritten } = await handle.writev(parts);
      // A short write (a nearly full disk) would leave a hole: the store is refused instead.
      if (bytesWritten !== bytes) throw Object.assign(new Error(`spool write took ${bytesWritten} of ${bytes} bytes`), { code: 'EIO' });
    } catch (err) {
      this.failure = err as NodeJS.ErrnoException;
    }
  }

  async write(chunk: Buffer): Promise<void> {
    this.size += chunk.length;
    if (this.size > this.maxBytes) throw new PduError(`C-STORE data set larger than the ${this.maxBytes} bytes allowed`);
    this.gather(chunk);
    if (this.path === undefined && this.pendingBytes > this.memoryBytes) await this.spill();
    if (this.handle && this.pendingBytes >= SPOOL_WRITE_BYTES) await this.put();
  }

  async end(): Promise<void> {
    if (this.path === undefined) {
      this.bytes = Buffer.concat(this.pending, this.pendingBytes);
      this.pending = [];
      this.pendingBytes = 0;
      return;
    }
    await this.put();
    const handle = this.handle;
    this.handle = undefined;
    if (!handle) return;
    if (this.failure) {
      await handle.close();
      return;
    }
    const synced = handle.sync().finally(() => handle.close());
    // Awaited by the import (or settled by discard); a failure must not count as unhandled.
    void synced.catch(() => undefined);
    this.synced = synced;
  }

  async discard(): Promise<void> {
    this.pending = [];
    this.pendingBytes = 0;
    this.bytes = undefined;
    const handle = this.handle;
    this.handle = undefined;
    await handle?.close();
    await this.synced?.catch(() => undefined);
    if (this.path !== undefined) await rm(this.path, { force: true });
  }
}

/** The data set of a request mia does not serve: counted against the cap, then dropped. */
class DropSink implements DataSink {
  private size = 0;
  constructor(private readonly maxBytes: number) {}
  write(chunk: Buffer): Promise<void> {
    this.size += chunk.length;
    return this.size > this.maxBytes ? Promise.reject(new PduError('data set of an unsupported request too large')) : Promise.resolve();
  }
  end(): Promise<void> {
    return Promise.resolve();
  }
  discard(): Promise<void> {
    return Promise.resolve();
  }
}

type Sink = InstanceSink | DropSink;

/** How long a release waits for the association's instances to be indexed before it is answered. */
const RELEASE_WAIT_MS = 20_000;

/** Responses carry the request's SOP class and instance, and never a data set here. */
function response(request: Command, commandField: number, status: number, errorComment?: string): Command {
  return {
    commandField,
    messageIdBeingRespondedTo: request.messageId ?? 0,
    affectedSopClassUid: request.affectedSopClassUid,
    affectedSopInstanceUid: request.affectedSopInstanceUid,
    dataSetType: NO_DATA_SET,
    status,
    // LO is 64 characters at most (PS3.5 6.2).
    ...(errorComment ? { errorComment: errorComment.slice(0, 64) } : {}),
  };
}

/**
 * Connections that have not yet sent their A-ASSOCIATE-RQ: past this many, the one waiting longest
 * is closed for the new one. Counted against the association cap, sixteen connections that sent
 * nothing refused every real association for as long as ARTIM (30 s), again and again for a peer
 * that reconnected; a real caller sends its request within milliseconds of connecting.
 */
const AWAITING_RQ_LIMIT = 32;

export async function startDimseScp(options: DimseScpOptions): Promise<DimseScp> {
  const { log } = options;
  const live = new Set<{ stop(): Promise<void> }>();
  /** Connections yet to send an A-ASSOCIATE-RQ, oldest first; established associations, counted. */
  const awaitingRq = new Set<{ close(): void }>();
  let associations = 0;
  let serial = 0;

  const handleConnection = (socket: Socket): void => {
    const host = peerHost(socket);
    const id = (serial += 1);
    const label = { association: id, host };
    let caller: CallerIdentity | undefined;
    // Widened on purpose: handlers in closures move it on, which flow analysis cannot see.
    let state = 'awaiting-rq' as 'awaiting-rq' | 'established' | 'ending';
    let peerMaxPdu = 0;
    let reader: MessageReader<Sink> | undefined;
    let session: StoreSession | undefined;
    let inFlight: Promise<void> = Promise.resolve();
    let counted = false;

    const channel = new PduChannel(socket, options.maxPduLength, async () => undefined, (problem) => {
      log.error('dimse.aborted', { ...label, calling_ae: caller?.callingAeTitle ?? null, problem });
    });

    const reject = async (result: number, source: number, reason: number, why: string): Promise<void> => {
      log.info('dimse.rejected', { ...label, calling_ae: caller?.callingAeTitle ?? null, called_ae: caller?.calledAeTitle ?? null, why });
      state = 'ending';
      await channel.send(encodeAssociateRj({ result, source, reason }));
      channel.close(why);
    };

    const onAssociateRq = async (rq: AssociateRq): Promise<void> => {
      caller = { callingAeTitle: rq.callingAeTitle, calledAeTitle: rq.calledAeTitle, host };
      if ((rq.protocolVersion & 0x0001) === 0) return await reject(REJECT.permanent, REJECT.sourceAcse, REJECT.reasonProtocolVersion, 'protocol version not supported');
      if (rq.applicationContext !== APPLICATION_CONTEXT) {
        return await reject(REJECT.permanent, REJECT.sourceUser, REJECT.reasonApplicationContext, 'application context not supported');
      }
      if (rq.calledAeTitle !== options.aeTitle) return await reject(REJECT.permanent, REJECT.sourceUser, REJECT.reasonCalledAe, 'called AE title is not this server');
      if (!(await options.isCallerAllowed(caller))) return await reject(REJECT.permanent, REJECT.sourceUser, REJECT.reasonCallingAe, 'calling AE title not allowed');
      if (associations >= options.maxAssociations) return await reject(REJECT.transient, REJECT.sourcePresentation, REJECT.reasonLocalLimit, 'too many associations');
      if (rq.user.maxPduLength !== 0 && rq.user.maxPduLength < 128) throw new PduError(`maximum PDU length ${rq.user.maxPduLength} is too small to carry a PDV`);
      peerMaxPdu = rq.user.maxPduLength;
      const contexts: ContextResult[] = rq.contexts.map((c) => ({ id: c.id, ...negotiate(c.abstractSyntax, c.transferSyntaxes) }));
      const accepted = new Map(contexts.filter((c) => c.result === PC_RESULT.acceptance).map((c) => [c.id, c.transferSyntax]));
      await channel.send(
        encodeAssociateAc({
          calledAeTitle: rq.calledAeTitle,
          callingAeTitle: rq.callingAeTitle,
          applicationContext: APPLICATION_CONTEXT,
          contexts,
          user: { maxPduLength: options.maxPduLength, implementationClassUid: IMPLEMENTATION_CLASS_UID, implementationVersionName: IMPLEMENTATION_VERSION_NAME },
        }),
      );
      state = 'established';
      associations += 1;
      counted = true;
      log.info('dimse.associated', { ...label, calling_ae: rq.callingAeTitle, contexts_proposed: contexts.length, contexts_accepted: accepted.size });
      reader = new MessageReader<Sink>(new Set(accepted.keys()), (contextId, command) => openSink(contextId, command, accepted), onMessage);
    };

    const openSink = (contextId: number, command: Command, accepted: ReadonlyMap<number, string>): Promise<Sink> => {
      const sopClass = parseUid(command.affectedSopClassUid ?? '');
      const sopInstance = parseUid(command.affectedSopInstanceUid ?? '');
      if (command.commandField !== COMMAND.cStoreRq || !sopClass.ok || !sopInstance.ok) return Promise.resolve(new DropSink(options.maxInstanceBytes));
      const header = encodeFileMeta({
        sopClassUid: sopClass.uid,
        sopInstanceUid: sopInstance.uid,
        transferSyntaxUid: accepted.get(contextId) ?? '',
        sourceAeTitle: caller?.callingAeTitle ?? '',
      });
      return Promise.resolve(new InstanceSink(header, options.spoolFile, options.maxInstanceBytes, options.memoryInstanceBytes));
    };

    const onStore = async (message: DimseMessage<Sink>): Promise<Command> => {
      const { command, data } = message;
      if (!(data instanceof InstanceSink)) return response(command, COMMAND.cStoreRsp, STATUS.cannotUnderstand, 'C-STORE without a valid SOP class or instance UID');
      try {
        if (data.failure) {
          log.error('dimse.store_write_failed', { ...label, error: data.failure.code ?? data.failure.name });
          return response(command, COMMAND.cStoreRsp, STATUS.outOfResources, `could not write the instance (${data.failure.code ?? 'error'})`);
        }
        if (caller && !session) session = await options.receiver.openSession(caller);
        if (!session) return response(command, COMMAND.cStoreRsp, STATUS.outOfResources, 'no import session');
        const outcome = await session.store(data.bytes ? { kind: 'bytes', bytes: data.bytes } : { kind: 'file', file: data.path ?? '', synced: data.synced });
        return response(command, COMMAND.cStoreRsp, outcome.status, outcome.errorComment);
      } finally {
        await data.discard();
      }
    };

    const onMessage = async (message: DimseMessage<Sink>): Promise<void> => {
      const { command, contextId } = message;
      let answer: Command | null;
      switch (command.commandField) {
        case COMMAND.cEchoRq:
          answer = response(command, COMMAND.cEchoRsp, STATUS.success);
          break;
        case COMMAND.cStoreRq:
          answer = await onStore(message);
          break;
        case COMMAND.cCancelRq:
          answer = null;
          break;
        default:
          await message.data?.discard();
          answer = command.commandField & 0x8000 ? null : response(command, command.commandField | 0x8000, STATUS.unrecognizedOperation, 'operation not supported');
      }
      if (answer) await sendMessage(channel, contextId, peerMaxPdu, answer);
    };

    const established = (): boolean => state === 'established';
    const onPdu = async (pdu: RawPdu): Promise<void> => {
      if (state === 'ending') return;
      if (state === 'awaiting-rq') {
        if (pdu.type !== PDU.associateRq) throw new PduError(`PDU type 0x${pdu.type.toString(16)} before A-ASSOCIATE-RQ`, ABORT.reasonUnexpectedPdu);
        channel.clearDeadline();
        await onAssociateRq(decodeAssociateRq(pdu.body));
        if (established()) channel.setDeadline(options.idleTimeoutMs, 'the next PDU');
        return;
      }
      // The peer's silence is timed, not mia's own work: an import in progress does not count.
      channel.clearDeadline();
      switch (pdu.type) {
        case PDU.pData:
          await reader?.receive(pdu.body);
          if (established()) channel.setDeadline(options.idleTimeoutMs, 'the next PDU');
          return;
        case PDU.releaseRq:
          state = 'ending';
          await reader?.discard();
          // Answered once what the sender stored is indexed too (moments after each answer), so a
          // sender that is done sees it in mia; bounded, as the instances are durable already.
          await Promise.race([session?.settled(), new Promise((resolve) => setTimeout(resolve, RELEASE_WAIT_MS).unref())]);
          await channel.send(encodeReleaseRp());
          channel.close('released');
          return;
        case PDU.abort: {
          const abort = decodeAbort(pdu.body);
          state = 'ending';
          channel.close(`peer aborted (source ${abort.source}, reason ${abort.reason})`);
          return;
        }
        default:
          throw new PduError(`unexpected PDU type 0x${pdu.type.toString(16)} in an established association`, ABORT.reasonUnexpectedPdu);
      }
    };

    const waiting = { close: () => channel.close('too many connections waiting to associate') };
    if (awaitingRq.size >= AWAITING_RQ_LIMIT) {
      const oldest = awaitingRq.values().next().value;
      if (oldest) {
        awaitingRq.delete(oldest);
        oldest.close();
        log.info('dimse.waiting_closed', { waiting: AWAITING_RQ_LIMIT, reason: 'a new connection, and this many had not sent an A-ASSOCIATE-RQ' });
      }
    }
    awaitingRq.add(waiting);
    channel.setHandler((pdu) => {
      // A PDU came: whatever it is (the request, or something to refuse), no longer a silent slot.
      awaitingRq.delete(waiting);
      const run = onPdu(pdu);
      inFlight = run.catch(() => undefined);
      return run;
    });
    channel.setDeadline(options.associationTimeoutMs, 'A-ASSOCIATE-RQ');

    let ended: Promise<void> = Promise.resolve();
    const entry = {
      async stop(): Promise<void> {
        // A store being imported is answered first; what has not been answered the sender keeps.
        await Promise.race([inFlight, new Promise((resolve) => setTimeout(resolve, 10_000).unref())]);
        channel.abort('server stopping');
        await channel.closed;
        // Its import job is finished before the database closes.
        await ended;
      },
    };
    live.add(entry);
    ended = (async () => {
      const reason = await channel.closed;
      await inFlight;
      const released = reason === 'released';
      try {
        await reader?.discard();
        await session?.close(released ? 'released' : 'aborted');
      } catch (err) {
        log.error('dimse.session_close_failed', { ...label, error: err instanceof Error ? err.name : 'non-error' });
      } finally {
        awaitingRq.delete(waiting);
        if (counted) associations -= 1;
        live.delete(entry);
        if (state === 'established' || (state === 'ending' && caller && !released)) {
          log.info('dimse.closed', { ...label, calling_ae: caller?.callingAeTitle ?? null, reason: reason ?? 'closed' });
        }
      }
    })();
  };

  const server: Server = createServer(handleConnection);
  // Beyond the cap, the connections yet to associate and a few for the rejections, Node closes
  // new sockets as they arrive.
  server.maxConnections = options.maxAssociations + AWAITING_RQ_LIMIT + 8;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : options.port;
  if (options.maxPduLength < MIN_PDU_LENGTH) throw new Error(`maximum PDU length below ${MIN_PDU_LENGTH}`);
  log.info('dimse.listening', { port, ae_title: options.aeTitle });
  return {
    port,
    aeTitle: options.aeTitle,
    async stop() {
      const closing = new Promise<void>((resolve) => server.close(() => resolve()));
      await Promise.all([...live].map((a) => a.stop()));
      await closing;
    },
  };
}
