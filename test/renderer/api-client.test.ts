/**
 * The renderer's API client, its pure parts and its reading of replies, without a browser:
 * parseSse on input cut at every possible place (as fetch streaming delivers it), both error
 * shapes of spec 7.2, and the request id in every error message.
 */
import { describe, expect, it, vi } from 'vitest';
import { ApiError, createClient, describeError, parseErrorBody, parseSse } from '../../renderer/src/api/client.ts';
import type { ServerEvent } from '../../renderer/src/api/types.ts';

const REQUEST_ID = '0b7f6a2e-3c1d-4e5f-8a9b-1c2d3e4f5a6b';

/** Feeds `chunks` through parseSse the way client.events does, including the final flush. */
function parseChunks(chunks: readonly string[]): ServerEvent[] {
  const events: ServerEvent[] = [];
  let buffer = '';
  for (const chunk of chunks) {
    const parsed = parseSse(buffer + chunk);
    buffer = parsed.rest;
    events.push(...parsed.events);
  }
  events.push(...parseSse(buffer + '\n\n').events);
  return events;
}

/** Every way of cutting `text` into pieces of `size` characters. */
function cut(text: string, size: number): string[] {
  const pieces: string[] = [];
  for (let i = 0; i < text.length; i += size) pieces.push(text.slice(i, i + size));
  return pieces;
}

const STREAM = [
  ': keep-alive comment\n\n',
  'event: queued\ndata: {"id":"a1","status":"queued"}\n\n',
  'event: progress\r\nid: 7\r\ndata: {"slices_done":3,\r\ndata: "slices_total":16}\r\n\r\n',
  'data:no space after the colon\r\r',
  'event: done\ndata: {"id":"a1","status":"succeeded","reason":"ünïcode ✓"}\n\n',
].join('');

const EXPECTED: ServerEvent[] = [
  { event: 'queued', data: '{"id":"a1","status":"queued"}', id: null },
  { event: 'progress', data: '{"slices_done":3,\n"slices_total":16}', id: '7' },
  { event: 'message', data: 'no space after the colon', id: null },
  { event: 'done', data: '{"id":"a1","status":"succeeded","reason":"ünïcode ✓"}', id: null },
];

describe('parseSse', () => {
  it('reads a whole stream: comments skipped, LF, CRLF and CR line ends, multi-line data, ids', () => {
    expect(parseChunks([STREAM])).toEqual(EXPECTED);
  });

  it('gives the same events however the stream is cut into chunks', () => {
    for (let size = 1; size <= 24; size += 1) {
      expect(parseChunks(cut(STREAM, size)), `chunks of ${size}`).toEqual(EXPECTED);
    }
  });

  it('does not end an event at a CRLF split across two chunks', () => {
    // "\r" at the end of one chunk and "\n" at the start of the next are one line end, not two.
    expect(parseChunks(['data: a\r', '\ndata: b\r', '\n\r', '\n'])).toEqual([{ event: 'message', data: 'a\nb', id: null }]);
  });

  it('keeps an unfinished event as the rest', () => {
    const { events, rest } = parseSse('event: progress\ndata: {"slices_done":1}\n\nevent: progress\ndata: {"sli');
    expect(events).toHaveLength(1);
    expect(rest).toBe('event: progress\ndata: {"sli');
  });
});

describe('error shapes of spec 7.2', () => {
  it('reads the standard envelope (spec 7.1) with its details and meta.request_id', () => {
    const body = {
      status: 'error',
      timestamp: '2026-03-01T08:00:00.000Z',
      error: { code: 403, title: 'Forbidden', message: 'No permission for this action', details: 'required scope: write:reports' },
      meta: { request_id: REQUEST_ID, version: 'v1.1' },
    };
    const info = parseErrorBody(403, body, null);
    expect(info).toEqual({ status: 403, title: 'Forbidden', message: 'No permission for this action', details: 'required scope: write:reports', requestId: REQUEST_ID });
    expect(describeError(info)).toBe(`Forbidden: No permission for this action (required scope: write:reports) [request ${REQUEST_ID}]`);
  });

  it('reads the flat {error, message} of the authentication flow, taking the id from X-Request-Id', () => {
    const info = parseErrorBody(401, { error: 'Unauthorized', message: 'Invalid or revoked API key' }, REQUEST_ID);
    expect(info).toEqual({ status: 401, title: 'Unauthorized', message: 'Invalid or revoked API key', details: null, requestId: REQUEST_ID });
    expect(describeError(info)).toBe(`Unauthorized: Invalid or revoked API key [request ${REQUEST_ID}]`);
  });

  it('survives a body in neither shape (a proxy page) and says so', () => {
    const info = parseErrorBody(502, undefined, REQUEST_ID);
    expect(info.title).toBe('HTTP 502');
    expect(describeError(info)).toContain(`[request ${REQUEST_ID}]`);
    expect(describeError(parseErrorBody(500, 'oops', null))).toBe('HTTP 500: The server answered without an explanation');
  });
});

