/**
 * The upper layer PDUs of DICOM networking (PS3.8 Section 9.3): A-ASSOCIATE-RQ/AC/RJ,
 * P-DATA-TF, A-RELEASE-RQ/RP and A-ABORT, encoded and decoded. Decoding takes the variable
 * part of one PDU whose length the framing reader (pdu-reader.ts) has already bounded, and
 * checks every item length against the bytes that are really there: a malformed item is a
 * `PduError`, never a read past the end.
 */
import { trimPadding } from '#server/dicom/values.ts';

export const PDU = {
  associateRq: 0x01,
  associateAc: 0x02,
  associateRj: 0x03,
  pData: 0x04,
  releaseRq: 0x05,
  releaseRp: 0x06,
  abort: 0x07,
} as const;
export type PduType = (typeof PDU)[keyof typeof PDU];

/** The only application context name (PS3.7 Annex A.2.1). */
export const APPLICATION_CONTEXT = '1.2.840.10008.3.1.1.1';

/** Presentation context results (PS3.8 9.3.3.2). */
export const PC_RESULT = {
  acceptance: 0,
  userRejection: 1,
  noReason: 2,
  abstractSyntaxNotSupported: 3,
  transferSyntaxesNotSupported: 4,
} as const;

/** A-ASSOCIATE-RJ result/source/reason (PS3.8 9.3.4). */
export const REJECT = {
  permanent: 1,
  transient: 2,
  sourceUser: 1,
  sourceAcse: 2,
  sourcePresentation: 3,
  /** With sourceUser. */
  reasonNoReason: 1,
  reasonApplicationContext: 2,
  reasonCallingAe: 3,
  reasonCalledAe: 7,
  /** With sourceAcse. */
  reasonProtocolVersion: 2,
  /** With sourcePresentation. */
  reasonLocalLimit: 2,
} as const;

/** A-ABORT source and reason (PS3.8 9.3.8): the provider aborts with one of these. */
export const ABORT = {
  sourceUser: 0,
  sourceProvider: 2,
  reasonNotSpecified: 0,
  reasonUnrecognizedPdu: 1,
  reasonUnexpectedPdu: 2,
  reasonUnrecognizedParameter: 4,
  reasonUnexpectedParameter: 5,
  reasonInvalidParameter: 6,
} as const;

/** The variable part of an A-ASSOCIATE-RQ is bounded before allocation (pdu-reader.ts). */
export const MAX_ASSOCIATE_PDU_LENGTH = 256 * 1024;
/** PS3.8 Annex D.1: at least this much must be accepted if a peer announces a maximum. */
export const MIN_PDU_LENGTH = 4096;
/** PS3.7 D.3.3.2: at most 128 presentation contexts (odd ids 1-255). */
export const MAX_PRESENTATION_CONTEXTS = 128;

export class PduError extends Error {
  /** The A-ABORT reason the provider sends for it. */
  readonly abortReason: number;
  constructor(message: string, abortReason: number = ABORT.reasonInvalidParameter) {
    super(message);
    this.name = 'PduError';
    this.abortReason = abortReason;
  }
}

export type ProposedContext = { id: number; abstractSyntax: string; transferSyntaxes: string[] };
export type ContextResult = { id: number; result: number; transferSyntax: string };

export type UserInformation = {
  /** 0: no limit announced. */
  maxPduLength: number;
  implementationClassUid: string;
  implementationVersionName: string;
};

export type AssociateRq = {
  type: typeof PDU.associateRq;
  protocolVersion: number;
  calledAeTitle: string;
  callingAeTitle: string;
  applicationContext: string;
  contexts: ProposedContext[];
  user: UserInformation;
};

export type AssociateAc = Omit<AssociateRq, 'type' | 'contexts'> & { type: typeof PDU.associateAc; contexts: ContextResult[] };
export type AssociateRj = { type: typeof PDU.associateRj; result: number; source: number; reason: number };
export type Abort = { type: typeof PDU.abort; source: number; reason: number };
export type Pdv = { contextId: number; command: boolean; last: boolean; data: Buffer };

// ---------------------------------------------------------------- encoding

function pdu(type: number, body: Buffer): Buffer {
  const header = Buffer.alloc(6);
  header[0] = type;
  header.writeUInt32BE(body.length, 2);
  return Buffer.concat([header, body]);
}

function item(type: number, body: Buffer): Buffer {
  if (body.length > 0xffff) throw new PduError(`item 0x${type.toString(16)} longer than 65535 bytes`);
  const header = Buffer.alloc(4);
  header[0] = type;
  header.writeUInt16BE(body.length, 2);
  return Buffer.concat([header, body]);
}

function aeField(title: string): Buffer {
  // AE titles are 16 bytes, space padded (PS3.8 9.3.2); longer ones were refused before here.
  return Buffer.from(title.padEnd(16, ' ').slice(0, 16), 'ascii');
}

const text = (value: string): Buffer => Buffer.from(value, 'ascii');

