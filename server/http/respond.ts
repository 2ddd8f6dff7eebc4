/** Writes a handler's result in the negotiated format, and errors as the standard envelope. */
import { pipeline } from 'node:stream/promises';
import type { Request, Response } from 'express';
import { csvDocument, xmlDocument } from '#server/formats/documents.ts';
import type { XmlValue } from '#server/formats/xml.ts';
import { errorEnvelope, successEnvelope, type ErrorBody, type Meta } from '#server/http/envelope.ts';
import { CONTENT_TYPE, type Format } from '#server/http/format.ts';
import { encodeCursor } from '#server/http/pagination.ts';
import { trackEventStream } from '#server/http/event-streams.ts';
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
  if (format === 'csv' && result.csv) {
    res.status(status).type(CONTENT_TYPE.csv).send(csvDocument(result.csv.serializer, result.csv.items as never[]));
    return;
  }
  if (format === 'xml' && result.xml) {
    const head: Record<string, XmlValue> = { status: 'success', timestamp, meta };
    const body = xmlDocument('response', head, result.xml, result.items as never[], { next_cursor: nextCursor });
    res.status(status).type(CONTENT_TYPE.xml).send(body);
    return;
  }
  const data = { items: result.items, next_cursor: nextCursor };
  res.status(status).type(CONTENT_TYPE.json).send(JSON.stringify(successEnvelope(data, meta, timestamp)));
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

