/**
 * The Express application: edge middleware in a fixed order (request id, Host check, CORS,
 * version, rate limit), then every route of the table wrapped with authentication, scope
 * check, format negotiation and validation, in that order: a caller without a valid key learns
 * nothing else, and a caller without the scope learns nothing about the target.
 */
import express, { type NextFunction, type Request, type Response } from 'express';
import { z } from 'zod';
import { authenticate, bearerToken } from '#server/auth/authenticate.ts';
import { holdsAnyScope } from '#server/auth/scopes.ts';
import { patientsOf } from '#server/audit/audit.ts';
import type { AuditInput } from '#server/store/audit.ts';
import { MiaError } from '#server/errors.ts';
import { nulCharacterAt } from '#server/http/nul-characters.ts';
import { apiVersion } from '#server/http/api-version.ts';
import { cors } from '#server/http/cors.ts';
import type { ErrorBody } from '#server/http/envelope.ts';
import { STATUS_BY_KIND, TITLE_BY_STATUS } from '#server/http/error-mapping.ts';
import { checkAccepts, negotiateFormat, type Format } from '#server/http/format.ts';
import { hostCheck } from '#server/http/host-check.ts';
import { createRateLimiter } from '#server/http/rate-limit.ts';
import { createSharedRateLimiter } from '#server/http/shared-rate-limit.ts';
import { contextOf, requestContext } from '#server/http/request-context.ts';
import { sendError, sendResult } from '#server/http/respond.ts';
import { callerBlind, SharedAnswers } from '#server/http/shared-answers.ts';
import { staticUi } from '#server/http/static-ui.ts';
import { createTurns } from '#server/http/turns.ts';
import type { AuditNote, HandlerContext, HandlerResult, Route, UploadBody, UploadSpec } from '#server/http/route.ts';
import { ROUTES } from '#server/http/routes/index.ts';
import { digestKey } from '#server/auth/key-format.ts';
import type { Runtime } from '#server/runtime.ts';
import { codeOf, storageErrorOf } from '#server/storage-errors.ts';

export const JSON_BODY_LIMIT = '1mb';

const emptyQuery = z.object({}).strict();

function expressPath(path: string): string {
  return path.replace(/\{(\w+)\}/g, ':$1');
}

/** zod issues as one line naming each field at fault: "status: expected string". */
function describeIssues(error: z.ZodError, where: string): string {
  return error.issues
    .slice(0, 5)
    .map((issue) => {
      const path = issue.path.length > 0 ? issue.path.join('.') : where;
      if (issue.code === 'unrecognized_keys') return `${issue.keys.join(', ')}: unknown ${where === 'body' ? 'field' : 'parameter'}`;
      return `${path}: ${issue.message}`;
    })
    .join('; ');
}

function parseInput(schema: z.ZodType | undefined, value: unknown, where: 'body' | 'query' | 'path'): unknown {
  const effective = schema ?? (where === 'body' ? undefined : emptyQuery);
  if (!effective) return undefined;
  const nulAt = nulCharacterAt(value, where);
  if (nulAt !== null) throw new MiaError('invalid', `Invalid request ${where}`, `${nulAt}: contains a NUL character (U+0000)`);
  const parsed = effective.safeParse(value);
  if (!parsed.success) throw new MiaError('invalid', `Invalid request ${where}`, describeIssues(parsed.error, where));
  return parsed.data;
}

/** A list read's filters for its audit event ("filter:modality=CT&status=analyzed"), or null. */
function filterTarget(query: unknown): string | null {
  if (typeof query !== 'object' || query === null) return null;
  const filters = Object.entries(query).filter(([k, v]) => k !== 'limit' && k !== 'cursor' && v !== undefined);
  if (filters.length === 0) return null;
  return `filter:${new URLSearchParams(filters.map(([k, v]): [string, string] => [k, String(v)])).toString()}`.slice(0, 300);
}

