/**
 * API version negotiation (PRODUCT.md, Wire conventions): paths carry /v1; the header
 * `API-Version: 1.1` asks for the additive minor version. Anything else is refused so a client
 * never silently gets a shape it did not ask for.
 */
import type { Request, Response, NextFunction } from 'express';
import type { ApiVersion } from '#common/vocabulary.ts';
import { MiaError } from '#server/errors.ts';
import { contextOf } from '#server/http/request-context.ts';

const ACCEPTED: Record<string, ApiVersion> = {
  '1': 'v1',
  '1.0': 'v1',
  v1: 'v1',
  'v1.0': 'v1',
  '1.1': 'v1.1',
  'v1.1': 'v1.1',
};

export function parseApiVersion(header: string | undefined): ApiVersion {
  if (header === undefined || header.trim() === '') return 'v1';
  const version = ACCEPTED[header.trim().toLowerCase()];
  if (!version) {
    throw new MiaError('invalid', `Unknown API version '${header.slice(0, 20)}'`, 'API-Version header: supported values are 1 and 1.1');
  }
  return version;
}

export function apiVersion(req: Request, _res: Response, next: NextFunction): void {
  contextOf(req).version = parseApiVersion(req.get('API-Version'));
  next();
}
