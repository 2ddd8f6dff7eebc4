/**
 * The preload: the renderer's only door to the main process. It exposes `window.mia`, a tiny
 * typed object over two named IPC channels; no Node, no ipcRenderer, no arbitrary channels.
 */
import { contextBridge, ipcRenderer } from 'electron';
import { IPC_CHANNELS, type DesktopBridge, type DesktopSession } from '../common/desktop-bridge.ts';

const bridge = {
  kind: 'electron',
  getSession: () => ipcRenderer.invoke(IPC_CHANNELS.session) as Promise<DesktopSession>,
  pickFolder: () => ipcRenderer.invoke(IPC_CHANNELS.pickFolder) as Promise<string | null>,
} satisfies DesktopBridge;

contextBridge.exposeInMainWorld('mia', bridge);
