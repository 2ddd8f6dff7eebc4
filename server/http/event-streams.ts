/**
 * The event streams an app has open, so its server can end them when it stops. A stream follows
 * a job until it ends, or a sync head for ten minutes: left to run, one open stream held a
 * stopping `mia serve` ("finishing in-flight requests") until its client went away. Ended, a
 * stream's client sees it close and opens another on the next server.
 */
const open = new WeakMap<object, Set<AbortController>>();

/** Registers a stream's controller; returns what removes it once the stream is done. */
export function trackEventStream(app: object, controller: AbortController): () => void {
  let streams = open.get(app);
  if (!streams) open.set(app, (streams = new Set()));
  streams.add(controller);
  return () => streams.delete(controller);
}

export function endEventStreams(app: object): void {
  for (const controller of open.get(app) ?? []) controller.abort();
}
