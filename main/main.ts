/**
 * Electron main: one instance, the embedded API on 127.0.0.1, one locked-down window that loads
 * the renderer from that server, the key handed over through the preload, a native folder
 * picker, and a quit that revokes the launch key and lets in-flight writes finish.
 */
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { app, BrowserWindow, dialog, ipcMain, session, type IpcMainInvokeEvent } from 'electron';
import { IPC_CHANNELS, type DesktopSession } from '../common/desktop-bridge.ts';
import { startEmbeddedServer, type EmbeddedServer } from './embedded-server.ts';
import { buildWindowOptions, contentSecurityPolicy, isAllowedNavigation, permissionDecision } from './window-options.ts';

const here = dirname(fileURLToPath(import.meta.url));
// Packaged: dist-desktop/ beside renderer/dist inside the asar; in development the same layout.
const UI_DIR = join(here, '..', 'renderer', 'dist');
const PRELOAD = join(here, 'preload.cjs');

let embedded: EmbeddedServer | null = null;
let mainWindow: BrowserWindow | null = null;

if (!app.requestSingleInstanceLock()) {
  // A second launch focuses the first window instead of opening a second server on the same data.
  app.quit();
} else {
  app.on('second-instance', () => {
    if (mainWindow) {
      if (mainWindow.isMinimized()) mainWindow.restore();
      mainWindow.focus();
    }
  });
  app.whenReady().then(start, (error: unknown) => fail(error));
}

function fail(error: unknown): void {
  dialog.showErrorBox('mia could not start', error instanceof Error ? error.message : String(error));
  app.exit(1);
}

function fromMainWindow(event: IpcMainInvokeEvent): boolean {
  return mainWindow !== null && event.sender === mainWindow.webContents;
}

async function start(): Promise<void> {
  try {
    const dataDir = process.env['MIA_DATA'] ?? app.getPath('userData');
    embedded = await startEmbeddedServer({ dataDir, uiDir: existsSync(UI_DIR) ? UI_DIR : null });
  } catch (error) {
    fail(error);
    return;
  }
  const server = embedded;
  const origin = new URL(server.url).origin;

  // Permissions: deny all, whether requested or merely checked.
  session.defaultSession.setPermissionRequestHandler((_contents, permission, callback) => callback(permissionDecision(permission)));
  session.defaultSession.setPermissionCheckHandler((_contents, permission) => permissionDecision(permission));
  // The CSP also as a header on everything the window loads (the server sends it for UI files too).
  session.defaultSession.webRequest.onHeadersReceived((details, callback) => {
    callback({ responseHeaders: { ...details.responseHeaders, 'Content-Security-Policy': [contentSecurityPolicy(origin)] } });
  });

  ipcMain.handle(IPC_CHANNELS.session, (event): DesktopSession => {
    if (!fromMainWindow(event)) throw new Error('session requested by an unknown frame');
    return { baseUrl: server.url, apiKey: server.apiKey };
  });
  ipcMain.handle(IPC_CHANNELS.pickFolder, async (event) => {
    if (!fromMainWindow(event) || !mainWindow) return null;
    const picked = await dialog.showOpenDialog(mainWindow, { title: 'Import DICOM folder or disc', properties: ['openDirectory'] });
    return picked.canceled ? null : (picked.filePaths[0] ?? null);
  });

  app.on('web-contents-created', (_event, contents) => {
    contents.setWindowOpenHandler(() => ({ action: 'deny' }));
    contents.on('will-navigate', (navigation, url) => {
      if (!isAllowedNavigation(url, origin)) navigation.preventDefault();
    });
    contents.on('will-redirect', (navigation, url) => {
      if (!isAllowedNavigation(url, origin)) navigation.preventDefault();
    });
    contents.on('will-attach-webview', (attach) => attach.preventDefault());
  });

  mainWindow = new BrowserWindow(buildWindowOptions(PRELOAD));
  mainWindow.once('ready-to-show', () => mainWindow?.show());
  mainWindow.on('closed', () => {
    mainWindow = null;
  });
  // The key is never in this URL: the renderer asks for it over IPC.
  await mainWindow.loadURL(`${server.url}/`);
}

let quitting = false;
app.on('before-quit', (event) => {
  if (quitting || !embedded) return;
  event.preventDefault();
  quitting = true;
  const server = embedded;
  embedded = null;
  server.stop().then(
    () => app.quit(),
    () => app.exit(1),
  );
});

app.on('window-all-closed', () => app.quit());
