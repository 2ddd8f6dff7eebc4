/**
 * STOW-RS as a client (PS3.18 10.5): one Part 10 object POSTed to <base URL>/studies as
 * multipart/related; type="application/dicom", with the peer's Authorization header. The answer
 * is the standard Store Instances Response (PS3.18 10.5.3.1, DICOM JSON): the object is in
 * ReferencedSOPSequence (0008,1199) when stored, in FailedSOPSequence (0008,1198) with a Failure
 * Reason (0008,1197) when refused. The body read is bounded: a server's answer for one object is
 * small, and a hostile or broken one must not make mia hold an unbounded body.
 */
import { randomBytes } from 'node:crypto';
import type { DicomWebPeer } from '#server/peers/peers.ts';
import { httpStatusIsTransient, networkError, type RoutedObject, type SendOutcome } from '#server/routing/send-outcome.ts';

/** More than any Store Instances Response for one object; a longer body is cut and not parsed. */
export const MAX_STOW_RESPONSE_BYTES = 256 * 1024;
export const STOW_TIMEOUT_MS = 60_000;

const REFERENCED_SOP_SEQUENCE = '00081199';
const FAILED_SOP_SEQUENCE = '00081198';
const FAILURE_REASON = '00081197';
const REFERENCED_SOP_INSTANCE_UID = '00081155';

async function readBounded(response: Response, max: number): Promise<string> {
  if (!response.body) return '';
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > max) {
      await reader.cancel();
      return '';
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString('utf8');
}

type Item = Record<string, { Value?: unknown[] } | undefined>;

function items(body: unknown, tag: string): Item[] {
  if (typeof body !== 'object' || body === null) return [];
  const element = (body as Record<string, unknown>)[tag];
  if (typeof element !== 'object' || element === null || !('Value' in element) || !Array.isArray(element.Value)) return [];
  return element.Value.filter((v): v is Item => typeof v === 'object' && v !== null);
}

function firstValue(item: Item, tag: string): unknown {
  return item[tag]?.Value?.[0];
}

/** Where the object is in a Store Instances Response: stored, refused (with the reason code), or not said. */
export function stowVerdict(body: unknown, sopInstanceUid: string): { stored: true } | { stored: false; reason: number | null } | undefined {
  if (items(body, REFERENCED_SOP_SEQUENCE).some((item) => firstValue(item, REFERENCED_SOP_INSTANCE_UID) === sopInstanceUid)) return { stored: true };
  const failed = items(body, FAILED_SOP_SEQUENCE).find((item) => firstValue(item, REFERENCED_SOP_INSTANCE_UID) === sopInstanceUid);
  if (!failed) return undefined;
  const reason = firstValue(failed, FAILURE_REASON);
  return { stored: false, reason: typeof reason === 'number' ? reason : null };
}

const hex4 = (n: number): string => `0x${n.toString(16).toUpperCase().padStart(4, '0')}`;

export async function stowSend(peer: DicomWebPeer, object: RoutedObject, signal?: AbortSignal): Promise<SendOutcome> {
  const boundary = `mia-${randomBytes(16).toString('hex')}`;
  const body = Buffer.concat([
    Buffer.from(`--${boundary}\r\nContent-Type: application/dicom\r\n\r\n`, 'latin1'),
    object.bytes,
    Buffer.from(`\r\n--${boundary}--\r\n`, 'latin1'),
  ]);
  const timeout = AbortSignal.timeout(STOW_TIMEOUT_MS);
  let response: Response;
  try {
    response = await fetch(`${peer.url}/studies`, {
      method: 'POST',
      headers: {
        ...peer.headers,
        'Content-Type': `multipart/related; type="application/dicom"; boundary=${boundary}`,
        Accept: 'application/dicom+json, application/json',
      },
      body,
      redirect: 'error',
      signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
    });
  } catch (err) {
    return { kind: 'transient', error: `STOW-RS to ${peer.name}: ${networkError(err)}` };
  }
  let text: string;
  try {
    text = await readBounded(response, MAX_STOW_RESPONSE_BYTES);
  } catch (err) {
    return { kind: 'transient', error: `STOW-RS to ${peer.name}: HTTP ${response.status}, answer cut: ${networkError(err)}` };
  }
  let parsed: unknown;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  // A Store Instances Response may be an array of one data set (some servers) or the data set.
  const dataSet = Array.isArray(parsed) ? parsed[0] : parsed;
  const verdict = stowVerdict(dataSet, object.sopInstanceUid);
  if (verdict?.stored === false) {
    return { kind: 'permanent', error: `STOW-RS to ${peer.name}: refused (HTTP ${response.status}${verdict.reason === null ? '' : `, failure reason ${hex4(verdict.reason)}`})` };
  }
  if (response.ok && (verdict?.stored === true || response.status === 200)) return { kind: 'sent', detail: `HTTP ${response.status}` };
  if (httpStatusIsTransient(response.status)) return { kind: 'transient', error: `STOW-RS to ${peer.name}: HTTP ${response.status}` };
  return { kind: 'permanent', error: `STOW-RS to ${peer.name}: HTTP ${response.status}${response.ok ? ', object not in the answer' : ''}` };
}
