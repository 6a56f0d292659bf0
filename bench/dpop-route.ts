/**
 * The DPoP route of `npm run bench` (issue 15). The bench gateway has a second route, `/dpop`,
 * with `dpop: true` on the same echo upstream as the Bearer route `/api`; it is loaded as its
 * own target, `gateway-dpop`, in the same alternating rounds, so both routes are measured in
 * the same gateway process, session, Redis and upstream, and only the route differs.
 *
 * The cost is read from the gateway process's own CPU (the loader is another process), as the
 * median over rounds of the per-round difference: each round runs both routes within seconds
 * of each other, so machine drift between rounds cancels out of the difference.
 *
 * Before the load, `checkSchemes` asks the upstream which scheme it received on each route
 * (the upstream answers the scheme word and whether a `DPoP` header came, never the token), so
 * the bench cannot silently measure a Bearer call under the DPoP name.
 */
import { median, round } from './lib/stats.js';

export const DPOP_TARGET = 'gateway-dpop';
/** The DPoP route's prefix in bench/servers/gateway.ts. */
export const DPOP_ROUTE_PATH = '/dpop';

/** What dpop-route needs of run.ts's per-target summary and per-run record. */
interface Summary {
  target: string;
  rps: number;
  p50Ms: number;
  p99Ms: number;
  redisCommandsPerRequest: number;
  cpuUsPerRequest: Record<string, number>;
}
interface Run {
  target: string;
  round: number;
  cpuUsPerRequest: Record<string, number>;
}

export interface DpopComparison {
  /** Gateway CPU per call (µs, median over rounds) on each route. */
  bearerCpuUs: number;
  dpopCpuUs: number;
  /** Median over rounds of (DPoP − Bearer) gateway CPU per call, µs: the figure reported. */
  extraCpuUs: number;
  /** The same difference in each round, µs. */
  extraCpuUsByRound: number[];
  extraPercent: number;
  bearerRedisPerCall: number;
  dpopRedisPerCall: number;
  /** DPoP req/s over Bearer req/s (medians). */
  rpsRatio: number;
  p99DeltaMs: number;
}

export function dpopComparison(summaries: readonly Summary[], runs: readonly Run[]): DpopComparison | undefined {
  const bearer = summaries.find((s) => s.target === 'gateway');
  const dpop = summaries.find((s) => s.target === DPOP_TARGET);
  if (!bearer || !dpop) return undefined;
  const cpu = (target: string, roundNo: number) => runs.find((r) => r.target === target && r.round === roundNo)?.cpuUsPerRequest.target;
  const byRound: number[] = [];
  for (const roundNo of new Set(runs.map((r) => r.round))) {
    const b = cpu('gateway', roundNo);
    const d = cpu(DPOP_TARGET, roundNo);
    if (b !== undefined && d !== undefined) byRound.push(round(d - b, 1));
  }
  const bearerCpuUs = bearer.cpuUsPerRequest.target ?? 0;
  const dpopCpuUs = dpop.cpuUsPerRequest.target ?? 0;
  const extraCpuUs = round(median(byRound), 1);
  return {
    bearerCpuUs,
    dpopCpuUs,
    extraCpuUs,
    extraCpuUsByRound: byRound,
    extraPercent: bearerCpuUs > 0 ? round((100 * extraCpuUs) / bearerCpuUs, 1) : 0,
    bearerRedisPerCall: round(bearer.redisCommandsPerRequest, 4),
    dpopRedisPerCall: round(dpop.redisCommandsPerRequest, 4),
    rpsRatio: round(dpop.rps / bearer.rps, 3),
    p99DeltaMs: round(dpop.p99Ms - bearer.p99Ms, 2),
  };
}

/** The one line under the main table. */
export function dpopLine(c: DpopComparison | undefined): string {
  if (!c) return 'DPoP route: not measured.';
  return (
    `DPoP costs ${c.extraCpuUs.toFixed(1)} µs of CPU per call more than Bearer (+${c.extraPercent.toFixed(0)}%; ` +
    `gateway CPU ${c.bearerCpuUs.toFixed(1)} -> ${c.dpopCpuUs.toFixed(1)} µs per call, median of per-round differences ` +
    `${c.extraCpuUsByRound.map((d) => d.toFixed(1)).join(', ')}); ` +
    `Redis commands per call ${c.bearerRedisPerCall.toFixed(3)} -> ${c.dpopRedisPerCall.toFixed(3)}; ` +
    `req/s ${c.rpsRatio.toFixed(3)} x Bearer, p99 ${c.p99DeltaMs >= 0 ? '+' : ''}${c.p99DeltaMs.toFixed(2)} ms.`
  );
}

interface SchemeProbe {
  name: string;
  url: string;
  headers: Record<string, string>;
}

/**
 * One call per route with `x-bench-echo-auth: 1`: the Bearer route must reach the upstream as
 * `Bearer` without a proof, the DPoP route as `DPoP` with one. Throws otherwise.
 */
export async function checkSchemes(bearer: SchemeProbe, dpop: SchemeProbe): Promise<void> {
  const probe = async (t: SchemeProbe, scheme: string, proof: string) => {
    const res = await fetch(t.url, { headers: { ...t.headers, 'x-bench-echo-auth': '1' }, signal: AbortSignal.timeout(10_000) });
    await res.arrayBuffer();
    const got = `${res.status} ${res.headers.get('x-bench-auth-scheme') ?? '?'} proof=${res.headers.get('x-bench-dpop-proof') ?? '?'}`;
    if (got !== `200 ${scheme} proof=${proof}`) throw new Error(`${t.name}: the upstream saw ${got}, expected 200 ${scheme} proof=${proof}`);
  };
  await probe(bearer, 'Bearer', 'no');
  await probe(dpop, 'DPoP', 'yes');
}
