/**
 * The watch folder: files that appear under it are imported once their size and modification
 * time have not changed for `stableMs` (a copy in progress must not be read half written).
 */
import { stat } from 'node:fs/promises';
import { listSourceFiles } from '#server/imports/sources.ts';

export type WatchOptions = {
  dir: string;
  stableMs: number;
  /** Imports a batch of stable files; the watcher waits for it before looking again. */
  importFiles(files: string[]): Promise<void>;
  onError(error: unknown): void;
};

export type Watcher = { stop(): Promise<void> };

type Seen = { signature: string; since: number };

/**
 * Files stat'ed at once. Imported files stay in the folder, so every look stats all of them:
 * one at a time that was 1.0 s per 20,000 files here (a look every 2 s), 64 at a time 0.13 s.
 */
const STATS_IN_FLIGHT = 64;

/**
 * The longest wait between looks while imports keep failing. Each failed import of the ready
 * files is a job row (failed) and a log line: on a disk that stays full the watcher made one
 * every 1.5 s (~57,000 a day); the wait now doubles after each failure, up to this.
 */
const MAX_FAILING_WAIT_MS = 5 * 60_000;

async function signatures(files: readonly string[]): Promise<(string | null)[]> {
  const out: (string | null)[] = [];
  for (let i = 0; i < files.length; i += STATS_IN_FLIGHT) {
    const batch = files.slice(i, i + STATS_IN_FLIGHT).map((file) =>
      stat(file).then(
        (info) => `${info.size}:${info.mtimeMs}`,
        () => null,
      ),
    );
    out.push(...(await Promise.all(batch)));
  }
  return out;
}

export function watchFolder(options: WatchOptions): Watcher {
  const seen = new Map<string, Seen>();
  /** Signature of each file as last imported, so an unchanged file is not imported again. */
  const imported = new Map<string, string>();
  const interval = Math.max(100, Math.min(2000, Math.floor(options.stableMs / 2)));
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> = Promise.resolve();

  const scan = async (): Promise<void> => {
    const { files } = await listSourceFiles([options.dir]);
    const now = Date.now();
    const ready: string[] = [];
    const present = new Set(files);
    const signed = await signatures(files);
    for (const [i, file] of files.entries()) {
      const signature = signed[i];
      // Gone between the listing and its stat.
      if (!signature) continue;
      if (imported.get(file) === signature) continue;
      const before = seen.get(file);
      if (!before || before.signature !== signature) {
        seen.set(file, { signature, since: now });
        continue;
      }
      if (now - before.since >= options.stableMs) ready.push(file);
    }
    // A file removed is forgotten: one copied in again under its name is imported again.
    for (const file of seen.keys()) if (!present.has(file)) seen.delete(file);
    for (const file of imported.keys()) if (!present.has(file)) imported.delete(file);
    if (ready.length === 0) return;
    await options.importFiles(ready);
    for (const file of ready) {
      const s = seen.get(file);
      if (s) imported.set(file, s.signature);
      seen.delete(file);
    }
  };

  let failures = 0;
  const tick = (): void => {
    running = scan()
      .then(
        () => {
          failures = 0;
        },
        (err: unknown) => {
          failures += 1;
          options.onError(err);
        },
      )
      .finally(() => {
        if (!stopped) timer = setTimeout(tick, failures === 0 ? interval : Math.min(MAX_FAILING_WAIT_MS, interval * 2 ** failures));
      });
  };
  timer = setTimeout(tick, 0);

  return {
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      await running;
    },
  };
}