type Call = { url: string; init: RequestInit | undefined };

function fakeFetch(reply: (call: Call) => Response): { fetchImpl: typeof fetch; calls: Call[] } {
  const calls: Call[] = [];
  const fetchImpl = (async (input: Parameters<typeof fetch>[0], init?: RequestInit) => {
    const call = { url: String(input), init };
    calls.push(call);
    return reply(call);
  }) as typeof fetch;
  return { fetchImpl, calls };
}

const json = (status: number, body: unknown, headers: Record<string, string> = {}): Response =>
  new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json', ...headers } });

describe('createClient', () => {
  it('sends the key and API-Version 1.1 and returns the envelope data', async () => {
    const { fetchImpl, calls } = fakeFetch(() => json(200, { status: 'success', data: { user: { id: 'u1' } }, meta: { request_id: REQUEST_ID, version: 'v1.1' } }));
    const client = createClient({ baseUrl: 'http://127.0.0.1:8484', key: 'mia_test', fetchImpl });
    expect(await client.get('/v1/auth/me')).toEqual({ user: { id: 'u1' } });
    const headers = calls[0]!.init!.headers as Record<string, string>;
    expect(headers['Authorization']).toBe('Bearer mia_test');
    expect(headers['API-Version']).toBe('1.1');
  });

  it('puts the request id into the message of a flat 401 and reports it as unauthorized', async () => {
    const { fetchImpl } = fakeFetch(() => json(401, { error: 'Unauthorized', message: 'API key revoked' }, { 'X-Request-Id': REQUEST_ID }));
    const onUnauthorized = vi.fn();
    const client = createClient({ baseUrl: 'http://127.0.0.1:8484', key: 'mia_test', fetchImpl, onUnauthorized });
    const error = await client.get('/v1/scans').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ApiError);
    expect((error as ApiError).message).toBe(`Unauthorized: API key revoked [request ${REQUEST_ID}]`);
    expect(onUnauthorized).toHaveBeenCalledWith(error);
  });

  it('puts the request id and details of a standard 409 into the message', async () => {
    const { fetchImpl } = fakeFetch(() =>
      json(409, { status: 'error', error: { code: 409, title: 'Conflict', message: 'Scan is being analysed', details: 'allowed: archived' }, meta: { request_id: REQUEST_ID, version: 'v1.1' } }),
    );
    const client = createClient({ baseUrl: 'http://127.0.0.1:8484', key: 'mia_test', fetchImpl });
    await expect(client.post('/v1/scans/1.2.3/analyses', { body: {} })).rejects.toThrow(`Conflict: Scan is being analysed (allowed: archived) [request ${REQUEST_ID}]`);
  });

  it('treats a 200 whose status is not success as an error (spec 7.2: check status first)', async () => {
    const { fetchImpl } = fakeFetch(() => json(200, { status: 'error', error: { code: 500, title: 'Internal', message: 'broken' }, meta: { request_id: REQUEST_ID } }));
    const client = createClient({ baseUrl: 'http://127.0.0.1:8484', key: 'mia_test', fetchImpl });
    await expect(client.get('/v1/scans')).rejects.toThrow(`[request ${REQUEST_ID}]`);
  });

  it('says the server is unreachable when fetch itself fails', async () => {
    const client = createClient({
      baseUrl: 'http://127.0.0.1:8484',
      key: 'mia_test',
      fetchImpl: (async () => {
        throw new TypeError('fetch failed');
      }) as typeof fetch,
    });
    const error = (await client.get('/v1/scans').catch((e: unknown) => e)) as ApiError;
    expect(error.info).toMatchObject({ status: 0, title: 'Server unreachable', details: 'fetch failed' });
  });

  it('follows an event stream delivered in byte chunks that split UTF-8 characters and CRLFs', async () => {
    const bytes = new TextEncoder().encode(STREAM.replace(/\r?\n/g, '\r\n'));
    const { fetchImpl } = fakeFetch(
      () =>
        new Response(
          new ReadableStream<Uint8Array>({
            start(controller) {
              for (let i = 0; i < bytes.length; i += 5) controller.enqueue(bytes.slice(i, i + 5));
              controller.close();
            },
          }),
          { status: 200, headers: { 'Content-Type': 'text/event-stream' } },
        ),
    );
    const client = createClient({ baseUrl: 'http://127.0.0.1:8484', key: 'mia_test', fetchImpl });
    const events: ServerEvent[] = [];
    await client.events('/v1/analyses/a1/events', (event) => events.push(event));
    expect(events).toEqual(EXPECTED);
  });
});
