/** Banner, navigation and the current screen, chosen by the location hash. */
import { useEffect, useState } from 'react';
import { ClinicalBanner } from './components/ClinicalBanner.tsx';
import { parseRoute, routeHash, type AppRoute } from './route.ts';
import { AdminScreen } from './screens/AdminScreen.tsx';
import { ExportsScreen } from './screens/ExportsScreen.tsx';
import { ImportScreen } from './screens/ImportScreen.tsx';
import { ReportScreen } from './screens/ReportScreen.tsx';
import { Viewer } from './screens/Viewer.tsx';
import { Worklist } from './screens/Worklist.tsx';
import { hasScope, useSession } from './session.ts';

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
  const { me } = session;
  const links: { name: 'worklist' | 'import' | 'exports' | 'admin'; label: string; show: boolean }[] = [
    { name: 'worklist', label: 'Worklist', show: hasScope(me, 'read:scans') },
    { name: 'import', label: 'Import', show: hasScope(me, 'write:scans') || hasScope(me, '*') },
    { name: 'exports', label: 'Exports', show: hasScope(me, 'write:exports') || hasScope(me, 'read:exports') },
    { name: 'admin', label: 'Admin', show: hasScope(me, 'manage:users') || hasScope(me, 'read:audit') },
  ];
  const active = route.name === 'viewer' || route.name === 'report' ? 'worklist' : route.name;

  return (
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
                className={active === link.name ? 'active' : ''}
                data-testid={`nav-${link.name}`}
              >
                {link.label}
              </a>
            ))}
        </nav>
        <span className="who" title={me.scopes.join(', ')}>
          {me.email} · {me.role}
        </span>
        <button type="button" className="link-button" onClick={session.signOut}>
          Sign out
        </button>
      </header>
      <main className="screen">
        {route.name === 'worklist' ? <Worklist /> : null}
        {route.name === 'viewer' ? <Viewer key={route.scanId} scanId={route.scanId} /> : null}
        {route.name === 'report' ? <ReportScreen key={route.scanId} scanId={route.scanId} /> : null}
        {route.name === 'import' ? <ImportScreen /> : null}
        {route.name === 'exports' ? <ExportsScreen /> : null}
        {route.name === 'admin' ? <AdminScreen /> : null}
      </main>
    </div>
  );
}
