/** Builds the response envelope of spec 2.1/2.2 and the error structure of spec 7.1. */
import type { ApiVersion } from '#common/vocabulary.ts';

export type Meta = { request_id: string; version: ApiVersion };

export type SuccessEnvelope<T> = { status: 'success'; timestamp: string; data: T; meta: Meta };
export type ErrorBody = { code: number; title: string; message: string; details?: string };
export type ErrorEnvelope = { status: 'error'; timestamp: string; error: ErrorBody; meta: Meta };

export function successEnvelope<T>(data: T, meta: Meta, timestamp: string): SuccessEnvelope<T> {
  return { status: 'success', timestamp, data, meta };
}

/**
 * The text of JSON.stringify(successEnvelope(data, meta, timestamp)) before and after the data's
 * own JSON, so a kept page's bytes are reused while its envelope (request id, time) is new.
 */
export function successEnvelopeAround(meta: Meta, timestamp: string): [before: string, after: string] {
  return [`{"status":"success","timestamp":${JSON.stringify(timestamp)},"data":`, `,"meta":${JSON.stringify(meta)}}`];
}

export function errorEnvelope(error: ErrorBody, meta: Meta, timestamp: string): ErrorEnvelope {
  return { status: 'error', timestamp, error, meta };
}
