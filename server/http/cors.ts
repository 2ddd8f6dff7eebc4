/**
 * CORS for explicitly configured origins only; never a wildcard, because the API carries
 * patient data and a browser page elsewhere must not be able to read it.
 */
import type { Request, Response, NextFunction } from 'express';

/** Headers of the raw pixel endpoint a browser viewer must read to interpret the bytes. */
const IMAGE_HEADERS = [
  'X-Rows',
  'X-Columns',
  'X-Samples-Per-Pixel',
  'X-Bits-Allocated',
  'X-Pixel-Representation',
  'X-Rescale-Slope',
  'X-Rescale-Intercept',
  'X-Window-Center',
  'X-Window-Width',
  'X-Photometric-Interpretation',
];

export function cors(allowedOrigins: readonly string[]) {
  const allowed = new Set(allowedOrigins);
  return (req: Request, res: Response, next: NextFunction): void => {
    const origin = req.get('Origin');
    if (origin && allowed.has(origin)) {
      res.setHeader('Access-Control-Allow-Origin', origin);
      res.setHeader('Access-Control-Expose-Headers', `X-Request-Id, Retry-After, X-Next-Cursor, Link, ${IMAGE_HEADERS.join(', ')}`);
      res.setHeader('Vary', 'Origin');
      if (req.method === 'OPTIONS') {
        res.setHeader('Access-Control-Allow-Methods', 'GET, POST, PATCH, DELETE');
        res.setHeader('Access-Control-Allow-Headers', 'Authorization, Content-Type, API-Version, Accept');
        res.setHeader('Access-Control-Max-Age', '600');
        res.status(204).end();
        return;
      }
    }
    next();
  };
}