/** Pages above this many items wait in the large lane of the turns (server/http/turns.ts). */
const SMALL_PAGE_LIMIT = 100;

function largePage(query: unknown): boolean {
  return typeof query === 'object' && query !== null && 'limit' in query && typeof query.limit === 'number' && query.limit > SMALL_PAGE_LIMIT;
}

function withoutFormat(query: Request['query']): Record<string, unknown> {
  const { format: _format, ...rest } = query as Record<string, unknown>;
  return rest;
}

function hasBody(req: Request): boolean {
  return req.get('Transfer-Encoding') !== undefined || Number(req.get('Content-Length') ?? '0') > 0;
}

/** Headers as single strings (a repeated header's values joined, as Node does for most). */
function headersOf(req: Request): Record<string, string | undefined> {
  const out: Record<string, string | undefined> = {};
  for (const [name, value] of Object.entries(req.headers)) out[name] = Array.isArray(value) ? value.join(', ') : value;
  return out;
}

/** The raw body of an upload route, after checking its type and declared size. */
function uploadOf(req: Request, spec: UploadSpec): UploadBody {
  const contentType = req.get('Content-Type') ?? '';
  const mediaType = contentType.split(';')[0]?.trim().toLowerCase() ?? '';
  if (!spec.contentTypes.includes(mediaType)) {
    throw new MiaError('unsupported_media_type', 'Unsupported body type', `Content-Type: ${spec.contentTypes.join(' or ')}`);
  }
  const declared = req.get('Content-Length');
  const length = declared === undefined ? null : Number(declared);
  if (length !== null && length > spec.maxBytes) {
    throw new MiaError('too_large', 'Request body too large', `body: at most ${spec.maxBytes} bytes`);
  }
  return { contentType, length, maxBytes: spec.maxBytes, stream: req };
}

/** Maps anything thrown to the error structure; unknown errors become 500 without detail. */
function toErrorBody(error: unknown): ErrorBody {
  if (error instanceof MiaError) {
    const code = STATUS_BY_KIND[error.kind];
    return { code, title: TITLE_BY_STATUS[code] ?? 'Error', message: error.message, ...(error.details ? { details: error.details } : {}) };
  }
  // body-parser signals its failures with a status and a type.
  if (typeof error === 'object' && error !== null && 'type' in error && 'status' in error) {
    const type = String(error.type);
    if (type === 'entity.too.large') {
      return { code: 413, title: TITLE_BY_STATUS[413] ?? '', message: 'Request body too large', details: `body: at most ${JSON_BODY_LIMIT} of JSON` };
    }
    if (type === 'entity.parse.failed') {
      return { code: 400, title: TITLE_BY_STATUS[400] ?? '', message: 'Request body is not valid JSON', details: 'body: send a JSON object' };
    }
    if (type === 'encoding.unsupported' || type === 'charset.unsupported') {
      return { code: 415, title: TITLE_BY_STATUS[415] ?? '', message: 'Unsupported body encoding', details: 'send UTF-8 JSON' };
    }
  }
  // Any other client-side body failure (aborted upload, Content-Length that does not match,
  // a gzip body that does not inflate) is the client's 400, not our 500.
  const status = typeof error === 'object' && error !== null && 'status' in error ? Number(error.status) : NaN;
  const zlibCode = typeof error === 'object' && error !== null && 'code' in error && typeof error.code === 'string' && error.code.startsWith('Z_');
  if ((status >= 400 && status < 500) || zlibCode) {
    const detail = zlibCode ? 'body: does not decode with its Content-Encoding' : 'body: incomplete or does not match Content-Length';
    return { code: 400, title: TITLE_BY_STATUS[400] ?? '', message: 'Request body could not be read', details: detail };
  }
  return { code: 500, title: TITLE_BY_STATUS[500] ?? '', message: 'Internal error; quote the request id to support' };
}

