/** What every screen needs: the API client, who is signed in, and the worklist's scan order. */
import { createContext, useContext } from 'react';
import type { Client } from './api/client.ts';
import type { Me } from './api/types.ts';
import type { DesktopBridge } from '../../common/desktop-bridge.ts';

export type Session = {
  client: Client;
  me: Me['user'];
  /** Scan ids in the order the worklist last showed them: next/previous scan follows it. */
  scanOrder: readonly string[];
  setScanOrder(ids: readonly string[]): void;
  desktop: DesktopBridge | null;
  /** Null in the desktop app, whose user never saw the launch key and could not sign back in. */
  signOut: (() => void) | null;
};

export const SessionContext = createContext<Session | null>(null);

export function useSession(): Session {
  const session = useContext(SessionContext);
  if (!session) throw new Error('useSession outside a signed-in session');
  return session;
}

export function hasScope(me: Me['user'], scope: string): boolean {
  return me.scopes.includes('*') || me.scopes.some((s) => s === scope);
}

declare global {
  // Only an interface can extend the global Window (declaration merging).
  // eslint-disable-next-line @typescript-eslint/consistent-type-definitions
  interface Window {
    /** Set by Electron's preload; absent in a plain browser. */
    mia?: DesktopBridge;
  }
}
