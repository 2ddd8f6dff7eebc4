/**
 * Analysis runs started from this window, kept above the screens (in Shell) so a run started on
 * the worklist keeps its progress when the viewer opens, and the other way round. The following
 * itself is analysis-tracker.ts: one request at a time and one poller for every job.
 */
import { createContext, useContext, useEffect, useMemo, useSyncExternalStore } from 'react';
import type { Client } from './api/client.ts';
import { createAnalysisTracker, type AnalysisRun } from './analysis-tracker.ts';

export { isActive, type AnalysisRun, type RunPhase } from './analysis-tracker.ts';

export type Analyses = {
  runs: ReadonlyMap<string, AnalysisRun>;
  /** Counts runs that ended, so lists know when to reload. */
  finished: number;
  start(scanId: string): void;
  cancel(scanId: string): void;
};

export const AnalysesContext = createContext<Analyses | null>(null);

export function useAnalyses(): Analyses {
  const analyses = useContext(AnalysesContext);
  if (!analyses) throw new Error('useAnalyses outside the Shell');
  return analyses;
}

export function useAnalysesTracker(client: Client): Analyses {
  const tracker = useMemo(() => createAnalysisTracker(client), [client]);
  useEffect(() => {
    tracker.resume();
    return () => tracker.dispose();
  }, [tracker]);
  const { runs, finished } = useSyncExternalStore(tracker.subscribe, tracker.snapshot);
  return useMemo(() => ({ runs, finished, start: tracker.start, cancel: tracker.cancel }), [runs, finished, tracker]);
}
