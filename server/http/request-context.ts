/**
 * Per-request facts every layer needs: the request id (spec 2.2: a UUID per call, also sent as
 * X-Request-Id so support can find the log line) and the negotiated API version.
 */
import { randomUUID } from 'node:crypto';
import type { Request, Response, NextFunction } from 'express';
import type { ApiVersion } from '#common/vocabulary.ts';
import type { AuthContext } from '#server/auth/authenticate.ts';

export type RequestContext = {
  requestId: string;
  version: ApiVersion;
  startedAt: number;
  auth: AuthContext | undefined;
  /** The route pattern, for logs: the concrete path may carry identifiers. */
  route: string | undefined;
};

const contexts = new WeakMap<Request, RequestContext>();

export function contextOf(req: Request): RequestContext {
  let ctx = contexts.get(req);
  if (!ctx) {
    ctx = { requestId: randomUUID(), version: 'v1', startedAt: performance.now(), auth: undefined, route: undefined };
    contexts.set(req, ctx);
  }
  return ctx;
}

export function requestContext(req: Request, res: Response, next: NextFunction): void {
  const ctx = contextOf(req);
  res.setHeader('X-Request-Id', ctx.requestId);
  next();
}
