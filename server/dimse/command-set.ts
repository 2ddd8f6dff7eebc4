/**
 * DIMSE command sets (PS3.7 Section 9.3 and Annex E): group 0000 elements, always Implicit VR
 * Little Endian whatever the presentation context's transfer syntax (PS3.7 6.3.1). Only the
 * fields of C-ECHO, C-STORE, C-FIND and C-MOVE are read; other elements are skipped by length.
 */
import { PduError } from '#server/dimse/pdu.ts';
import { trimPadding, withoutNul } from '#server/dicom/values.ts';

export const COMMAND = {
  cStoreRq: 0x0001,
  cStoreRsp: 0x8001,
  cGetRq: 0x0010,
  cFindRq: 0x0020,
  cFindRsp: 0x8020,
  cMoveRq: 0x0021,
  cMoveRsp: 0x8021,
  cEchoRq: 0x0030,
  cEchoRsp: 0x8030,
  cCancelRq: 0x0fff,
} as const;

/** Command Data Set Type (0000,0800): this value says no data set follows (PS3.7 E.1). */
export const NO_DATA_SET = 0x0101;

export const STATUS = {
  success: 0x0000,
  pending: 0xff00,
  pendingWarning: 0xff01,
  cancel: 0xfe00,
  outOfResources: 0xa700,
  moveOutOfResourcesSubOps: 0xa702,
  moveDestinationUnknown: 0xa801,
  dataSetDoesNotMatch: 0xa900,
  cannotUnderstand: 0xc000,
  unrecognizedOperation: 0x0211,
  warningSubOpsFailed: 0xb000,
} as const;

export type Command = {
  commandField: number;
  messageId?: number | undefined;
  messageIdBeingRespondedTo?: number | undefined;
  affectedSopClassUid?: string | undefined;
  requestedSopClassUid?: string | undefined;
  affectedSopInstanceUid?: string | undefined;
  requestedSopInstanceUid?: string | undefined;
  moveDestination?: string | undefined;
  priority?: number | undefined;
  dataSetType: number;
  status?: number | undefined;
  errorComment?: string | undefined;
  remaining?: number | undefined;
  completed?: number | undefined;
  failed?: number | undefined;
  warning?: number | undefined;
};

/** A command set larger than this is not a command set (they are a few hundred bytes). */
export const MAX_COMMAND_BYTES = 64 * 1024;

type Field = { element: number; key: keyof Command; kind: 'ui' | 'us' | 'ae' | 'lo' };

/** In element order: PS3.7 requires ascending tags. */
const FIELDS: readonly Field[] = [
  { element: 0x0002, key: 'affectedSopClassUid', kind: 'ui' },
  { element: 0x0003, key: 'requestedSopClassUid', kind: 'ui' },
  { element: 0x0100, key: 'commandField', kind: 'us' },
  { element: 0x0110, key: 'messageId', kind: 'us' },
  { element: 0x0120, key: 'messageIdBeingRespondedTo', kind: 'us' },
  { element: 0x0600, key: 'moveDestination', kind: 'ae' },
  { element: 0x0700, key: 'priority', kind: 'us' },
  { element: 0x0800, key: 'dataSetType', kind: 'us' },
  { element: 0x0900, key: 'status', kind: 'us' },
  { element: 0x0902, key: 'errorComment', kind: 'lo' },
  { element: 0x1000, key: 'affectedSopInstanceUid', kind: 'ui' },
  { element: 0x1001, key: 'requestedSopInstanceUid', kind: 'ui' },
  { element: 0x1020, key: 'remaining', kind: 'us' },
  { element: 0x1021, key: 'completed', kind: 'us' },
  { element: 0x1022, key: 'failed', kind: 'us' },
  { element: 0x1023, key: 'warning', kind: 'us' },
];
const BY_ELEMENT = new Map(FIELDS.map((f) => [f.element, f]));

function element(tagElement: number, value: Buffer): Buffer {
  const header = Buffer.alloc(8);
  header.writeUInt16LE(0x0000, 0);
  header.writeUInt16LE(tagElement, 2);
  header.writeUInt32LE(value.length, 4);
  return Buffer.concat([header, value]);
}

