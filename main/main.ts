/**
 * Electron main: one instance, the embedded API on 127.0.0.1 with the bundled models, one
 * locked-down window that loads the renderer from that server, the key handed over through the
 * preload (a fresh one when it stopped working), a native folder picker, and a quit that closes
 * the window, lets analyses and in-flight writes finish, then revokes the launch key (quit.ts).
 */
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { app, BrowserWindow, dialog, ipcMain, safeStorage, session, type IpcMainInvokeEvent } from 'electron';
import { IPC_CHANNELS, type DesktopSession } from '../common/desktop-bridge.ts';
import { bundledModelsDirs } from './desktop-paths.ts';
import { startEmbeddedServer, type EmbeddedServer } from './embedded-server.ts';
import { keychainBox } from './keychain.ts';
import { createQuitSequence } from './quit.ts';
import { buildWindowOptions, contentSecurityPolicy, isAllowedNavigation, permissionDecision } from './window-options.ts';

const here = dirname(fileURLToPath(import.meta.url));

/**
 * A workstation that receives images from a modality or PACS over DICOM: MIA_DICOM_PORT (and
 * MIA_AE_TITLE, default MIA) start mia's SCP beside the app; callers are the DICOM peers the
 * admin allowed in Admin > DICOM. A bad value fails the launch with the schema's message.
 */
function desktopDicom(): { port: number; aeTitle: string } | null {
  const port = process.env['MIA_DICOM_PORT'];
  if (!port) return null;
  return { port: /^\d+$/.test(port) ? Number(port) : Number.NaN, aeTitle: process.env['MIA_AE_TITLE'] ?? 'MIA' };
}

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
    const modelsDirs = bundledModelsDirs({ packaged: app.isPackaged, resourcesPath: process.resourcesPath, bundleDir: here });
    embedded = await startEmbeddedServer({ dataDir, uiDir: existsSync(UI_DIR) ? UI_DIR : null, modelsDirs, secretBox: keychainBox(safeStorage), dicom: desktopDicom() });
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

  ipcMain.handle(IPC_CHANNELS.session, async (event): Promise<DesktopSession> => {
    if (!fromMainWindow(event)) throw new Error('session requested by an unknown frame');
    // The launch key, or a new one when it stopped working (revoked on the Admin screen).
    return await server.session();
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

const quitSequence = createQuitSequence({
  closeWindows: () => {
    // Destroyed, not closed: no beforeunload, and its requests stop with it.
    for (const window of BrowserWindow.getAllWindows()) window.destroy();
  },
  stopServer: async () => {
    const server = embedded;
    embedded = null;
    await server?.stop();
  },
  quit: () => app.quit(),
  exit: (code) => app.exit(code),
});
app.on('before-quit', (event) => quitSequence.beforeQuit(event));
app.on('window-all-closed', () => quitSequence.allWindowsClosed());
