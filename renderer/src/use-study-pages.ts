/**
 * Every study for the worklist, read page by page (issue 15: a hospital's 100,000 series are
 * 40,000 studies, about 80 pages and several seconds). The first page shows at once and later
 * pages join every second and a half, so the list is usable within a page's time while
 * the rest arrives. A reload (focus, a finished analysis, an import) reads the whole list again
 * behind the one shown and swaps it in complete, so rows never vanish and come back; on a large
 * list, not back to back (REST_FACTOR).
 */
import { useCallback, useEffect, useRef, useState } from 'react';
import type { Client } from './api/client.ts';
import type { Page, Study } from './api/types.ts';

/**
 * `reload` reads the list again, after the reading under way if there is one: for events that
 * changed it (an analysis finished, an import moved on, the window came back). `refresh` reads it
 * again only if no reading is under way: for polling, which on a large list would otherwise
 * keep one reading queued behind the other for ever.
 */
type Reloads = { reload(): void; refresh(): void };

export type StudyPages =
  | ({ state: 'loading' } & Reloads)
  | ({ state: 'error'; error: unknown } & Reloads)
  /** `complete` is false while later pages of the first reading are still arriving. */
  | ({ state: 'ready'; value: readonly Study[]; complete: boolean } & Reloads);

/** The API's largest page; the first is smaller, a few screens, so it arrives and draws sooner. */
const PAGE = 500;
const FIRST_PAGE = 100;
/** How often arriving pages are shown: each showing sorts and filters everything read so far
 * (a few hundred ms at 40,000 studies), so not at every page. */
const SHOW_EVERY_MS = 1500;
/** Far beyond any one archive's worklist; a server that kept sending pages stops here. */
const MOST_STUDIES = 1_000_000;
/**
 * A reading asked for soon after the last one waits until this many times that reading's length
 * has passed since it ended: a small list (0.1 s) is read again at once, a hospital's (40,000
 * studies, ~5 s) at most every ~25 s instead of back to back while analyses run and finish. Each
 * reading costs the server about a second of CPU and adds every patient on the list to the
 * audit trail (who saw whom).
 */
const REST_FACTOR = 4;

type Shown = { state: 'loading' } | { state: 'error'; error: unknown } | { state: 'ready'; value: readonly Study[]; complete: boolean };

export function useStudyPages(client: Client): StudyPages {
  const [shown, setShown] = useState<Shown>({ state: 'loading' });
  const [generation, setGeneration] = useState(0);
  // Whether anything is on screen yet: a reload then reads quietly behind it.
  const hasValue = useRef(false);
  const reading = useRef(false);
  // A reload asked for during a reading: one more reading follows it, so nothing is missed.
  const again = useRef(false);
  // When the last reading ended and how long it took; a reading waiting out its rest.
  const last = useRef({ endedAt: -Infinity, ms: 0 });
  const resting = useRef<ReturnType<typeof setTimeout> | null>(null);
  const readSoon = useCallback(() => {
    if (resting.current !== null) return;
    const wait = last.current.endedAt + REST_FACTOR * last.current.ms - performance.now();
    if (wait <= 0) {
      setGeneration((g) => g + 1);
      return;
    }
    resting.current = setTimeout(() => {
      resting.current = null;
      setGeneration((g) => g + 1);
    }, wait);
  }, []);
  useEffect(
    () => () => {
      if (resting.current !== null) clearTimeout(resting.current);
    },
    [],
  );

  useEffect(() => {
    const controller = new AbortController();
    const progressive = !hasValue.current;
    reading.current = true;
    const started = performance.now();
    const read = async () => {
      const studies: Study[] = [];
      let cursor: string | null = null;
      let lastShown = 0;
      do {
        const page: Page<Study> = await client.get<Page<Study>>('/v1/studies', { signal: controller.signal, query: { limit: progressive && cursor === null ? FIRST_PAGE : PAGE, cursor } });
        for (const study of page.items) studies.push(study);
        cursor = page.next_cursor;
        const now = performance.now();
        if (progressive && cursor && (studies.length === page.items.length || now - lastShown >= SHOW_EVERY_MS)) {
          lastShown = now;
          hasValue.current = true;
          setShown({ state: 'ready', value: studies.slice(), complete: false });
        }
      } while (cursor && studies.length < MOST_STUDIES);
      return studies;
    };
    read().then(
      (studies) => {
        if (controller.signal.aborted) return;
        hasValue.current = true;
        setShown({ state: 'ready', value: studies, complete: true });
      },
      (error: unknown) => {
        // A failed reload keeps the list shown; only a first reading shows the error.
        if (!controller.signal.aborted && !hasValue.current) setShown({ state: 'error', error });
      },
    ).finally(() => {
      reading.current = false;
      const endedAt = performance.now();
      last.current = { endedAt, ms: endedAt - started };
      if (again.current && !controller.signal.aborted) {
        again.current = false;
        readSoon();
      }
    });
    return () => controller.abort();
  }, [client, generation, readSoon]);

  // A reload during a reading waits for it: restarting would never finish on a large list.
  const reload = useCallback(() => {
    if (reading.current) again.current = true;
    else readSoon();
  }, [readSoon]);
  const refresh = useCallback(() => {
    if (!reading.current) readSoon();
  }, [readSoon]);
  if (shown.state === 'ready') return { ...shown, reload, refresh };
  if (shown.state === 'error') return { ...shown, reload, refresh };
  return { state: 'loading', reload, refresh };
}
