/**
 * What running the image showed (issue 18), kept true. No Docker engine or Compose runs on the
 * development and CI machines, so the files themselves are checked.
 *
 * Mutation check: put back `env_file: [{ path: .env, required: false }]`, or drop `127.0.0.1:`
 * from one demo port, or the gateway's `profiles:`, or add `# syntax=docker/dockerfile:1`:
 * one of these fails.
 */
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';

interface Service {
  profiles?: string[];
  env_file?: unknown;
  ports?: string[];
  restart?: string;
}
const compose = parse(readFileSync('docker-compose.yml', 'utf8')) as { services: Record<string, Service> };
const dockerfile = readFileSync('Dockerfile', 'utf8');

describe('docker-compose.yml', () => {
  it('uses only syntax docker-compose 1.27+ accepts for env files (a plain path, no long form)', () => {
    for (const service of Object.values(compose.services)) {
      if (service.env_file === undefined) continue;
      const entries = Array.isArray(service.env_file) ? service.env_file : [service.env_file];
      for (const entry of entries) expect(typeof entry).toBe('string');
    }
    expect(compose.services.gateway?.env_file).toBe('.env');
  });

  it('publishes the demo (public secrets) on the loopback interface only', () => {
    const ports = compose.services.demo?.ports ?? [];
    expect(ports.length).toBeGreaterThan(0);
    for (const port of ports) expect(port).toMatch(/^127\.0\.0\.1:\d+:\d+$/);
  });

  it('gives the demo and the production gateway separate profiles, so `--profile demo up` starts one gateway on 3000', () => {
    expect(compose.services.demo?.profiles).toEqual(['demo']);
    expect(compose.services.gateway?.profiles).toEqual(['production']);
    expect(compose.services.redis?.profiles).toBeUndefined();
  });

  it('restarts a failing gateway a bounded number of times', () => {
    expect(compose.services.gateway?.restart).toMatch(/^on-failure:\d+$/);
  });
});

describe('Dockerfile', () => {
  it('pulls no BuildKit frontend image (no syntax directive) and installs without dev dependencies at runtime', () => {
    expect(dockerfile).not.toMatch(/^#\s*syntax=/m);
    expect(dockerfile).toMatch(/npm ci --omit=dev/);
    expect(dockerfile).toMatch(/^FROM \$\{NODE_IMAGE\}/m);
    expect(dockerfile).toMatch(/^ARG NODE_IMAGE=node:24-/m);
    expect(dockerfile).toMatch(/^USER node$/m);
  });
});
