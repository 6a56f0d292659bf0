/**
 * Reads a V8 .cpuprofile (inspector Profiler domain / --cpu-prof format) and answers self time
 * by function and by package. Self time of a sample = the time until the next sample, as the
 * DevTools' bottom-up view counts it.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
  columnNumber: number;
}

interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

export interface SelfTimeEntry {
  function: string;
  location: string;
  category: string;
  selfMs: number;
  /** Share of the busy (non-idle) time. */
  percent: number;
}

export interface OwnerEntry {
  owner: string;
  selfMs: number;
  percent: number;
}

export interface ProfileSummary {
  file: string;
  wallMs: number;
  busyMs: number;
  idleMs: number;
  samples: number;
  top: SelfTimeEntry[];
  byCategory: { category: string; selfMs: number; percent: number }[];
  /**
   * Every sample charged to the nearest frame on its stack that is not Node core or native
   * code: a socket write issued by ioredis counts for ioredis, a SHA-1 computed by
   * express-session for express-session. express-session's and on-headers' wrappers of
   * res.end / res.writeHead are looked through (they only sit on the path of every response).
   */
  byOwner: OwnerEntry[];
}

const LOOK_THROUGH = /^(end|writeHead|write)\|node_modules\/(express-session|on-headers)\//;

function ownerOf(frame: CallFrame, location: string): string | undefined {
  if (!location || location.startsWith('node:')) return undefined;
  if (LOOK_THROUGH.test(`${frame.functionName}|${location}`)) return undefined;
  const category = categoryOf(frame, location);
  if (category === 'bff-gateway (src/)') return location.replace(/^dist-bench\//, '').replace(/\.js:\d+$/, '.ts').replace(/:\d+$/, '');
  if (category === 'bench harness') return location.replace(/^dist-bench\//, '').replace(/\.js:\d+$/, '.ts').replace(/:\d+$/, '');
  return category;
}

const SPECIAL = new Set(['(garbage collector)', '(program)', '(idle)', '(root)']);

function relativeLocation(url: string, repoRoot: string): string {
  if (!url) return '';
  let p = url.startsWith('file://') ? decodeURIComponent(new URL(url).pathname) : url;
  if (p.startsWith(repoRoot)) p = path.relative(repoRoot, p);
  const nm = p.lastIndexOf('node_modules/');
  if (nm >= 0) p = p.slice(nm);
  return p;
}

export function categoryOf(frame: CallFrame, location: string): string {
  if (SPECIAL.has(frame.functionName) && !frame.url) return frame.functionName;
  if (location.startsWith('node:')) return 'node core';
  const nm = location.indexOf('node_modules/');
  if (nm >= 0) {
    const parts = location.slice(nm + 'node_modules/'.length).split('/');
    return parts[0]?.startsWith('@') ? `${parts[0]}/${parts[1]}` : (parts[0] ?? 'node_modules');
  }
  if (location.startsWith('dist-bench/src/') || location.startsWith('src/') || location.startsWith('dist/')) return 'bff-gateway (src/)';
  if (location.startsWith('dist-bench/')) return 'bench harness';
  if (!location) return '(native / V8 builtins)';
  return 'other';
}

export function summarizeProfile(file: string, repoRoot: string, topN = 10): ProfileSummary {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parentOf = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parentOf.set(c, n.id);
  const locationOf = (frame: CallFrame) => {
    const file = relativeLocation(frame.url, repoRoot);
    return file ? `${file}:${frame.lineNumber + 1}` : '';
  };
  const ownerCache = new Map<number, string>();
  const ownerOfNode = (id: number): string => {
    const cached = ownerCache.get(id);
    if (cached !== undefined) return cached;
    const leaf = (byId.get(id) as ProfileNode).callFrame;
    let owner: string | undefined = SPECIAL.has(leaf.functionName) && !leaf.url ? leaf.functionName : undefined;
    for (let cur: number | undefined = id; owner === undefined && cur !== undefined; cur = parentOf.get(cur)) {
      const frame = (byId.get(cur) as ProfileNode).callFrame;
      owner = ownerOf(frame, locationOf(frame));
    }
    const result = owner ?? 'node core only (HTTP parser, sockets, timers, event loop)';
    ownerCache.set(id, result);
    return result;
  };
  const byOwner = new Map<string, number>();
  const selfUs = new Map<number, number>();
  const { samples, timeDeltas } = profile;
  for (let i = 0; i < samples.length; i++) {
    // Time until the next sample; the last one gets the average interval.
    const dt = i + 1 < timeDeltas.length ? (timeDeltas[i + 1] as number) : (profile.endTime - profile.startTime) / Math.max(1, samples.length);
    const id = samples[i] as number;
    selfUs.set(id, (selfUs.get(id) ?? 0) + Math.max(0, dt));
  }

  const byFunction = new Map<string, { function: string; location: string; category: string; us: number }>();
  const byCategory = new Map<string, number>();
  let idleUs = 0;
  let totalUs = 0;
  for (const [id, us] of selfUs) {
    const node = byId.get(id);
    if (!node) continue;
    const frame = node.callFrame;
    totalUs += us;
    if (frame.functionName === '(idle)') {
      idleUs += us;
      continue;
    }
    const file = relativeLocation(frame.url, repoRoot);
    const location = locationOf(frame);
    const owner = ownerOfNode(id);
    byOwner.set(owner, (byOwner.get(owner) ?? 0) + us);
    const category = categoryOf(frame, file);
    const name = frame.functionName || '(anonymous)';
    const key = `${name}|${location}`;
    const entry = byFunction.get(key) ?? { function: name, location, category, us: 0 };
    entry.us += us;
    byFunction.set(key, entry);
    byCategory.set(category, (byCategory.get(category) ?? 0) + us);
  }
  const busyUs = totalUs - idleUs;
  const pct = (us: number) => (busyUs > 0 ? (100 * us) / busyUs : 0);
  const top = [...byFunction.values()]
    .sort((a, b) => b.us - a.us)
    .slice(0, topN)
    .map((e) => ({ function: e.function, location: e.location, category: e.category, selfMs: e.us / 1000, percent: pct(e.us) }));
  return {
    file,
    wallMs: (profile.endTime - profile.startTime) / 1000,
    busyMs: busyUs / 1000,
    idleMs: idleUs / 1000,
    samples: samples.length,
    top,
    byCategory: [...byCategory.entries()]
      .sort((a, b) => b[1] - a[1])
      .map(([category, us]) => ({ category, selfMs: us / 1000, percent: pct(us) })),
    byOwner: [...byOwner.entries()]
      .sort((a, b) => b[1] - a[1])
      .map(([owner, us]) => ({ owner, selfMs: us / 1000, percent: pct(us) })),
  };
}
