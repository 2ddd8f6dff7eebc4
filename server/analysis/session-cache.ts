/**
 * One onnxruntime session per installed model, created on first use and kept: creating a
 * session (graph load + optimisation) costs far more than running a small batch. Each lives in
 * a worker thread of its own (worker-session.ts). A model whose file changed (new hash) gets a
 * new session; the old one is released. A worker that died is replaced on the next use.
 */
import type { ReadyModel } from '#server/analysis/registry.ts';
import { startWorkerSession, type InferenceSession } from '#server/analysis/worker-session.ts';

export type SessionThreads = { intraOpThreads: number; interOpThreads: number };

type Entry = { sha256: string; session: Promise<InferenceSession> };

export class SessionCache {
  readonly #threads: SessionThreads;
  readonly #entries = new Map<string, Entry>();
  #closed = false;

  constructor(threads: SessionThreads) {
    this.#threads = threads;
  }

  get(model: ReadyModel): Promise<InferenceSession> {
    if (this.#closed) return Promise.reject(new Error('session cache is closed'));
    const current = this.#entries.get(model.id);
    if (current && current.sha256 === model.manifest.file.sha256) return current.session;
    if (current) void releaseQuietly(current.session);
    const forget = (): void => {
      if (this.#entries.get(model.id)?.session === session) this.#entries.delete(model.id);
    };
    const session = startWorkerSession({ modelPath: model.modelPath, ...this.#threads }, forget);
    this.#entries.set(model.id, { sha256: model.manifest.file.sha256, session });
    // A failed load is not cached: the next job retries (the user may have fixed the file).
    session.catch(forget);
    return session;
  }

  async close(): Promise<void> {
    this.#closed = true;
    const sessions = [...this.#entries.values()].map((e) => e.session);
    this.#entries.clear();
    await Promise.all(sessions.map(releaseQuietly));
  }
}

async function releaseQuietly(session: Promise<InferenceSession>): Promise<void> {
  try {
    await (await session).release();
  } catch {
    // A session that failed to load has nothing to release.
  }
}
