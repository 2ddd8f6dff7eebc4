/** Writes a handler's result in the negotiated format, and errors as the standard envelope. */
import type { Request, Response } from 'express';
import { csvDocument, xmlDocument } from '#server/formats/documents.ts';
import type { XmlValue } from '#server/formats/xml.ts';
import { errorEnvelope, successEnvelope, type ErrorBody, type Meta } from '#server/http/envelope.ts';
import { CONTENT_TYPE, type Format } from '#server/http/format.ts';
import { encodeCursor } from '#server/http/pagination.ts';
import { contextOf } from '#server/http/request-context.ts';
import type { HandlerResult } from '#server/http/route.ts';
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
    res.sendFile(result.path, { dotfiles: 'deny' });
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

/** Errors are JSON whatever format was asked for (PRODUCT.md, Wire conventions). */
export function sendError(req: Request, res: Response, error: ErrorBody, clock: Clock): void {
  res.status(error.code).type(CONTENT_TYPE.json).send(JSON.stringify(errorEnvelope(error, metaOf(req), clock.now().toISOString())));
}