function userItem(user: UserInformation): Buffer {
  const max = Buffer.alloc(4);
  max.writeUInt32BE(user.maxPduLength, 0);
  return item(
    0x50,
    Buffer.concat([item(0x51, max), item(0x52, text(user.implementationClassUid)), item(0x55, text(user.implementationVersionName.slice(0, 16)))]),
  );
}

function associateHeader(a: { calledAeTitle: string; callingAeTitle: string }): Buffer {
  const fixed = Buffer.alloc(68);
  fixed.writeUInt16BE(1, 0);
  aeField(a.calledAeTitle).copy(fixed, 4);
  aeField(a.callingAeTitle).copy(fixed, 20);
  return fixed;
}

export function encodeAssociateRq(rq: Omit<AssociateRq, 'type' | 'protocolVersion'>): Buffer {
  const contexts = rq.contexts.map((c) =>
    item(0x20, Buffer.concat([Buffer.from([c.id, 0, 0, 0]), item(0x30, text(c.abstractSyntax)), ...c.transferSyntaxes.map((t) => item(0x40, text(t)))])),
  );
  return pdu(PDU.associateRq, Buffer.concat([associateHeader(rq), item(0x10, text(rq.applicationContext)), ...contexts, userItem(rq.user)]));
}

export function encodeAssociateAc(ac: Omit<AssociateAc, 'type' | 'protocolVersion'>): Buffer {
  const contexts = ac.contexts.map((c) => item(0x21, Buffer.concat([Buffer.from([c.id, 0, c.result, 0]), item(0x40, text(c.transferSyntax))])));
  return pdu(PDU.associateAc, Buffer.concat([associateHeader(ac), item(0x10, text(ac.applicationContext)), ...contexts, userItem(ac.user)]));
}

export function encodeAssociateRj(rj: Omit<AssociateRj, 'type'>): Buffer {
  return pdu(PDU.associateRj, Buffer.from([0, rj.result, rj.source, rj.reason]));
}

export function encodeReleaseRq(): Buffer {
  return pdu(PDU.releaseRq, Buffer.alloc(4));
}

export function encodeReleaseRp(): Buffer {
  return pdu(PDU.releaseRp, Buffer.alloc(4));
}

export function encodeAbort(source: number, reason: number): Buffer {
  return pdu(PDU.abort, Buffer.from([0, 0, source, reason]));
}

/** One P-DATA-TF holding the given PDVs (each: 4-byte length, context id, control header). */
export function encodePData(pdvs: readonly Pdv[]): Buffer {
  const parts: Buffer[] = [];
  for (const pdv of pdvs) {
    const header = Buffer.alloc(6);
    header.writeUInt32BE(pdv.data.length + 2, 0);
    header[4] = pdv.contextId;
    header[5] = (pdv.command ? 0x01 : 0) | (pdv.last ? 0x02 : 0);
    parts.push(header, pdv.data);
  }
  return pdu(PDU.pData, Buffer.concat(parts));
}

// ---------------------------------------------------------------- decoding

/** Trailing NUL or space padding is allowed on UIDs and AE titles (PS3.8 9.3.2, PS3.5 9.1). */
function trimmed(bytes: Buffer): string {
  return trimPadding(bytes.toString('latin1')).replace(/^ +/, '');
}

type Item = { type: number; body: Buffer };

/** The items of a run of bytes, each length checked against what remains. */
function items(bytes: Buffer, where: string): Item[] {
  const found: Item[] = [];
  let at = 0;
  while (at < bytes.length) {
    if (bytes.length - at < 4) throw new PduError(`${where}: ${bytes.length - at} stray bytes after the last item`);
    const type = bytes[at] ?? 0;
    const length = bytes.readUInt16BE(at + 2);
    if (at + 4 + length > bytes.length) throw new PduError(`${where}: item 0x${type.toString(16)} of ${length} bytes overruns its PDU`);
    found.push({ type, body: bytes.subarray(at + 4, at + 4 + length) });
    at += 4 + length;
  }
  return found;
}

function decodeUser(body: Buffer): UserInformation {
  const user: UserInformation = { maxPduLength: 0, implementationClassUid: '', implementationVersionName: '' };
  for (const sub of items(body, 'user information')) {
    if (sub.type === 0x51) {
      if (sub.body.length !== 4) throw new PduError(`maximum length item of ${sub.body.length} bytes, not 4`);
      user.maxPduLength = sub.body.readUInt32BE(0);
    } else if (sub.type === 0x52) user.implementationClassUid = trimmed(sub.body);
    else if (sub.type === 0x55) user.implementationVersionName = trimmed(sub.body);
    // Asynchronous operations (0x53), role selection (0x54) and extended negotiation (0x56, 0x57)
    // are not negotiated: leaving them out of the answer declines them (PS3.7 D.3.3).
  }
  return user;
}

type AssociateCommon = Omit<AssociateRq, 'type' | 'contexts'> & { items: Item[] };

