/**
 * Screens are addressed by the location hash (#/scan/ID), so the back button works and a
 * reload never puts the API key in a URL: the key lives only in memory.
 */

export type RouteName = 'worklist' | 'viewer' | 'report' | 'import' | 'exports' | 'models' | 'admin' | 'pacs';

export type AppRoute =
  | { name: 'worklist' }
  | { name: 'viewer'; scanId: string }
  | { name: 'report'; scanId: string }
  | { name: 'import' }
  | { name: 'exports' }
  | { name: 'models' }
  | { name: 'admin' }
  /** Search PACS: query and retrieve from the install's DICOM peers (opened from the worklist). */
  | { name: 'pacs' };

export function parseRoute(hash: string): AppRoute {
  const parts = hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
  const [head, id] = parts;
  if ((head === 'scan' || head === 'viewer') && id) return { name: 'viewer', scanId: id };
  if (head === 'report' && id) return { name: 'report', scanId: id };
  if (head === 'import') return { name: 'import' };
  if (head === 'exports') return { name: 'exports' };
  if (head === 'models') return { name: 'models' };
  if (head === 'admin') return { name: 'admin' };
  if (head === 'pacs') return { name: 'pacs' };
  return { name: 'worklist' };
}

export function routeHash(route: AppRoute): string {
  switch (route.name) {
    case 'viewer':
      return `#/scan/${encodeURIComponent(route.scanId)}`;
    case 'report':
      return `#/report/${encodeURIComponent(route.scanId)}`;
    case 'worklist':
      return '#/worklist';
    default:
      return `#/${route.name}`;
  }
}

export function navigate(route: AppRoute): void {
  window.location.hash = routeHash(route);
}