/** The client's address: the socket's, or the one a trusted proxy forwarded (config.trustedProxies). */
function clientAddress(req: Request): string {
  return req.ip ?? req.socket.remoteAddress ?? '';
}

export function createApp(services: Runtime): express.Express {
  const { config, clock, log, db } = services;
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  // Query strings stay flat (a=1&a=2 is an array, a[b]=1 is not an object) so zod sees simple values.
  app.set('query parser', 'simple');
  // Only a named proxy's X-Forwarded-For counts (its rightmost untrusted entry is the client);
  // anyone else could claim any address and so escape throttling or forge the audit trail.
  if (config.trustedProxies.length > 0) app.set('trust proxy', [...config.trustedProxies]);

  // A hub's nodes share their counts through PostgreSQL; a workstation counts in memory.
  const limiter = (scope: string, capacity: number) =>
    db.dialect === 'postgres'
      ? createSharedRateLimiter(db, scope, capacity, config.rateLimit.windowMs, clock)
      : createRateLimiter(capacity, config.rateLimit.windowMs, clock);
  const requestLimiter = limiter('requests', config.rateLimit.requests);
  const failureLimiter = limiter('auth-failures', config.rateLimit.authFailures);
  const jsonBody = express.json({ limit: JSON_BODY_LIMIT, type: 'application/json', strict: true });
  // A burst of handlers must not hold the event loop for one long iteration (server/http/turns.ts).
  const turns = createTurns();
  const seenSockets = new WeakSet<object>();
  const sharedAnswers = new SharedAnswers(services.db);

  app.use(requestContext);
  // API answers carry patient data: no browser or proxy keeps a copy (the UI's files say otherwise).
  app.use((_req: Request, res: Response, next: NextFunction) => {
    res.setHeader('Cache-Control', 'no-store');
    // A browser must not guess a type: an uploaded file or a CSV cell sniffed as HTML would run.
    res.setHeader('X-Content-Type-Options', 'nosniff');
    next();
  });
  app.use((req: Request, res: Response, next: NextFunction) => {
    res.on('finish', () => {
      const ctx = contextOf(req);
      log.info('request', {
        method: req.method,
        route: ctx.route ?? 'unmatched',
        status: res.statusCode,
        ms: Math.round(performance.now() - ctx.startedAt),
        request_id: ctx.requestId,
        key_id: ctx.auth?.keyId ?? null,
      });
    });
    next();
  });
  app.use(hostCheck(config.allowedHosts));
  app.use(cors(config.allowedOrigins));
  app.use(apiVersion);
  app.use(async (req: Request, res: Response, next: NextFunction) => {
    // Buckets are keyed by a digest of the key presented (however the header is spelled), never
    // by the key itself.
    const token = bearerToken(req.get('Authorization'));
    const bucket = token ? `k:${digestKey(token).slice(0, 32)}` : `ip:${clientAddress(req)}`;
    const wait = await requestLimiter.take(bucket);
    if (wait > 0) {
      // Before authentication and route matching: the address is what is known of the caller.
      writeAudit({
        at: clock.now().toISOString(),
        request_id: contextOf(req).requestId,
        key_id: null,
        user_id: null,
        action: 'requests.throttled',
        target: null,
        patient_id: null,
        outcome: 'rate_limited',
        status_code: 429,
        address: clientAddress(req) || null,
      }, 'refusal');
      res.setHeader('Retry-After', String(wait));
      throw new MiaError('rate_limited', 'Too many requests', `retry after ${wait} s`, wait);
    }
    next();
  });

  const authStep = (route: Route) => async (req: Request, res: Response, next: NextFunction): Promise<void> => {
    const ctx = contextOf(req);
    ctx.route = `${route.method.toUpperCase()} ${route.path}`;
    const outcome = await authenticate(db, clock, req.get('Authorization'));
    if (!outcome.ok) {
      // Only failures are slowed: a script retrying a dead key from 127.0.0.1 must not lock the
      // workstation's own valid key out, while guessing keys still gets nowhere fast.
      const blockedFor = await failureLimiter.take(`ip:${clientAddress(req)}`);
      writeAudit({
        at: clock.now().toISOString(),
        request_id: ctx.requestId,
        key_id: outcome.keyId,
        user_id: outcome.userId,
        action: 'auth.failure',
        target: ctx.route,
        patient_id: null,
        outcome: outcome.reason,
        status_code: blockedFor > 0 ? 429 : 401,
        address: clientAddress(req) || null,
      }, 'refusal');
      if (blockedFor > 0) {
        throw new MiaError('rate_limited', 'Too many failed authentications', `retry after ${blockedFor} s`, blockedFor);
      }
      throw new MiaError('unauthenticated', 'The API key is missing or invalid', outcome.reason);
    }
    ctx.auth = outcome.auth;
    if (route.access.kind === 'scopes' && !holdsAnyScope(outcome.auth.scopes, route.access.anyOf)) {
      if (route.audit) auditOnFinish(req, res, route.audit, {});
      throw new MiaError(
        'forbidden',
        'No permission for this action',
        `required scope: ${route.access.anyOf.join(' or ')}`,
      );
    }
    if (route.currentKeyOnly && outcome.auth.keyRotated) {
      if (route.audit) auditOnFinish(req, res, route.audit, {});
      throw new MiaError(
        'forbidden',
        'A rotated key may not manage keys or users',
        'this key was rotated and is in its grace period; use the new key to manage keys and users',
      );
    }
    next();
  };

  /** After the response, through the runtime's audit writer (server/audit/audit-writer.ts). */
  const writeAudit = (event: AuditInput, kind: 'event' | 'refusal' = 'event'): void => services.audit.write(event, kind);

  const auditOnFinish = (req: Request, res: Response, action: string, note: AuditNote): void => {
    const ctx = contextOf(req);
    // 'close' also fires when the client goes away mid-response: that read is recorded too.
    res.on('close', () => {
      const status = res.statusCode;
      writeAudit({
        at: clock.now().toISOString(),
        request_id: ctx.requestId,
        key_id: ctx.auth?.keyId ?? null,
        user_id: ctx.auth?.userId ?? null,
        action,
        target: note.target ?? null,
        patient_id: note.patientId ?? null,
        patient_ids: note.patientIds ?? null,
        outcome: !res.writableFinished ? 'aborted' : status < 400 ? 'success' : status === 403 ? 'denied' : 'error',
        status_code: status,
      });
    });
  };

  const handleStep = (route: Route) => async (req: Request, res: Response): Promise<void> => {
    const ctx = contextOf(req);
    const auth = ctx.auth;
    if (!auth) throw new MiaError('internal', 'route reached without authentication');
    const note: AuditNote = {};
    if (route.audit) auditOnFinish(req, res, route.audit, note);
    let format: Format = 'json';
    if (route.produces) checkAccepts(req, route.produces);
    else format = negotiateFormat(req, route.formats);
    const params = parseInput(route.params, req.params, 'path');
    const query = parseInput(route.query, withoutFormat(req.query), 'query');
    const upload = route.upload ? uploadOf(req, route.upload) : undefined;
    let body: unknown;
    if (route.body) {
      if (hasBody(req) && !req.is('application/json')) {
        throw new MiaError('unsupported_media_type', 'Request body must be JSON', 'Content-Type: application/json');
      }
      body = parseInput(route.body, req.body ?? {}, 'body');
    }
    // A connection's first request: others may be waiting to be accepted, one per iteration.
    if (!seenSockets.has(req.socket)) {
      seenSockets.add(req.socket);
      turns.arrived();
    }
    // A kept answer takes its turn too: 50 answers of 500 results written in one iteration
    // held some over 1 s (bench/api.bench.ts, limit=500).
    await turns.take(largePage(query) ? 'large' : 'small');
    const sharing = route.sharedAnswer ? sharedAnswers.sharing(route.path, [params, query, ctx.version]) : null;
    let shared = sharing ? sharedAnswers.get(sharing) : undefined;
    // Awaited only when there is one to join: requests let in together must not all pause here,
    // find none under way, and each compute the answer.
    const underway = sharing && !shared ? sharedAnswers.joining(sharing) : undefined;
    if (underway) shared = await underway;
    if (shared) {
      Object.assign(note, shared.note);
      sendResult(req, res, shared.result, format, route.successStatus, clock);
      return;
    }
    const settle = sharing ? sharedAnswers.computing(sharing) : undefined;
    const handlerContext: HandlerContext<unknown, unknown, unknown> = {
      params,
      query,
      body,
      auth,
      version: ctx.version,
      requestId: ctx.requestId,
      services,
      upload,
      audit: (extra) => Object.assign(note, extra),
      headers: headersOf(req),
    };
    let result: HandlerResult | undefined;
    try {
      result = await route.handle(route.sharedAnswer ? callerBlind(handlerContext, route.path) : handlerContext);
      if (result.kind === 'list') {
        note.patientIds ??= patientsOf(result.items);
        note.target ??= filterTarget(query);
      }
      if (sharing) sharedAnswers.keep(sharing, result, note);
    } finally {
      // Those who joined compute their own when this failed.
      settle?.(result && { result, note: { ...note } });
    }
    sendResult(req, res, result, format, route.successStatus, clock);
  };

  for (const route of ROUTES) {
    const parseBody = route.maxJsonBytes === undefined ? jsonBody : express.json({ limit: route.maxJsonBytes, type: 'application/json', strict: true });
    const steps: express.RequestHandler[] = route.body ? [authStep(route), parseBody, handleStep(route)] : [authStep(route), handleStep(route)];
    for (const path of [route.path, ...route.aliases]) app[route.method](expressPath(path), ...steps);
  }

  if (config.uiDir) app.use(staticUi(config.uiDir));

  app.use((req: Request) => {
    throw new MiaError('not_found', 'No such endpoint', `${req.method} ${req.path.slice(0, 100)} is not part of this API; see /v1/openapi.json`);
  });

  app.use((error: unknown, req: Request, res: Response, _next: NextFunction) => {
    // The client hung up mid-request (an upload cut off): no one reads an answer, what it sent
    // was not stored, and it is no fault of the server's to alarm an operator with.
    // Node reports it as Error('aborted') with code ECONNRESET (its ConnResetException).
    if (error instanceof Error && error.message === 'aborted' && codeOf(error) === 'ECONNRESET') {
      log.info('request.aborted', { request_id: contextOf(req).requestId, route: contextOf(req).route ?? 'unmatched' });
      res.destroy();
      return;
    }
    // A full or failing disk is named (507, 503) wherever the write that met it was made.
    const storage = storageErrorOf(error);
    const body = toErrorBody(storage ?? error);
    if (storage) {
      log.error('storage.failed', { request_id: contextOf(req).requestId, route: contextOf(req).route ?? 'unmatched', status: body.code, code: codeOf(error) ?? null });
    } else if (body.code === 500) {
      log.error('unhandled', {
        request_id: contextOf(req).requestId,
        route: contextOf(req).route ?? 'unmatched',
        error: error instanceof Error ? `${error.name}: ${error.message}`.slice(0, 300) : 'non-error thrown',
      });
    }
    if (error instanceof MiaError && error.retryAfterSeconds !== undefined) res.setHeader('Retry-After', String(error.retryAfterSeconds));
    if (res.headersSent) {
      res.end();
      return;
    }
    // Answered before the body was read (e.g. an upload refused as too large): close the
    // connection, or the rest of the body would be read as the client's next request.
    // A request without a body has nothing left to read: its connection stays reusable.
    if (!req.complete && hasBody(req)) res.setHeader('Connection', 'close');
    sendError(req, res, body, clock);
  });

  return app;
}
