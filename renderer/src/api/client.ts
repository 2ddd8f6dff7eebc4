/**
 * The one way the renderer talks to the API. It sends the key and `API-Version: 1.1` (finding
 * ids, reviews and the model record), reads the envelope of spec 2.1, accepts both error shapes
 * of spec 7.2 (the standard envelope and the flat {error, message}), puts the request id into
 * every error message, and follows Server-Sent Events with fetch streaming because EventSource
 * cannot send an Authorization header.
 */
import type { Page, ServerEvent } from './types.ts';

export type ApiErrorInfo = {
  status: number;
  title: string;
  message: string;
  details: string | null;
  requestId: string | null;
};

export class ApiError extends Error {
  readonly info: ApiErrorInfo;
  constructor(info: ApiErrorInfo) {
    super(describeError(info));
    this.name = 'ApiError';
    this.info = info;
  }
}

/** "Forbidden: No permission for this action (required scope: write:reports) [request 1b2c...]" */
export function describeError(info: ApiErrorInfo): string {
  const details = info.details ? ` (${info.details})` : '';
  const id = info.requestId ? ` [request ${info.requestId}]` : '';
  return `${info.title}: ${info.message}${details}${id}`;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function stringOr(value: unknown, fallback: string): string {
  return typeof value === 'string' && value !== '' ? value : fallback;
}

/** Reads an error body in either shape of spec 7.2 (or none at all, e.g. a proxy's HTML page). */
export function parseErrorBody(status: number, body: unknown, headerRequestId: string | null): ApiErrorInfo {
  const fallbackTitle = status === 401 ? 'Unauthorized' : status === 403 ? 'Forbidden' : `HTTP ${status}`;
  let requestId = headerRequestId;
  if (isRecord(body) && isRecord(body['meta']) && typeof body['meta']['request_id'] === 'string') {
    requestId = body['meta']['request_id'];
  }
  if (isRecord(body) && isRecord(body['error'])) {
    // Standard structure (spec 7.1): { status: "error", error: { code, message, details } }.
    const error = body['error'];
    return {
      status: typeof error['code'] === 'number' ? error['code'] : status,
      title: stringOr(error['title'], fallbackTitle),
      message: stringOr(error['message'], 'Request failed'),
      details: typeof error['details'] === 'string' ? error['details'] : null,
      requestId,
    };
  }
  if (isRecord(body) && typeof body['error'] === 'string') {
    // Flat structure of the authentication flow (spec 7.2): { error: "Unauthorized", message }.
    return {
      status,
      title: stringOr(body['error'], fallbackTitle),
      message: stringOr(body['message'], 'Request failed'),
      details: typeof body['details'] === 'string' ? body['details'] : null,
      requestId,
    };
  }
  return { status, title: fallbackTitle, message: 'The server answered without an explanation', details: null, requestId };
}

export type Query = Record<string, string | number | boolean | undefined | null>;

export type RequestOptions = {
  query?: Query;
  body?: unknown;
  signal?: AbortSignal;
};

export type BinaryReply = { blob: Blob; headers: Headers };

export type Client = {
  readonly baseUrl: string;
  get<T>(path: string, options?: RequestOptions): Promise<T>;
  post<T>(path: string, options?: RequestOptions): Promise<T>;
  patch<T>(path: string, options?: RequestOptions): Promise<T>;
  put<T>(path: string, options?: RequestOptions): Promise<T>;
  del<T>(path: string, options?: RequestOptions): Promise<T>;
  /** Every page of a list endpoint, up to `max` items. */
  all<T>(path: string, options?: RequestOptions & { max?: number }): Promise<T[]>;
  /** Bytes (images, downloads, CSV/XML documents). */
  binary(path: string, options?: RequestOptions & { accept?: string }): Promise<BinaryReply>;
  /** Uploads a body as-is (DICOM files dropped into the browser). */
  upload<T>(path: string, body: Blob, contentType: string, signal?: AbortSignal): Promise<T>;
  /** Follows an SSE stream until it ends or the signal aborts. */
  events(path: string, onEvent: (event: ServerEvent) => void, signal?: AbortSignal): Promise<void>;
};

export type ClientOptions = {
  baseUrl: string;
  key: string;
  /** Called on any 401: the key was revoked, expired or mistyped. */
  onUnauthorized?: (error: ApiError) => void;
  fetchImpl?: typeof fetch;
};

export function buildUrl(baseUrl: string, path: string, query?: Query): string {
  const url = new URL(path, baseUrl.endsWith('/') ? baseUrl : baseUrl + '/');
  for (const [name, value] of Object.entries(query ?? {})) {
    if (value !== undefined && value !== null && value !== '') url.searchParams.set(name, String(value));
  }
  return url.toString();
}

/** Splits an SSE stream into events (HTML Living Standard, 9.2.6); keeps the unfinished tail. */
export function parseSse(buffer: string): { events: ServerEvent[]; rest: string } {
  const events: ServerEvent[] = [];
  // A trailing CR may be the first half of a CRLF whose LF is in the next chunk: read as a line
  // end on its own, the LF would then make an empty line and end the event early.
  const heldCr = buffer.endsWith('\r');
  const normalised = (heldCr ? buffer.slice(0, -1) : buffer).replace(/\r\n?/g, '\n');
  const blocks = normalised.split('\n\n');
  const rest = (blocks.pop() ?? '') + (heldCr ? '\r' : '');
  for (const block of blocks) {
    let event = 'message';
    let id: string | null = null;
    const data: string[] = [];
    for (const line of block.split('\n')) {
      if (line === '' || line.startsWith(':')) continue;
      const colon = line.indexOf(':');
      const field = colon === -1 ? line : line.slice(0, colon);
      const value = colon === -1 ? '' : line.slice(colon + 1).replace(/^ /, '');
      if (field === 'event') event = value;
      else if (field === 'data') data.push(value);
      else if (field === 'id') id = value;
    }
    if (data.length > 0 || event !== 'message') events.push({ event, data: data.join('\n'), id });
  }
  return { events, rest };
}

export function createClient(options: ClientOptions): Client {
  const doFetch = options.fetchImpl ?? ((input: Parameters<typeof fetch>[0], init?: RequestInit) => fetch(input, init));

  const headersFor = (extra: Record<string, string> = {}): Record<string, string> => ({
    Authorization: `Bearer ${options.key}`,
    'API-Version': '1.1',
    ...extra,
  });

  const fail = async (response: Response): Promise<never> => {
    let body: unknown = undefined;
    try {
      body = await response.json();
    } catch {
      body = undefined;
    }
    const error = new ApiError(parseErrorBody(response.status, body, response.headers.get('X-Request-Id')));
    if (response.status === 401) options.onUnauthorized?.(error);
    throw error;
  };

  const send = async (method: string, path: string, request: RequestOptions = {}, accept = 'application/json'): Promise<Response> => {
    const hasBody = request.body !== undefined;
    let response: Response;
    try {
      response = await doFetch(buildUrl(options.baseUrl, path, request.query), {
        method,
        headers: headersFor({ Accept: accept, ...(hasBody ? { 'Content-Type': 'application/json' } : {}) }),
        body: hasBody ? JSON.stringify(request.body) : null,
        signal: request.signal ?? null,
      });
    } catch (error) {
      if (error instanceof DOMException && error.name === 'AbortError') throw error;
      throw new ApiError({
        status: 0,
        title: 'Server unreachable',
        message: 'The mia server did not answer; check that it is running',
        details: error instanceof Error ? error.message : null,
        requestId: null,
      });
    }
    if (!response.ok) await fail(response);
    return response;
  };

  const json = async <T>(method: string, path: string, request?: RequestOptions): Promise<T> => {
    const response = await send(method, path, request);
    const body: unknown = await response.json();
    // Clients check the status field before using data (spec 7.2).
    if (!isRecord(body) || body['status'] !== 'success') await fail(new Response(JSON.stringify(body), { status: 500, headers: response.headers }));
    return (body as { data: T }).data;
  };

  return {
    baseUrl: options.baseUrl,
    get: (path, request) => json('GET', path, request),
    post: (path, request) => json('POST', path, request),
    patch: (path, request) => json('PATCH', path, request),
    put: (path, request) => json('PUT', path, request),
    del: (path, request) => json('DELETE', path, request),
    async all<T>(path: string, request: RequestOptions & { max?: number } = {}) {
      const items: T[] = [];
      const max = request.max ?? 10_000;
      let cursor: string | null = null;
      do {
        const page: Page<T> = await json<Page<T>>('GET', path, {
          ...request,
          query: { limit: 500, ...request.query, cursor },
        });
        items.push(...page.items);
        cursor = page.next_cursor;
      } while (cursor && items.length < max);
      return items;
    },
    async binary(path, request = {}) {
      const response = await send('GET', path, request, request.accept ?? '*/*');
      return { blob: await response.blob(), headers: response.headers };
    },
    async upload<T>(path: string, body: Blob, contentType: string, signal?: AbortSignal) {
      let response: Response;
      try {
        response = await doFetch(buildUrl(options.baseUrl, path), {
          method: 'POST',
          headers: headersFor({ Accept: 'application/json', 'Content-Type': contentType }),
          body,
          signal: signal ?? null,
        });
      } catch (error) {
        throw new ApiError({ status: 0, title: 'Upload failed', message: 'The server did not answer', details: error instanceof Error ? error.message : null, requestId: null });
      }
      if (!response.ok) await fail(response);
      const reply = (await response.json()) as { data: T };
      return reply.data;
    },
    async events(path, onEvent, signal) {
      const response = await send('GET', path, { signal }, 'text/event-stream');
      const reader = response.body?.getReader();
      if (!reader) return;
      const decoder = new TextDecoder();
      let buffer = '';
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        const parsed = parseSse(buffer);
        buffer = parsed.rest;
        for (const event of parsed.events) onEvent(event);
      }
      const tail = parseSse(buffer + '\n\n');
      for (const event of tail.events) onEvent(event);
    },
  };
}
