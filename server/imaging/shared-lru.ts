/**
 * Values worked out once and shared: a request that asks while another is loading the same key
 * waits for that load, and what was loaded is kept, least recently used first out, within a
 * budget of bytes (a value larger than the budget is served, not kept).
 */
export type SharedLru<T> = {
  /** `keep` false: shared while loading, not kept after. */
  get(key: string, load: () => Promise<T>, keep?: boolean): Promise<T>;
  readonly bytes: number;
};

export function createSharedLru<T>(maxBytes: number, sizeOf: (value: T) => number): SharedLru<T> {
  const entries = new Map<string, T>();
  const pending = new Map<string, Promise<T>>();
  let bytes = 0;

  const insert = (key: string, value: T): void => {
    const size = sizeOf(value);
    if (size > maxBytes) return;
    entries.set(key, value);
    bytes += size;
    // Evicted from the oldest; each insertion removes about as many as it pushed out.
    for (const [oldKey, old] of entries) {
      if (bytes <= maxBytes) break;
      entries.delete(oldKey);
      bytes -= sizeOf(old);
    }
  };

  return {
    get bytes() {
      return bytes;
    },
    async get(key, load, keep = true) {
      const hit = entries.get(key);
      if (hit !== undefined) {
        // Map order is insertion order: re-inserting marks the entry most recently used.
        entries.delete(key);
        entries.set(key, hit);
        return hit;
      }
      const inFlight = pending.get(key);
      if (inFlight) return inFlight;
      const loading = load().then(
        (value) => {
          pending.delete(key);
          if (keep) insert(key, value);
          return value;
        },
        (err: unknown) => {
          pending.delete(key);
          throw err;
        },
      );
      pending.set(key, loading);
      return loading;
    },
  };
}
