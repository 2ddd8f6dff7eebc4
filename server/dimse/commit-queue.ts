/**
 * Group commit: items submitted while a commit is running wait for it to end and are then
 * committed together, in one call. A durable commit costs one fsync of the write-ahead log
 * whatever it holds, and DIMSE senders wait for each answer before sending the next instance,
 * so with several associations this turns one fsync per instance into one per round of them
 * (docs/dicom-network.md, "Why a C-STORE costs what it does").
 *
 * An item on its way (its file being fsynced: a few milliseconds, and no network wait) can be
 * announced with `reserve`; a commit about to start waits for the reservations made before it,
 * so the items arriving together are committed together. Later reservations go to the next
 * commit, so a steady stream of them cannot hold one back. A lone item never waits.
 */
export type Reservation<I, O> = {
  /** Resolves with the item's own result once the commit holding it has ended. */
  submit(item: I): Promise<O>;
  /** The item will not come (it failed before): commits stop waiting for it. */
  cancel(): void;
};

export type CommitQueue<I, O> = {
  reserve(): Reservation<I, O>;
  submit(item: I): Promise<O>;
};

type Waiting<I, O> = { item: I; resolve: (out: O) => void; reject: (err: unknown) => void };

/**
 * `commit` receives at most `maxItems` items and resolves with one result per item, in order; if
 * it throws, every item of that call is rejected with the error.
 */
export function createCommitQueue<I, O>(commit: (items: readonly I[]) => Promise<readonly O[]>, maxItems: number): CommitQueue<I, O> {
  let waiting: Waiting<I, O>[] = [];
  let running = false;
  const reserved = new Set<Promise<void>>();

  const drain = async (): Promise<void> => {
    running = true;
    try {
      while (waiting.length > 0) {
        if (reserved.size > 0) await Promise.all([...reserved]);
        const batch = waiting.slice(0, maxItems);
        waiting = waiting.slice(batch.length);
        try {
          const results = await commit(batch.map((w) => w.item));
          batch.forEach((w, i) => {
            const out = results[i];
            if (out === undefined) w.reject(new Error('the commit returned no result for an item'));
            else w.resolve(out);
          });
        } catch (err) {
          for (const w of batch) w.reject(err);
        }
      }
    } finally {
      running = false;
    }
  };

  const submit = (item: I): Promise<O> =>
    new Promise<O>((resolve, reject) => {
      waiting.push({ item, resolve, reject });
      if (!running) void drain();
    });

  return {
    submit,
    reserve() {
      let settle = (): void => undefined;
      const arrived = new Promise<void>((resolve) => (settle = resolve));
      reserved.add(arrived);
      const done = (): void => {
        reserved.delete(arrived);
        settle();
      };
      return {
        submit(item) {
          // Queued before the reservation settles: the commit it releases takes this item too.
          const result = submit(item);
          done();
          return result;
        },
        cancel: done,
      };
    },
  };
}
