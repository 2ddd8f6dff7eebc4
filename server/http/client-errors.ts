/**
 * Requests Node's HTTP parser refuses before the app sees them (a request line and headers past
 * its 16 KB, a malformed request, a request that took too long to arrive): answered in the
 * standard error envelope, as every other refusal is, then closed. Node's own answer was a bare
 * status line with no body.
 */
import { randomUUID } from 'node:crypto';
import type { Duplex } from 'node:stream';
import type { Clock } from '#server/clock.ts';
import { errorEnvelope } from '#server/http/envelope.ts';
import { TITLE_BY_STATUS } from '#server/http/error-mapping.ts';

function refusalOf(code: string): { status: number; message: string; details: string } {
  if (code === 'HPE_HEADER_OVERFLOW') return { status: 431, message: 'Request headers too large', details: 'the request line and headers may take at most 16 KB' };
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT') return { status: 408, message: 'Request took too long to arrive', details: 'send the request line and headers promptly' };
  return { status: 400, message: 'Malformed HTTP request', details: code ? `the request could not be parsed (${code.slice(0, 60)})` : 'the request could not be parsed' };
}

export function answerClientError(err: Error & { code?: string }, socket: Duplex, clock: Clock): void {
  // A connection reset or already answered: nothing can be sent.
  if (err.code === 'ECONNRESET' || !socket.writable) {
    socket.destroy();
    return;
  }
  const { status, message, details } = refusalOf(err.code ?? '');
  const title = TITLE_BY_STATUS[status] ?? 'Error';
  const body = JSON.stringify(errorEnvelope({ code: status, title, message, details }, { request_id: randomUUID(), version: 'v1' }, clock.now().toISOString()));
  socket.end(`HTTP/1.1 ${status} ${title}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
}
