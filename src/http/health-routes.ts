import { Router } from 'express';

export interface HealthDeps {
  /** Each named check resolves true when that dependency is usable. */
  checks: Record<string, () => Promise<boolean> | boolean>;
}

export function createHealthRouter(deps: HealthDeps): Router {
  const router = Router();
  router.get('/healthz', (_req, res) => {
    res.set('Cache-Control', 'no-store').json({ status: 'ok' });
  });
  router.get('/readyz', async (_req, res) => {
    const results = await Promise.all(
      Object.entries(deps.checks).map(async ([name, check]) => [name, await Promise.resolve(check()).catch(() => false)] as const),
    );
    const down = results.filter(([, ok]) => !ok).map(([name]) => name);
    res.set('Cache-Control', 'no-store');
    if (down.length === 0) res.json({ status: 'ready' });
    else res.status(503).json({ status: 'unavailable', down });
  });
  return router;
}
