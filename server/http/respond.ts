/** Writes a handler's result in the negotiated format, and errors as the standard envelope. */
import { pipeline } from 'node:stream/promises';
import type { Request, Response } from 'express';
import { csvDocument, xmlAroundCollection, xmlCollection } from '#server/formats/documents.ts';
import type { XmlValue } from '#server/formats/xml.ts';
import { errorEnvelope, successEnvelope, successEnvelopeAround, type ErrorBody, type Meta } from '#server/http/envelope.ts';
import { CONTENT_TYPE, type Format } from '#server/http/format.ts';
import { encodeCursor } from '#server/http/pagination.ts';
import { trackEventStream } from '#server/http/event-streams.ts';
import { keptText } from '#server/http/shared-answers.ts';
import { contextOf } from '#server/http/request-context.ts';
import type { EventSink, HandlerResult } from '#server/http/route.ts';
import type { Clock } from '#server/clock.ts';

function metaOf(req: Request): Meta {
  const ctx = contextOf(req);
  return { request_id: ctx.requestId, version: ctx.version };
}

export function sendResult(req: Request, res: Response, result: HandlerResult, format: Format, status: number, clock: Clock): void {
  const timestamp = clock.now().toISOString();
  const meta = metaOf(req);
  if (result.kind === 'file') {
    res.status(status);
    res.setHeader('Content-Type', result.contentType);
    res.attachment(result.fileName);
    // Files hold patient data: no shared or stored copies on the way.
    res.sendFile(result.path, { dotfiles: 'deny', cacheControl: false, headers: { 'Cache-Control': 'no-store' } });
    return;
  }
  if (result.kind === 'binary') {
    res.status(status).setHeader('Content-Type', result.contentType);
    for (const [name, value] of Object.entries(result.headers ?? {})) res.setHeader(name, value);
    res.setHeader('Content-Length', String(result.body.byteLength));
    res.end(Buffer.from(result.body.buffer, result.body.byteOffset, result.body.byteLength));
    return;
  }
  if (result.kind === 'stream') {
    res.status(result.status ?? status).setHeader('Content-Type', result.contentType);
    for (const [name, value] of Object.entries(result.headers ?? {})) res.setHeader(name, value);
    // A failure mid-body can only cut the response short: the headers are gone.
    pipeline(result.body, res).catch(() => res.destroy());
    return;
  }
  if (result.kind === 'events') {
    sendEvents(req, res, result.run);
    return;
  }
  if (result.kind === 'data') {
    res.status(result.status ?? status).type(CONTENT_TYPE.json).send(JSON.stringify(successEnvelope(result.data, meta, timestamp)));
    return;
  }
  const nextCursor = encodeCursor(result.nextAfterId);
  if (nextCursor) res.setHeader('X-Next-Cursor', nextCursor);
  const csv = result.csv;
  if (format === 'csv' && csv) {
    res.status(status).type(CONTENT_TYPE.csv).send(listBody(result, 'csv', ['', ''], () => csvDocument(csv.serializer, csv.items as never[])));
    return;
  }
  const xml = result.xml;
  if (format === 'xml' && xml) {
    const head: Record<string, XmlValue> = { status: 'success', timestamp, meta };
    const around = xmlAroundCollection('response', head, xml, { next_cursor: nextCursor });
    res.status(status).type(CONTENT_TYPE.xml).send(listBody(result, 'xml', around, () => xmlCollection(xml, result.items as never[])));
    return;
  }
  const data = (): string => JSON.stringify({ items: result.items, next_cursor: nextCursor });
  res.status(status).type(CONTENT_TYPE.json).send(listBody(result, 'json', successEnvelopeAround(meta, timestamp), data));
}

type ListResult = Extract<HandlerResult, { kind: 'list' }>;

/**
 * A list's body: `around` (this request's envelope) and between them the part that depends on
 * the items alone (the items' JSON with the cursor, the XML collection, the whole CSV). For a kept
 * answer that part is written and encoded once (shared-answers.ts), and the body is a copy of it.
 */
function listBody(result: ListResult, format: Format, around: readonly [string, string], write: () => string): string | Buffer {
  const middle = keptText(result, format, write);
  if (middle === null) return around[0] + write() + around[1];
  if (around[0] === '' && around[1] === '') return middle;
  return Buffer.concat([Buffer.from(around[0]), middle, Buffer.from(around[1])]);
}

/** Comment lines keep idle proxies and clients from timing the stream out. */
const EVENT_KEEPALIVE_MS = 15_000;

function sendEvents(req: Request, res: Response, run: (sink: EventSink) => Promise<void>): void {
  const controller = new AbortController();
  res.status(200);
  res.setHeader('Content-Type', 'text/event-stream; charset=utf-8');
  res.setHeader('Cache-Control', 'no-store');
  res.setHeader('X-Accel-Buffering', 'no');
  res.flushHeaders();
  const keepAlive = setInterval(() => res.write(': keep-alive\n\n'), EVENT_KEEPALIVE_MS);
  res.on('close', () => controller.abort());
  const untrack = trackEventStream(req.app, controller);
  const sink: EventSink = {
    signal: controller.signal,
    send(event, data) {
      if (!res.writableEnded) res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
    },
  };
  run(sink)
    .catch(() => {
      // Headers are gone; the stream can only say that it failed, with the request id to quote.
      sink.send('error', { message: 'Internal error; quote the request id to support', request_id: contextOf(req).requestId });
    })
    .finally(() => {
      untrack();
      clearInterval(keepAlive);
      res.end();
    });
}

/** Errors are JSON whatever format was asked for (PRODUCT.md, Wire conventions). */
export function sendError(req: Request, res: Response, error: ErrorBody, clock: Clock): void {
  res.status(error.code).type(CONTENT_TYPE.json).send(JSON.stringify(errorEnvelope(error, metaOf(req), clock.now().toISOString())));
}

