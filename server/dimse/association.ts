/**
 * The requesting side of an association (SCU): connect, propose presentation contexts, then
 * send requests and wait for their responses, every wait bounded by a timeout. Responses and
 * their identifiers come through the same bounded reader the SCP uses.
 */
import { connect } from 'node:net';
import { PduChannel, sendMessage } from '#server/dimse/channel.ts';
import type { Command } from '#server/dimse/command-set.ts';
import { MemorySink, MessageReader, type DimseMessage } from '#server/dimse/message-reader.ts';
import { IMPLEMENTATION_CLASS_UID, IMPLEMENTATION_VERSION_NAME } from '#server/dimse/part10.ts';
import {
  APPLICATION_CONTEXT,
  decodeAbort,
  decodeAssociateAc,
  decodeAssociateRj,
  encodeAssociateRq,
  encodeReleaseRq,
  PC_RESULT,
  PDU,
  PduError,
  type ProposedContext,
} from '#server/dimse/pdu.ts';
import type { RawPdu } from '#server/dimse/pdu-reader.ts';

/** A DICOM node to talk to: where it listens, its AE title, and the AE title mia calls as. */
export type DimsePeer = {
  host: string;
  port: number;
  calledAeTitle: string;
  callingAeTitle: string;
  /** Connecting, negotiating, and each response: a peer silent longer is given up on. */
  timeoutMs?: number | undefined;
};

export type DimseErrorKind = 'connect' | 'rejected' | 'aborted' | 'timeout' | 'protocol' | 'refused';

export class DimseError extends Error {
  readonly kind: DimseErrorKind;
  constructor(kind: DimseErrorKind, message: string) {
    super(message);
    this.name = 'DimseError';
    this.kind = kind;
  }
}

export const DEFAULT_SCU_TIMEOUT_MS = 30_000;
/** mia as requestor receives identifiers and responses only: small PDUs are enough. */
const SCU_MAX_PDU = 256 * 1024;
/** One C-FIND identifier; real ones are a few hundred bytes. */
const MAX_IDENTIFIER_BYTES = 1024 * 1024;

export type AcceptedContext = { id: number; abstractSyntax: string; transferSyntax: string };

export type Association = {
  readonly accepted: readonly AcceptedContext[];
  /** Sends a request; `data` is its data set already encoded in the context's syntax. */
  send(contextId: number, command: Command, data?: Buffer): Promise<void>;
  /** Sends a request whose data set is written by `writeData` (a file streamed in fragments). */
  sendWith(contextId: number, command: Command, writeData: (channel: PduChannel, peerMaxPdu: number) => Promise<void>): Promise<void>;
  /** The next message from the peer (a response), within the timeout. */
  next(): Promise<DimseMessage<MemorySink>>;
  release(): Promise<void>;
  abort(): void;
};

const REJECT_REASONS: Record<string, string> = {
  '1:1': 'no reason given',
  '1:2': 'application context not supported',
  '1:3': 'calling AE title not recognized',
  '1:7': 'called AE title not recognized',
  '2:2': 'protocol version not supported',
  '3:1': 'temporary congestion',
  '3:2': 'local limit exceeded',
};

