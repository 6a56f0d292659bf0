/**
 * Reading Redis's eviction setting from an `INFO memory` answer (src/redis/eviction.ts).
 * Mutations that fail this file: parseMemoryInfo's policy pattern without its `^` (a field
 * whose name only ends alike is taken), or mayEvict without its `maxmemoryBytes > 0`.
 */
import { mayEvict, parseMemoryInfo } from '../../../src/redis/eviction.js';

const info = (lines: string[]) => ['# Memory', 'used_memory:1048576', ...lines, 'mem_allocator:jemalloc-5.3.0', ''].join('\r\n');

describe('parseMemoryInfo', () => {
  it('reads the policy and the limit from CRLF lines', () => {
    expect(parseMemoryInfo(info(['maxmemory:67108864', 'maxmemory_human:64.00M', 'maxmemory_policy:allkeys-lru']))).toEqual({ policy: 'allkeys-lru', maxmemoryBytes: 67108864 });
    expect(parseMemoryInfo(info(['maxmemory:0', 'maxmemory_policy:noeviction']).replaceAll('\r\n', '\n'))).toEqual({ policy: 'noeviction', maxmemoryBytes: 0 });
  });

  it('states nothing when either line is missing (an answer not from Redis, or a section cut)', () => {
    expect(parseMemoryInfo(info(['maxmemory_policy:allkeys-lru']))).toBeUndefined();
    expect(parseMemoryInfo(info(['maxmemory:67108864']))).toBeUndefined();
    expect(parseMemoryInfo('')).toBeUndefined();
  });

  it('does not take a field whose name only ends alike', () => {
    expect(parseMemoryInfo(info(['maxmemory:0', 'x_maxmemory_policy:allkeys-lru', 'maxmemory_policy:noeviction']))).toEqual({ policy: 'noeviction', maxmemoryBytes: 0 });
  });
});

describe('mayEvict', () => {
  it('only with a limit and a policy other than noeviction', () => {
    expect(mayEvict({ policy: 'volatile-ttl', maxmemoryBytes: 1 })).toBe(true);
    expect(mayEvict({ policy: 'allkeys-random', maxmemoryBytes: 1 << 30 })).toBe(true);
    expect(mayEvict({ policy: 'noeviction', maxmemoryBytes: 1 << 30 })).toBe(false);
    expect(mayEvict({ policy: 'allkeys-lru', maxmemoryBytes: 0 })).toBe(false);
  });
});
