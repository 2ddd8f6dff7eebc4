import { describe, expect, it } from 'vitest';
import { buildWindowOptions, contentSecurityPolicy, isAllowedNavigation, permissionDecision } from '../../../main/window-options.ts';

describe('Electron window policy', () => {
  it('locks the renderer down: isolation, sandbox, no Node, no webview', () => {
    const prefs = buildWindowOptions('/app/preload.cjs').webPreferences!;
    expect(prefs).toMatchObject({
      preload: '/app/preload.cjs',
      contextIsolation: true,
      sandbox: true,
      nodeIntegration: false,
      nodeIntegrationInWorker: false,
      nodeIntegrationInSubFrames: false,
      webviewTag: false,
      webSecurity: true,
      allowRunningInsecureContent: false,
    });
  });

  it('CSP: only the embedded server, blob images, no inline code or eval', () => {
    const csp = contentSecurityPolicy('http://127.0.0.1:5123');
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain('script-src http://127.0.0.1:5123');
    expect(csp).toContain('connect-src http://127.0.0.1:5123');
    expect(csp).toContain('img-src http://127.0.0.1:5123 blob: data:');
    expect(csp).not.toMatch(/unsafe|\*/);
  });

  it('navigation stays on the server origin', () => {
    const origin = 'http://127.0.0.1:5123';
    expect(isAllowedNavigation('http://127.0.0.1:5123/#/scan/1.2.3', origin)).toBe(true);
    expect(isAllowedNavigation('http://127.0.0.1:5124/', origin)).toBe(false);
    expect(isAllowedNavigation('https://example.com/', origin)).toBe(false);
    expect(isAllowedNavigation('file:///etc/passwd', origin)).toBe(false);
    expect(isAllowedNavigation('not a url', origin)).toBe(false);
  });

  it('denies every permission', () => {
    for (const permission of ['media', 'notifications', 'clipboard-read', 'clipboard-sanitized-write', 'geolocation', 'openExternal']) {
      expect(permissionDecision(permission)).toBe(false);
    }
  });
});
