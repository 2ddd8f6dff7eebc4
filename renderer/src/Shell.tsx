/**
 * Banner, navigation, the active model and the current screen, chosen by the location hash.
 * Analysis runs live here so they outlast a change of screen.
 */
import { useEffect, useState } from 'react';
import { AnalysesContext, useAnalysesTracker } from './analyses.ts';
import type { Model, Page } from './api/types.ts';
import { ClinicalBanner } from './components/ClinicalBanner.tsx';
import { SyncIndicator } from './components/SyncIndicator.tsx';
import { parseRoute, routeHash, type AppRoute } from './route.ts';
import { AdminScreen } from './screens/AdminScreen.tsx';
import { ExportsScreen } from './screens/ExportsScreen.tsx';
import { ImportScreen } from './screens/ImportScreen.tsx';
import { ModelsScreen } from './screens/ModelsScreen.tsx';
import { ReportScreen } from './screens/ReportScreen.tsx';
import { SearchPacsScreen } from './screens/SearchPacsScreen.tsx';
import { Viewer } from './screens/Viewer.tsx';
import { Worklist } from './screens/Worklist.tsx';
import { hasScope, useSession } from './session.ts';
import { errorText } from './format.ts';
import { useLoad } from './use-load.ts';

function useRoute(): AppRoute {
  const [route, setRoute] = useState(() => parseRoute(window.location.hash));
  useEffect(() => {
    const onChange = () => setRoute(parseRoute(window.location.hash));
    window.addEventListener('hashchange', onChange);
    return () => window.removeEventListener('hashchange', onChange);
  }, []);
  return route;
}

export function Shell() {
  const session = useSession();
  const route = useRoute();
  const { me, client } = session;
  const analyses = useAnalysesTracker(client);
  // GET /v1/models is one page without limit/cursor (the server refuses them), so not client.all.
  const models = useLoad(async (signal) => (await client.get<Page<Model>>('/v1/models', { signal })).items, [client]);
  const active = models.state === 'ready' ? (models.value.find((m) => m.selected) ?? null) : null;
  const links: { name: 'worklist' | 'import' | 'exports' | 'models' | 'admin'; label: string; show: boolean }[] = [
    { name: 'worklist', label: 'Worklist', show: hasScope(me, 'read:scans') },
    { name: 'import', label: 'Import', show: hasScope(me, 'write:scans') || hasScope(me, '*') },
    { name: 'exports', label: 'Exports', show: hasScope(me, 'write:exports') || hasScope(me, 'read:exports') },
    { name: 'models', label: 'Models', show: true },
    { name: 'admin', label: 'Admin', show: hasScope(me, 'manage:users') || hasScope(me, 'read:audit') },
  ];
  const current = route.name === 'viewer' || route.name === 'report' || route.name === 'pacs' ? 'worklist' : route.name;

  return (
    <AnalysesContext.Provider value={analyses}>
      <div className="shell">
        <ClinicalBanner />
        <header className="topbar">
          <span className="brand">mia</span>
          <nav>
            {links
              .filter((link) => link.show)
              .map((link) => (
                <a
                  key={link.name}
                  href={routeHash({ name: link.name })}
                  className={current === link.name ? 'active' : ''}
                  data-testid={`nav-${link.name}`}
                >
                  {link.label}
                </a>
              ))}
          </nav>
          <a href={routeHash({ name: 'models' })} className="active-model" data-testid="active-model" title={models.state === 'error' ? errorText(models.error) : 'The model new analyses use'}>
            {models.state === 'loading' ? 'Model…' : active ? `Model: ${active.name ?? active.id} v${active.version ?? '?'}` : models.state === 'error' ? 'Model: unknown' : 'No model selected'}
          </a>
          {hasScope(me, 'read:scans') ? <SyncIndicator client={client} /> : null}
          <span className="who" title={me.scopes.join(', ')}>
            {me.email} · {me.role}
          </span>
          {session.signOut ? (
            <button type="button" className="link-button" onClick={session.signOut} data-testid="sign-out">
              Sign out
            </button>
          ) : null}
        </header>
        <main className="screen">
          {route.name === 'worklist' ? <Worklist /> : null}
          {route.name === 'viewer' ? <Viewer key={route.scanId} scanId={route.scanId} /> : null}
          {route.name === 'report' ? <ReportScreen key={route.scanId} scanId={route.scanId} /> : null}
          {route.name === 'import' ? <ImportScreen /> : null}
          {route.name === 'exports' ? <ExportsScreen /> : null}
          {route.name === 'models' ? <ModelsScreen models={models} /> : null}
          {route.name === 'admin' ? <AdminScreen /> : null}
          {route.name === 'pacs' ? <SearchPacsScreen /> : null}
        </main>
      </div>
    </AnalysesContext.Provider>
  );
}
