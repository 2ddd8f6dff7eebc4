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
    for (const file of files) {
      let signature: string;
      try {
        const info = await stat(file);
        signature = `${info.size}:${info.mtimeMs}`;
      } catch {
        continue;
      }
      if (imported.get(file) === signature) continue;
      const before = seen.get(file);
      if (!before || before.signature !== signature) {
        seen.set(file, { signature, since: now });
        continue;
      }
      if (now - before.since >= options.stableMs) ready.push(file);
    }
    for (const file of seen.keys()) if (!present.has(file)) seen.delete(file);
    if (ready.length === 0) return;
    await options.importFiles(ready);
    for (const file of ready) {
      const s = seen.get(file);
      if (s) imported.set(file, s.signature);
      seen.delete(file);
    }
  };

  const tick = (): void => {
    running = scan()
      .catch(options.onError)
      .finally(() => {
        if (!stopped) timer = setTimeout(tick, interval);
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