function padded(text: string, pad: string): Buffer {
  return Buffer.from(text.length % 2 === 1 ? text + pad : text, 'latin1');
}

export function encodeCommand(command: Command): Buffer {
  const parts: Buffer[] = [];
  for (const field of FIELDS) {
    const value = command[field.key];
    if (value === undefined) continue;
    if (field.kind === 'us') {
      const b = Buffer.alloc(2);
      b.writeUInt16LE(Number(value) & 0xffff, 0);
      parts.push(element(field.element, b));
    } else if (field.kind === 'ui') parts.push(element(field.element, padded(String(value), '\0')));
    // AE titles are 16 characters padded with spaces (PS3.5 6.2); some SCPs compare all 16.
    else if (field.kind === 'ae') parts.push(element(field.element, Buffer.from(String(value).padEnd(16, ' ').slice(0, 16), 'latin1')));
    else parts.push(element(field.element, padded(String(value).slice(0, 64), ' ')));
  }
  const body = Buffer.concat(parts);
  const length = Buffer.alloc(4);
  length.writeUInt32LE(body.length, 0);
  return Buffer.concat([element(0x0000, length), body]);
}

const text = (value: Buffer): string => withoutNul(trimPadding(value.toString('latin1')).replace(/^ +/, ''));

export function decodeCommand(bytes: Buffer): Command {
  if (bytes.length > MAX_COMMAND_BYTES) throw new PduError(`command set of ${bytes.length} bytes`);
  const found: Partial<Record<keyof Command, string | number>> = {};
  let at = 0;
  while (at < bytes.length) {
    if (bytes.length - at < 8) throw new PduError(`command set: ${bytes.length - at} stray bytes after the last element`);
    const group = bytes.readUInt16LE(at);
    const tagElement = bytes.readUInt16LE(at + 2);
    const length = bytes.readUInt32LE(at + 4);
    if (group !== 0x0000) throw new PduError(`command set holds element (${group.toString(16).padStart(4, '0')},${tagElement.toString(16).padStart(4, '0')}) outside group 0000`);
    if (length > bytes.length - at - 8) throw new PduError(`command element (0000,${tagElement.toString(16).padStart(4, '0')}) of ${length} bytes overruns the command set`);
    const value = bytes.subarray(at + 8, at + 8 + length);
    const field = BY_ELEMENT.get(tagElement);
    if (field) {
      if (field.kind === 'us') {
        if (value.length !== 2) throw new PduError(`command element (0000,${tagElement.toString(16).padStart(4, '0')}) of ${value.length} bytes, not 2`);
        found[field.key] = value.readUInt16LE(0);
      } else found[field.key] = text(value);
    }
    at += 8 + length;
  }
  const commandField = found.commandField;
  if (typeof commandField !== 'number') throw new PduError('command set without a Command Field (0000,0100)');
  const dataSetType = found.dataSetType;
  if (typeof dataSetType !== 'number') throw new PduError('command set without a Command Data Set Type (0000,0800)');
  const num = (key: keyof Command): number | undefined => (typeof found[key] === 'number' ? found[key] : undefined);
  const str = (key: keyof Command): string | undefined => (typeof found[key] === 'string' ? found[key] : undefined);
  return {
    commandField,
    dataSetType,
    messageId: num('messageId'),
    messageIdBeingRespondedTo: num('messageIdBeingRespondedTo'),
    affectedSopClassUid: str('affectedSopClassUid'),
    requestedSopClassUid: str('requestedSopClassUid'),
    affectedSopInstanceUid: str('affectedSopInstanceUid'),
    requestedSopInstanceUid: str('requestedSopInstanceUid'),
    moveDestination: str('moveDestination'),
    priority: num('priority'),
    status: num('status'),
    errorComment: str('errorComment'),
    remaining: num('remaining'),
    completed: num('completed'),
    failed: num('failed'),
    warning: num('warning'),
  };
}

export const hasDataSet = (command: Command): boolean => command.dataSetType !== NO_DATA_SET;

/** Pending statuses (PS3.7 C.4.1.1.4): more responses follow. */
export const isPending = (status: number | undefined): boolean => status === STATUS.pending || status === STATUS.pendingWarning;