export async function openAssociation(peer: DimsePeer, contexts: readonly ProposedContext[]): Promise<Association> {
  const timeoutMs = peer.timeoutMs ?? DEFAULT_SCU_TIMEOUT_MS;
  const socket = connect({ host: peer.host, port: peer.port });
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new DimseError('timeout', `no connection to ${peer.host}:${peer.port} within ${timeoutMs / 1000} s`));
    }, timeoutMs);
    socket.once('connect', () => {
      clearTimeout(timer);
      resolve();
    });
    socket.once('error', (err: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      reject(new DimseError('connect', `cannot connect to ${peer.host}:${peer.port} (${err.code ?? err.message})`));
    });
  });

  const messages: Array<DimseMessage<MemorySink>> = [];
  let waiter: { resolve: (m: DimseMessage<MemorySink>) => void; reject: (e: Error) => void } | undefined;
  let failure: DimseError | undefined;
  let negotiated: { resolve: (pdu: RawPdu) => void } | undefined;
  let releaseAnswered: (() => void) | undefined;
  // Set once the association is accepted; P-DATA before that is a protocol error.
  const messageReader: { current?: MessageReader<MemorySink> } = {};

  const failWith = (error: DimseError): void => {
    failure ??= error;
    waiter?.reject(failure);
    waiter = undefined;
  };
  // A peer that takes nothing of a data set for as long as it may take to answer is gone.
  const channel = new PduChannel(socket, SCU_MAX_PDU, async () => undefined, (problem) => failWith(new DimseError('protocol', problem)), timeoutMs);
  void channel.closed.then((reason) => {
    failWith(new DimseError('aborted', `${peer.calledAeTitle} closed the association${reason ? ` (${reason})` : ''}`));
    releaseAnswered?.();
  });

  channel.setHandler(async (pdu) => {
    if (negotiated) {
      const done = negotiated;
      negotiated = undefined;
      done.resolve(pdu);
      return;
    }
    switch (pdu.type) {
      case PDU.pData:
        if (!messageReader.current) throw new PduError('P-DATA-TF before the association was accepted');
        await messageReader.current.receive(pdu.body);
        return;
      case PDU.releaseRp:
        releaseAnswered?.();
        channel.close('released');
        return;
      case PDU.abort: {
        const abort = decodeAbort(pdu.body);
        failWith(new DimseError('aborted', `${peer.calledAeTitle} aborted the association (source ${abort.source}, reason ${abort.reason})`));
        channel.close('peer aborted');
        return;
      }
      default:
        throw new PduError(`unexpected PDU type 0x${pdu.type.toString(16)} from ${peer.calledAeTitle}`);
    }
  });

  const answer = new Promise<RawPdu>((resolve) => (negotiated = { resolve }));
  channel.setDeadline(timeoutMs, 'an answer to A-ASSOCIATE-RQ');
  await channel.send(
    encodeAssociateRq({
      calledAeTitle: peer.calledAeTitle,
      callingAeTitle: peer.callingAeTitle,
      applicationContext: APPLICATION_CONTEXT,
      contexts: [...contexts],
      user: { maxPduLength: SCU_MAX_PDU, implementationClassUid: IMPLEMENTATION_CLASS_UID, implementationVersionName: IMPLEMENTATION_VERSION_NAME },
    }),
  );
  const pdu = await Promise.race([answer, channel.closed.then(() => null)]);
  channel.clearDeadline();
  if (!pdu) throw failure ?? new DimseError('aborted', `${peer.calledAeTitle} closed the connection during negotiation`);
  if (pdu.type === PDU.associateRj) {
    const rj = decodeAssociateRj(pdu.body);
    channel.close('rejected');
    const why = REJECT_REASONS[`${rj.source}:${rj.reason}`] ?? `source ${rj.source}, reason ${rj.reason}`;
    throw new DimseError('rejected', `${peer.calledAeTitle} rejected the association (${rj.result === 1 ? 'permanent' : 'transient'}: ${why})`);
  }
  if (pdu.type !== PDU.associateAc) {
    channel.fail(new PduError(`PDU type 0x${pdu.type.toString(16)} in answer to A-ASSOCIATE-RQ`));
    throw new DimseError('protocol', `${peer.calledAeTitle} answered the association request with PDU type 0x${pdu.type.toString(16)}`);
  }
  let ac: ReturnType<typeof decodeAssociateAc>;
  try {
    ac = decodeAssociateAc(pdu.body);
  } catch (err) {
    // Nothing else would end this connection: no deadline runs any more, and the caller gets no
    // association to abort.
    channel.fail(err);
    throw new DimseError('protocol', `${peer.calledAeTitle} answered with an A-ASSOCIATE-AC that cannot be read (${err instanceof Error ? err.message : String(err)})`);
  }
  const proposed = new Map(contexts.map((c) => [c.id, c]));
  const accepted: AcceptedContext[] = ac.contexts
    .filter((c) => c.result === PC_RESULT.acceptance && proposed.has(c.id))
    .map((c) => ({ id: c.id, abstractSyntax: proposed.get(c.id)?.abstractSyntax ?? '', transferSyntax: c.transferSyntax }));
  const peerMaxPdu = ac.user.maxPduLength;
  messageReader.current = new MessageReader<MemorySink>(
    new Set(accepted.map((c) => c.id)),
    () => Promise.resolve(new MemorySink(MAX_IDENTIFIER_BYTES)),
    (message) => {
      if (waiter) {
        waiter.resolve(message);
        waiter = undefined;
      } else messages.push(message);
      return Promise.resolve();
    },
  );

  return {
    accepted,
    async send(contextId, command, data) {
      if (failure) throw failure;
      await sendMessage(channel, contextId, peerMaxPdu, command, data);
    },
    async sendWith(contextId, command, writeData) {
      if (failure) throw failure;
      await sendMessage(channel, contextId, peerMaxPdu, command);
      await writeData(channel, peerMaxPdu);
    },
    next() {
      const queued = messages.shift();
      if (queued) return Promise.resolve(queued);
      if (failure) return Promise.reject(failure);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          waiter = undefined;
          channel.abort('response timeout');
          reject(new DimseError('timeout', `no response from ${peer.calledAeTitle} within ${timeoutMs / 1000} s`));
        }, timeoutMs);
        waiter = {
          resolve: (m) => {
            clearTimeout(timer);
            resolve(m);
          },
          reject: (e) => {
            clearTimeout(timer);
            reject(e);
          },
        };
      });
    },
    async release() {
      if (!channel.isOpen) return;
      const done = new Promise<void>((resolve) => (releaseAnswered = resolve));
      await channel.send(encodeReleaseRq());
      const timer = setTimeout(() => channel.abort('no A-RELEASE-RP'), timeoutMs);
      await done;
      clearTimeout(timer);
    },
    abort() {
      channel.abort('aborted by mia');
    },
  };
}

/** A response to request `messageId` with the expected command field, or a protocol error. */
export function expectResponse(message: DimseMessage<MemorySink>, commandField: number, messageId: number): Command {
  const { command } = message;
  if (command.commandField !== commandField || command.messageIdBeingRespondedTo !== messageId) {
    throw new DimseError('protocol', `unexpected response (command 0x${command.commandField.toString(16)} to message ${command.messageIdBeingRespondedTo ?? '?'})`);
  }
  return command;
}
