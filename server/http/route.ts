/**
 * What a route is: method, path, who may call it, the zod schemas of its input and output, the
 * formats it offers and its handler. The HTTP app, the OpenAPI document and the auth matrix test
 * are all built from the one table of these.
 */
import type { Readable } from 'node:stream';
import type { z } from 'zod';
import type { ApiVersion, Scope } from '#common/vocabulary.ts';
import type { AuthContext } from '#server/auth/authenticate.ts';
import type { ResourceSerializer } from '#server/formats/serializers.ts';
import type { Format } from '#server/http/format.ts';
import type { Runtime } from '#server/runtime.ts';

export type Access = { kind: 'authenticated' } | { kind: 'scopes'; anyOf: readonly Scope[] };

export type AuditNote = {
  target?: string | null;
  patientId?: string | null;
  /** Patients reached by a list read or an export; list results are collected automatically. */
  patientIds?: readonly string[];
};

/** A raw request body a route streams itself (DICOM uploads), instead of parsed JSON. */
export type UploadSpec = {
  /** Accepted media types (without parameters); anything else is 415. */
  contentTypes: readonly string[];
  /** Larger bodies are 413: refused from Content-Length up front, or while streaming. */
  maxBytes: number;
};
export type UploadBody = { contentType: string; length: number | null; maxBytes: number; stream: Readable };

/** Server-Sent Events: `send` writes one event; `signal` aborts when the client goes away. */
export type EventSink = { send(event: string, data: unknown): void; readonly signal: AbortSignal };

export type HandlerContext<P, Q, B> = {
  params: P;
  query: Q;
  body: B;
  auth: AuthContext;
  version: ApiVersion;
  requestId: string;
  services: Runtime;
  /** The raw body, for routes that declare `upload`. */
  upload: UploadBody | undefined;
  /** Adds the target and patient to this request's audit event. */
  audit(note: AuditNote): void;
  /** Request headers, lower-case names; a route that reads one validates it (sync's protocol and Idempotency-Key). */
  headers: Readonly<Record<string, string | undefined>>;
};

export type HandlerResult =
  | { kind: 'data'; data: unknown; status?: number }
  | {
      kind: 'list';
      /** Items in this version's JSON shape (also used for XML). */
      items: readonly unknown[];
      nextAfterId: number | null;
      /** The items for CSV, in the serializer's (fullest) shape. */
      csv?: { serializer: ResourceSerializer<never>; items: readonly unknown[] };
      xml?: ResourceSerializer<never>;
    }
  | { kind: 'file'; path: string; fileName: string; contentType: string }
  /** Bytes that are not JSON (PNG, pixel data), with extra response headers. */
  | { kind: 'binary'; contentType: string; body: Uint8Array; headers?: Readonly<Record<string, string>> }
  /** A body streamed as it is produced (DICOMweb multipart of stored files), never held whole. */
  | { kind: 'stream'; contentType: string; body: Readable; status?: number; headers?: Readonly<Record<string, string>> }
  /** A text/event-stream response that lasts until `run` settles or the client leaves. */
  | { kind: 'events'; run(sink: EventSink): Promise<void> };

export type RouteSpec<P extends z.ZodType, Q extends z.ZodType, B extends z.ZodType> = {
  method: 'get' | 'post' | 'put' | 'patch' | 'delete';
  /** OpenAPI-style path, e.g. /v1/scans/{scan_id}. */
  path: string;
  /** Other paths serving the same route (GET /reports is also GET /v1/reports). */
  aliases?: readonly string[];
  summary: string;
  description?: string;
  access: Access;
  /** Creates or changes keys or users. A rotated key in its grace period may not: otherwise a
   * leaked old key could mint itself a successor that outlives the rotation (issue 10). */
  currentKeyOnly?: boolean;
  params?: P;
  query?: Q;
  body?: B;
  /** A larger JSON body than the API's usual 1 MB (a sync push of 500 changes). */
  maxJsonBytes?: number;
  /** Schema of `data` on success (of each item, for lists); undefined for file downloads. */
  response?: z.ZodType;
  /** Content type of a non-JSON success (image/png, text/event-stream...), for OpenAPI. */
  produces?: string | readonly string[];
  upload?: UploadSpec;
  list?: boolean;
  formats?: readonly Format[];
  successStatus?: number;
  /** Audit action recorded for every authenticated call; omitted for calls that touch no data. */
  audit?: string;
  /**
   * A GET list whose answer (and audit note) is a function of its path parameters, query and API
   * version over the store's content: not of who asks, the clock, headers, or the request log
   * tables (LOG_TABLES). Its answer is kept and given again while the store is unchanged
   * (server/http/shared-answers.ts).
   */
  sharedAnswer?: boolean;
  handle(ctx: HandlerContext<z.output<P>, z.output<Q>, z.output<B>>): HandlerResult | Promise<HandlerResult>;
};

export type Route = {
  method: 'get' | 'post' | 'put' | 'patch' | 'delete';
  path: string;
  aliases: readonly string[];
  summary: string;
  description: string | undefined;
  access: Access;
  currentKeyOnly: boolean;
  params: z.ZodType | undefined;
  query: z.ZodType | undefined;
  body: z.ZodType | undefined;
  maxJsonBytes: number | undefined;
  response: z.ZodType | undefined;
  /** Media types a non-JSON success may have; Accept must allow one of them. */
  produces: readonly string[] | undefined;
  upload: UploadSpec | undefined;
  list: boolean;
  formats: readonly Format[];
  successStatus: number;
  audit: string | undefined;
  sharedAnswer: boolean;
  handle(ctx: HandlerContext<unknown, unknown, unknown>): HandlerResult | Promise<HandlerResult>;
};

export function defineRoute<P extends z.ZodType, Q extends z.ZodType, B extends z.ZodType>(spec: RouteSpec<P, Q, B>): Route {
  if (spec.sharedAnswer && (spec.method !== 'get' || !spec.list)) throw new Error(`${spec.path}: only GET lists can share answers`);
  return {
    method: spec.method,
    path: spec.path,
    aliases: spec.aliases ?? [],
    summary: spec.summary,
    description: spec.description,
    access: spec.access,
    currentKeyOnly: spec.currentKeyOnly ?? false,
    params: spec.params,
    query: spec.query,
    body: spec.body,
    maxJsonBytes: spec.maxJsonBytes,
    response: spec.response,
    produces: spec.produces === undefined ? undefined : typeof spec.produces === 'string' ? [spec.produces] : spec.produces,
    upload: spec.upload,
    list: spec.list ?? false,
    formats: spec.formats ?? ['json'],
    successStatus: spec.successStatus ?? 200,
    audit: spec.audit,
    sharedAnswer: spec.sharedAnswer ?? false,
    // The wrapper parses input with the same schemas before calling, so the types hold.
    handle: spec.handle as Route['handle'],
  };
}

export const scopes = (...anyOf: Scope[]): Access => ({ kind: 'scopes', anyOf });
export const authenticated: Access = { kind: 'authenticated' };
