/**
 * A per-process cache of what was read for a session, bounded in entries and in (estimated)
 * bytes, oldest first out. A count alone did not bound memory: records and token sets grow
 * with the ID token a provider issues (up to 64 KiB), and 10,000 sessions of such users held
 * gigabytes where ordinary ones hold tens of megabytes.
 *
 * `get` is a Map lookup and nothing else: it runs on every proxied call.
 */
export interface BoundedCache<V> {
  get(key: string): V | undefined;
  /** An entry larger than the whole budget is not kept (and any older one under its key goes). */
  set(key: string, value: V): void;
  delete(key: string): void;
  /** The estimated bytes held (what `sizeOf` said of each entry). */
  readonly bytes: number;
  readonly size: number;
}

export interface BoundedCacheOptions<V> {
  maxEntries: number;
  maxBytes: number;
  /** An estimate of what an entry holds, the same every time it is asked of the same value. */
  sizeOf: (value: V) => number;
}

export function createBoundedCache<V>({ maxEntries, maxBytes, sizeOf }: BoundedCacheOptions<V>): BoundedCache<V> {
  const entries = new Map<string, V>();
  let bytes = 0;
  function remove(key: string): void {
    const old = entries.get(key);
    if (old === undefined) return;
    entries.delete(key);
    bytes -= sizeOf(old);
  }
  return {
    get: (key) => entries.get(key),
    set(key, value) {
      remove(key);
      const size = sizeOf(value);
      if (maxEntries < 1 || size > maxBytes) return;
      // Oldest first out: a Map iterates in insertion order.
      for (const oldest of entries.keys()) {
        if (entries.size < maxEntries && bytes + size <= maxBytes) break;
        remove(oldest);
      }
      entries.set(key, value);
      bytes += size;
    },
    delete: remove,
    get bytes() {
      return bytes;
    },
    get size() {
      return entries.size;
    },
  };
}
