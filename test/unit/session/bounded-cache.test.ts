/**
 * The per-process caches of sessions read (records.ts views, vault.ts opened token sets) are
 * bounded in bytes as well as entries: 10,000 sessions whose ID tokens were near the 64 KiB
 * limit held gigabytes under a bound by count alone.
 *
 * Mutations that fail this file (checked by hand): src/session/bounded-cache.ts set(), the
 * eviction condition without its byte part (`entries.size < maxEntries`); records.ts
 * createViewCache's `maxBytes = 64 * 1024 * 1024` made `Infinity`.
 */
import { createBoundedCache } from '../../../src/session/bounded-cache.js';
import { createViewCache, UNREADABLE_VIEW } from '../../../src/session/records.js';
import { createOpenedCache } from '../../../src/session/vault.js';
import type { TokenSet } from '../../../src/session/tokens.js';

const cache = (maxEntries: number, maxBytes: number) => createBoundedCache<string>({ maxEntries, maxBytes, sizeOf: (v) => v.length });

it('evicts the oldest entries until the new one fits the byte budget', () => {
  const c = cache(100, 10);
  c.set('a', 'xxxx');
  c.set('b', 'xxxx');
  expect(c.bytes).toBe(8);
  c.set('c', 'xxxxx');
  expect(c.get('a')).toBeUndefined();
  expect(c.get('b')).toBe('xxxx');
  expect(c.get('c')).toBe('xxxxx');
  expect(c.bytes).toBe(9);
  c.set('d', 'xxxxxxxxx');
  expect([c.get('b'), c.get('c'), c.get('d')]).toEqual([undefined, undefined, 'xxxxxxxxx']);
  expect([c.size, c.bytes]).toEqual([1, 9]);
});

it('evicts the oldest entry past the entry bound', () => {
  const c = cache(2, 1000);
  c.set('a', '1');
  c.set('b', '2');
  c.set('c', '3');
  expect([c.get('a'), c.get('b'), c.get('c')]).toEqual([undefined, '2', '3']);
  expect([c.size, c.bytes]).toEqual([2, 2]);
});

it('keeps no entry larger than the whole budget, and drops the one it replaces', () => {
  const c = cache(10, 4);
  c.set('a', 'xx');
  c.set('b', 'yy');
  c.set('a', 'zzzzz');
  expect([c.get('a'), c.get('b')]).toEqual([undefined, 'yy']);
  expect([c.size, c.bytes]).toEqual([1, 2]);
});

it('counts a replaced entry once, as the newest', () => {
  const c = cache(2, 100);
  c.set('a', 'xxx');
  c.set('b', 'y');
  c.set('a', 'xxxxxx');
  expect(c.bytes).toBe(7);
  c.set('c', 'z');
  // `a` was set again after `b`: `b` is the oldest now.
  expect([c.get('a'), c.get('b'), c.get('c')]).toEqual(['xxxxxx', undefined, 'z']);
  c.delete('a');
  c.delete('nothing');
  expect([c.size, c.bytes]).toEqual([1, 1]);
});

it("bounds the gateway's two session caches at 64 MiB (estimated) and 10,000 sessions by default", () => {
  const MiB = 1024 * 1024;
  const views = createViewCache();
  const record = Buffer.alloc(MiB);
  for (let i = 0; i < 100; i += 1) views.set(`d${i}`, { raw: record, view: UNREADABLE_VIEW, endsAt: undefined });
  expect(views.bytes).toBeLessThanOrEqual(64 * MiB);
  expect(views.size).toBe(Math.floor((64 * MiB) / (2 * MiB + 1024)));

  const opened = createOpenedCache();
  const sealed = 'x'.repeat(MiB);
  for (let i = 0; i < 100; i += 1) opened.set(`d${i}`, { sealed, tokens: {} as TokenSet });
  expect(opened.bytes).toBeLessThanOrEqual(64 * MiB);
  expect(opened.size).toBe(Math.floor((64 * MiB) / (2 * MiB + 512)));

  const small = createOpenedCache();
  for (let i = 0; i < 10_001; i += 1) small.set(`d${i}`, { sealed: 'x', tokens: {} as TokenSet });
  expect(small.size).toBe(10_000);
});
