/**
 * The object Electron's preload exposes to the renderer as `window.mia`, and the names of the
 * IPC channels behind it. Shared by main/ (which implements it) and renderer/ (which uses it);
 * no imports, so either side can take it without pulling in the other's code.
 */

export const IPC_CHANNELS = {
  /** Renderer asks main for the embedded server's URL and a working key: this launch's, or a
   * fresh one when that was refused (the desktop user has no key to type in). */
  session: 'mia:session',
  /** Renderer asks main to show the native folder picker. */
  pickFolder: 'mia:pick-folder',
} as const;

export type DesktopSession = {
  /** http://127.0.0.1:PORT of the embedded server. */
  baseUrl: string;
  /** A key issued for this launch only; revoked when the app quits. */
  apiKey: string;
};

export type DesktopBridge = {
  readonly kind: 'electron';
  getSession(): Promise<DesktopSession>;
  /** The absolute path of the chosen folder, or null when the dialog was cancelled. */
  pickFolder(): Promise<string | null>;
};
