/**
 * Serves the built renderer (renderer/dist) at / so the workstation UI works in any browser on
 * the machine (`mia serve`). The files hold no data, so they need no key; the API keeps every
 * route it had, and the Host check runs before this. Every page carries a strict CSP: scripts,
 * styles and connections from this origin only, images also from blob: (thumbnails and frames
 * fetched with the key), no frames, no plugins, no inline code.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import express, { type NextFunction, type Request, type Response } from 'express';

export const UI_CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' blob: data:",
  "connect-src 'self'",
  "font-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
  "object-src 'none'",
].join('; ');

/** Paths the API owns: never answered with the UI, so a wrong API path still gets a JSON 404. */
function isApiPath(path: string): boolean {
  return path.startsWith('/v1/') || path === '/v1' || path === '/reports' || path.startsWith('/reports/');
}

export function staticUi(dir: string) {
  const files = express.static(dir, {
    index: 'index.html',
    dotfiles: 'deny',
    fallthrough: true,
    redirect: false,
    setHeaders: (res, path) => {
      res.setHeader('Content-Security-Policy', UI_CONTENT_SECURITY_POLICY);
      res.setHeader('X-Content-Type-Options', 'nosniff');
      res.setHeader('Referrer-Policy', 'no-referrer');
      res.setHeader('Cross-Origin-Opener-Policy', 'same-origin');
      // index.html names the hashed bundles, so it must be fresh; the bundles never change.
      res.setHeader('Cache-Control', path.endsWith('.html') ? 'no-cache' : 'public, max-age=31536000, immutable');
    },
  });
  const present = existsSync(join(dir, 'index.html'));
  return (req: Request, res: Response, next: NextFunction): void => {
    if (!present || (req.method !== 'GET' && req.method !== 'HEAD') || isApiPath(req.path)) {
      next();
      return;
    }
    files(req, res, next);
  };
}
