/**
 * The one place that decides how the workstation window may behave (STYLE.md, Electron):
 * BrowserWindow options, the CSP, which navigations are allowed, and the permission policy.
 * Plain functions with type-only Electron imports, so they are unit-tested without Electron.
 */
import type { BrowserWindowConstructorOptions } from 'electron';

/**
 * The renderer may load scripts and styles only from the embedded server, talk only to it, and
 * show images from blob: URLs (frames and thumbnails fetched with the key). No inline code, no
 * eval, no plugins, no frames.
 */
export function contentSecurityPolicy(serverOrigin: string): string {
  return [
    "default-src 'none'",
    `script-src ${serverOrigin}`,
    `style-src ${serverOrigin}`,
    `img-src ${serverOrigin} blob: data:`,
    `connect-src ${serverOrigin}`,
    `font-src ${serverOrigin}`,
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
    "object-src 'none'",
  ].join('; ');
}

export function buildWindowOptions(preloadPath: string): BrowserWindowConstructorOptions {
  return {
    width: 1440,
    height: 900,
    minWidth: 1024,
    minHeight: 640,
    backgroundColor: '#111417',
    title: 'mia workstation (not for clinical use)',
    show: false,
    webPreferences: {
      preload: preloadPath,
      contextIsolation: true,
      sandbox: true,
      nodeIntegration: false,
      nodeIntegrationInWorker: false,
      nodeIntegrationInSubFrames: false,
      webviewTag: false,
      webSecurity: true,
      allowRunningInsecureContent: false,
      experimentalFeatures: false,
      navigateOnDragDrop: false,
      spellcheck: false,
      devTools: process.env['MIA_DEVTOOLS'] === '1',
    },
  };
}

/**
 * Navigation stays inside the embedded server's origin (hash changes between screens are
 * in-page and never reach this). Anything else - a link in a report, a dropped file - is refused.
 */
export function isAllowedNavigation(url: string, serverOrigin: string): boolean {
  try {
    return new URL(url).origin === new URL(serverOrigin).origin;
  } catch {
    return false;
  }
}

/** Every permission (camera, notifications, clipboard, geolocation...) is denied. */
export function permissionDecision(_permission: string): boolean {
  return false;
}
