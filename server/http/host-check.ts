/**
 * Refuses requests whose Host header names another site. A page on evil.example can make a
 * browser resolve its own name to 127.0.0.1 (DNS rebinding) and talk to this server as
 * "same origin"; the Host header still says evil.example, so it is checked on every request.
 */
import type { Request, Response, NextFunction } from 'express';
import { MiaError } from '#server/errors.ts';

const LOOPBACK_NAMES = new Set(['127.0.0.1', 'localhost', '[::1]']);

export function hostNameOf(hostHeader: string): string {
  const host = hostHeader.trim().toLowerCase();
  if (host.startsWith('[')) return host.slice(0, host.indexOf(']') + 1);
  const colon = host.lastIndexOf(':');
  return colon === -1 ? host : host.slice(0, colon);
}

/** Host headers as sent: headersDistinct would build an array for every header of every request. */
function hostHeaders(raw: readonly string[]): number {
  let count = 0;
  for (let i = 0; i < raw.length; i += 2) if (raw[i]?.length === 4 && raw[i]?.toLowerCase() === 'host') count += 1;
  return count;
}

export function hostCheck(allowedHosts: readonly string[]) {
  const allowed = new Set([...LOOPBACK_NAMES, ...allowedHosts.map((h) => h.toLowerCase())]);
  return (req: Request, _res: Response, next: NextFunction): void => {
    // Node keeps only the first Host header; a proxy or cache before us may use the last. Two
    // are a malformed request (RFC 9112 3.2: a server must answer 400).
    if (hostHeaders(req.rawHeaders) > 1) {
      throw new MiaError('invalid', 'More than one Host header', 'Host: send exactly one Host header (RFC 9112 3.2)');
    }
    const header = req.get('Host');
    if (!header || !allowed.has(hostNameOf(header))) {
      throw new MiaError(
        'invalid',
        'Host header not allowed',
        'Host: this server answers only to its configured names (protection against DNS rebinding)',
      );
    }
    next();
  };
}
