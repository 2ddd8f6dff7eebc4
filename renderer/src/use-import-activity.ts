/**
 * Import jobs as the worklist needs them: which are running (with their counts), and a call to
 * `onChange` whenever the recent jobs moved on - a new job, more files imported, a job finished.
 * An import started anywhere (the Import screen, another tab, `mia import`, the watched folder)
 * shows up this way; the worklist no longer depends on a scan being queued or analysing to
 * refresh. GET /v1/imports lists newest first; a few jobs are enough to notice any change.
 */
import { useEffect, useRef, useState } from 'react';
import type { Client } from './api/client.ts';
import type { ImportJobSummary, Page } from './api/types.ts';
import { importSignature } from './import-signature.ts';

/** While something imports: often enough to see series arrive, rare enough to stay cheap. */
export const IMPORT_POLL_BUSY_MS = 1500;
/** Otherwise: a job that starts (or even finishes) in between is still noticed within seconds. */
export const IMPORT_POLL_IDLE_MS = 4000;
const RECENT_JOBS = 10;


export function useImportActivity(client: Client, onChange: () => void): readonly ImportJobSummary[] {
  const [running, setRunning] = useState<readonly ImportJobSummary[]>([]);
  const onChangeRef = useRef(onChange);
  onChangeRef.current = onChange;

  useEffect(() => {
    const controller = new AbortController();
    let timer: ReturnType<typeof setTimeout> | undefined;
    let last: string | null = null;
    let asking = false;
    /** Returns whether an import is running. A hidden tab asks nothing; it catches up on its
     * first look after becoming visible. */
    const ask = async (): Promise<boolean> => {
      if (document.visibilityState !== 'visible') return false;
      const page = await client.get<Page<ImportJobSummary>>('/v1/imports', { query: { limit: RECENT_JOBS }, signal: controller.signal });
      const signature = importSignature(page.items);
      if (last !== null && signature !== last) onChangeRef.current();
      last = signature;
      const now = page.items.filter((job) => job.status === 'running');
      setRunning((previous) => (previous.length === 0 && now.length === 0 ? previous : now));
      return now.length > 0;
    };
    const tick = async (): Promise<void> => {
      // One chain of requests only, even when the tab becomes visible during a request.
      if (asking) return;
      asking = true;
      let busy = false;
      try {
        busy = await ask();
      } catch {
        // The worklist shows its own errors; this only stops adding to them.
      } finally {
        asking = false;
      }
      if (!controller.signal.aborted) timer = setTimeout(() => void tick(), busy ? IMPORT_POLL_BUSY_MS : IMPORT_POLL_IDLE_MS);
    };
    void tick();
    const onVisible = () => {
      if (document.visibilityState !== 'visible') return;
      clearTimeout(timer);
      void tick();
    };
    document.addEventListener('visibilitychange', onVisible);
    return () => {
      controller.abort();
      clearTimeout(timer);
      document.removeEventListener('visibilitychange', onVisible);
    };
  }, [client]);

  return running;
}