function decodeAssociateCommon(body: Buffer, what: string): AssociateCommon {
  if (body.length < 68) throw new PduError(`${what} of ${body.length} bytes is shorter than its fixed fields`);
  const common: AssociateCommon = {
    protocolVersion: body.readUInt16BE(0),
    calledAeTitle: trimmed(body.subarray(4, 20)),
    callingAeTitle: trimmed(body.subarray(20, 36)),
    applicationContext: '',
    user: { maxPduLength: 0, implementationClassUid: '', implementationVersionName: '' },
    items: items(body.subarray(68), what),
  };
  let contextSeen = false;
  let userSeen = false;
  for (const it of common.items) {
    if (it.type === 0x10) {
      common.applicationContext = trimmed(it.body);
      contextSeen = true;
    } else if (it.type === 0x50) {
      common.user = decodeUser(it.body);
      userSeen = true;
    }
  }
  if (!contextSeen) throw new PduError(`${what} without an application context item`);
  if (!userSeen) throw new PduError(`${what} without a user information item`);
  return common;
}

export function decodeAssociateRq(body: Buffer): AssociateRq {
  const common = decodeAssociateCommon(body, 'A-ASSOCIATE-RQ');
  const contexts: ProposedContext[] = [];
  for (const it of common.items) {
    if (it.type !== 0x20) continue;
    if (it.body.length < 4) throw new PduError('presentation context item shorter than 4 bytes');
    if (contexts.length >= MAX_PRESENTATION_CONTEXTS) throw new PduError(`more than ${MAX_PRESENTATION_CONTEXTS} presentation contexts proposed`);
    const context: ProposedContext = { id: it.body[0] ?? 0, abstractSyntax: '', transferSyntaxes: [] };
    for (const sub of items(it.body.subarray(4), 'presentation context')) {
      if (sub.type === 0x30) context.abstractSyntax = trimmed(sub.body);
      else if (sub.type === 0x40) context.transferSyntaxes.push(trimmed(sub.body));
    }
    contexts.push(context);
  }
  const { items: _items, ...rest } = common;
  return { type: PDU.associateRq, ...rest, contexts };
}

export function decodeAssociateAc(body: Buffer): AssociateAc {
  const common = decodeAssociateCommon(body, 'A-ASSOCIATE-AC');
  const contexts: ContextResult[] = [];
  for (const it of common.items) {
    if (it.type !== 0x21) continue;
    if (it.body.length < 4) throw new PduError('presentation context item shorter than 4 bytes');
    const subs = items(it.body.subarray(4), 'presentation context');
    const syntax = subs.find((s) => s.type === 0x40);
    contexts.push({ id: it.body[0] ?? 0, result: it.body[2] ?? PC_RESULT.noReason, transferSyntax: syntax ? trimmed(syntax.body) : '' });
  }
  const { items: _items, ...rest } = common;
  return { type: PDU.associateAc, ...rest, contexts };
}

function fourBytes(body: Buffer, what: string): Buffer {
  if (body.length !== 4) throw new PduError(`${what} of ${body.length} bytes, not 4`);
  return body;
}

export function decodeAssociateRj(body: Buffer): AssociateRj {
  const b = fourBytes(body, 'A-ASSOCIATE-RJ');
  return { type: PDU.associateRj, result: b[1] ?? 0, source: b[2] ?? 0, reason: b[3] ?? 0 };
}

export function decodeAbort(body: Buffer): Abort {
  const b = fourBytes(body, 'A-ABORT');
  return { type: PDU.abort, source: b[2] ?? 0, reason: b[3] ?? 0 };
}

/** The PDVs of a P-DATA-TF body, as views on it; at least one, none overrunning. */
export function decodePData(body: Buffer): Pdv[] {
  const pdvs: Pdv[] = [];
  let at = 0;
  while (at < body.length) {
    if (body.length - at < 6) throw new PduError(`P-DATA-TF: ${body.length - at} stray bytes after the last PDV`);
    const length = body.readUInt32BE(at);
    if (length < 2) throw new PduError(`P-DATA-TF: PDV length ${length} leaves no room for its header`);
    if (length > body.length - at - 4) throw new PduError(`P-DATA-TF: PDV of ${length} bytes overruns its PDU`);
    const control = body[at + 5] ?? 0;
    pdvs.push({ contextId: body[at + 4] ?? 0, command: (control & 0x01) !== 0, last: (control & 0x02) !== 0, data: body.subarray(at + 6, at + 4 + length) });
    at += 4 + length;
  }
  if (pdvs.length === 0) throw new PduError('P-DATA-TF without a PDV');
  return pdvs;
}

/** AE titles: 1-16 characters of the default repertoire without backslash, not all spaces (PS3.5 6.2). */
export function isValidAeTitle(title: string): boolean {
  return title.length >= 1 && title.length <= 16 && /^[\x20-\x5b\x5d-\x7e]+$/.test(title) && title.trim().length > 0;
}
