/** Loads something for a screen and exposes loading, error and a reload. */
import { useCallback, useEffect, useRef, useState } from 'react';

export type Loaded<T> =
  | { state: 'loading'; reload(): void }
  | { state: 'error'; error: unknown; reload(): void }
  | { state: 'ready'; value: T; reload(): void; set(value: T): void };

export function useLoad<T>(load: (signal: AbortSignal) => Promise<T>, deps: readonly unknown[]): Loaded<T> {
  const [state, setState] = useState<{ state: 'loading' } | { state: 'error'; error: unknown } | { state: 'ready'; value: T }>({ state: 'loading' });
  const [generation, setGeneration] = useState(0);
  const loadRef = useRef(load);
  loadRef.current = load;

  useEffect(() => {
    const controller = new AbortController();
    setState((previous) => (previous.state === 'ready' && generation > 0 ? previous : { state: 'loading' }));
    loadRef.current(controller.signal).then(
      (value) => {
        if (!controller.signal.aborted) setState({ state: 'ready', value });
      },
      (error: unknown) => {
        if (!controller.signal.aborted) setState({ state: 'error', error });
      },
    );
    return () => controller.abort();
    // The caller lists what the load depends on, as with useEffect.
  }, [...deps, generation]);

  const reload = useCallback(() => setGeneration((g) => g + 1), []);
  const set = useCallback((value: T) => setState({ state: 'ready', value }), []);
  if (state.state === 'ready') return { state: 'ready', value: state.value, reload, set };
  if (state.state === 'error') return { state: 'error', error: state.error, reload };
  return { state: 'loading', reload };
}
