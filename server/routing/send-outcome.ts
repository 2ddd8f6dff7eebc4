/**
 * What a send attempt came to, and the object it sends. A permanent refusal (the peer looked at
 * the object and said no) is not tried again; a transient one (no connection, a timeout, a busy or
 * failing peer) is, with backoff (server/routing/send-worker.ts).
 */
import { trimPadding } from '#server/dicom/values.ts';

/** A Part 10 file as mia wrote or stored it, with what a C-STORE needs from its meta header. */
export type RoutedObject = { bytes: Buffer; sopClassUid: string; sopInstanceUid: string; transferSyntaxUid: string };

export type SendOutcome =
  | { kind: 'sent'; detail?: string }
  | { kind: 'transient'; error: string }
  | { kind: 'permanent'; error: string };

/** A C-STORE response status (PS3.4 B.2.3, PS3.7 C): success and warnings are sent; A7xx (out of
 * resources) is the peer's state, tried again; A9xx, Cxxx and the rest are about the object. */
export function cStoreOutcome(status: number): SendOutcome {
  const hex = `0x${status.toString(16).toUpperCase().padStart(4, '0')}`;
  if (status === 0x0000) return { kind: 'sent' };
  if (status === 0x0001 || (status & 0xf000) === 0xb000) return { kind: 'sent', detail: `warning status ${hex}` };
  if ((status & 0xff00) === 0xa700) return { kind: 'transient', error: `C-STORE refused: out of resources (status ${hex})` };
  if ((status & 0xff00) === 0xa900) return { kind: 'permanent', error: `C-STORE refused: data set does not match SOP class (status ${hex})` };
  if ((status & 0xf000) === 0xc000) return { kind: 'permanent', error: `C-STORE refused: cannot understand (status ${hex})` };
  return { kind: 'permanent', error: `C-STORE refused (status ${hex})` };
}

/** An HTTP status from a STOW-RS server (PS3.18 10.5.3): 5xx, 408 and 429 are worth waiting for. */
export function httpStatusIsTransient(status: number): boolean {
  return status >= 500 || status === 408 || status === 429;
}

/** Network errors name their code only (ECONNREFUSED, ETIMEDOUT...): messages can carry URLs. */
export function networkError(err: unknown): string {
  if (typeof err === 'object' && err !== null) {
    const cause = 'cause' in err && typeof err.cause === 'object' && err.cause !== null ? err.cause : err;
    if ('code' in cause && typeof cause.code === 'string') return cause.code;
    if ('name' in err && err.name === 'TimeoutError') return 'timeout';
    if ('name' in err && err.name === 'AbortError') return 'aborted';
  }
  return 'network error';
}

const EXPLICIT_LE = '1.2.840.10008.1.2.1';
/** Group 0002 is small; a meta header longer than this is not one mia wrote or would store. */
const MAX_META_BYTES = 64 * 1024;

/**
 * The SOP class, instance and transfer syntax of a Part 10 file, from its meta header (PS3.10
 * 7.1: preamble, "DICM", group 0002 in explicit VR little endian). Undefined when it is not one.
 */
export function readPart10(bytes: Buffer): RoutedObject | undefined {
  if (bytes.length < 132 || bytes.toString('latin1', 128, 132) !== 'DICM') return undefined;
  const values = new Map<number, string>();
  let at = 132;
  const end = Math.min(bytes.length, 132 + MAX_META_BYTES);
  while (at + 8 <= end && bytes.readUInt16LE(at) === 0x0002) {
    const element = bytes.readUInt16LE(at + 2);
    const vr = bytes.toString('latin1', at + 4, at + 6);
    const long = vr === 'OB' || vr === 'OW' || vr === 'UN' || vr === 'SQ' || vr === 'UT';
    const length = long ? (at + 12 <= end ? bytes.readUInt32LE(at + 8) : -1) : bytes.readUInt16LE(at + 6);
    const start = at + (long ? 12 : 8);
    if (length < 0 || start + length > end) return undefined;
    if (vr === 'UI') values.set(element, trimPadding(bytes.toString('latin1', start, start + length)));
    at = start + length;
  }
  const sopClassUid = values.get(0x0002);
  const sopInstanceUid = values.get(0x0003);
  const transferSyntaxUid = values.get(0x0010) ?? EXPLICIT_LE;
  if (!sopClassUid || !sopInstanceUid) return undefined;
  return { bytes, sopClassUid, sopInstanceUid, transferSyntaxUid };
}
