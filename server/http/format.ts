/**
 * Response format negotiation (spec 4.1, PRODUCT.md): the `format` query parameter wins over
 * Accept; JSON is the default; a format an endpoint does not offer is 406 with the list.
 */
import type { Request } from 'express';
import { MiaError } from '#server/errors.ts';

export const FORMATS = ['json', 'csv', 'xml'] as const;
export type Format = (typeof FORMATS)[number];

const MIME: Record<Format, string> = {
  json: 'application/json',
  csv: 'text/csv',
  xml: 'application/xml',
};

export const CONTENT_TYPE: Record<Format, string> = {
  json: 'application/json; charset=utf-8',
  csv: 'text/csv; charset=utf-8',
  xml: 'application/xml; charset=utf-8',
};

function notAcceptable(asked: string, offered: readonly Format[]): MiaError {
  return new MiaError(
    'not_acceptable',
    `Format ${asked} is not offered by this endpoint`,
    `supported formats: ${offered.join(', ')}`,
  );
}

type MediaRange = { type: string; q: number };

function parseAccept(header: string): MediaRange[] {
  return header
    .split(',')
    .map((part) => {
      const [type = '', ...params] = part.trim().split(';');
      const qParam = params.map((p) => p.trim()).find((p) => p.startsWith('q='));
      const q = qParam ? Number(qParam.slice(2)) : 1;
      return { type: type.trim().toLowerCase(), q: Number.isFinite(q) ? q : 0 };
    })
    .filter((range) => range.type !== '' && range.q > 0)
    .sort((a, b) => b.q - a.q);
}

function matches(range: string, format: Format): boolean {
  if (range === '*/*') return true;
  const mime = MIME[format];
  if (range.endsWith('/*')) return mime.startsWith(range.slice(0, -1));
  // text/xml is what many legacy clients send for XML.
  return range === mime || (format === 'xml' && range === 'text/xml');
}

export function negotiateFormat(req: Request, offered: readonly Format[]): Format {
  const query = req.query['format'];
  if (query !== undefined) {
    const asked = typeof query === 'string' ? query.toLowerCase() : String(query);
    const format = offered.find((f) => f === asked);
    if (!format) throw notAcceptable(`'${asked.slice(0, 20)}'`, offered);
    return format;
  }
  const accept = req.get('Accept');
  if (!accept) return 'json';
  const ranges = parseAccept(accept);
  if (ranges.length === 0) return 'json';
  for (const range of ranges) {
    // JSON first: a client accepting anything gets the default.
    const format = (['json', ...offered] as const).find((f) => offered.includes(f) && matches(range.type, f));
    if (format) return format;
  }
  throw notAcceptable(`'${accept.slice(0, 60)}'`, offered);
}

/** For routes with one fixed media type (PNG frames, raw pixels, event streams): an Accept
 * header must allow that type, a wildcard of its family, or anything. */
export function checkAccepts(req: Request, mediaTypes: readonly string[]): void {
  const accept = req.get('Accept');
  if (!accept) return;
  const ranges = parseAccept(accept);
  if (ranges.length === 0) return;
  const acceptable = (mediaType: string): boolean => {
    const family = mediaType.slice(0, mediaType.indexOf('/') + 1) + '*';
    return ranges.some((range) => range.type === '*/*' || range.type === family || range.type === mediaType);
  };
  if (mediaTypes.some(acceptable)) return;
  const list = mediaTypes.join(', ');
  throw new MiaError('not_acceptable', `This endpoint answers with ${list} only`, `supported formats: ${list}`);
}
