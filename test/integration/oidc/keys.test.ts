/**
 * The provider's keys and metadata: ID token signatures checked against an allow-list, the
 * JWKS refetched (rate-limited) on an unknown kid, and metadata naming another issuer refused.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, SignJWT, type JWK } from 'jose';
import { createJwks } from '../../../src/oidc/jwks.js';
import { verifyIdToken } from '../../../src/oidc/id-token.js';
import { BrowserClient } from '../../support/browser-client.js';
import { buildTestConfig, reserveServer, startTestGateway, gatewayClient } from '../../support/gateway.js';
import { startTestProvider } from '../../support/oidc-provider.js';
import { eventually } from '../../support/wait.js';

const ISSUER = 'https://idp.example';
const checks = { issuer: ISSUER, clientId: 'bff', algorithms: ['RS256', 'ES256'], clockToleranceSeconds: 5 };

async function newKey(kid: string, alg = 'RS256') {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  return { kid, alg, privateKey, jwk: { ...(await exportJWK(publicKey)), kid, alg, use: 'sig' } as JWK };
}

type Key = Awaited<ReturnType<typeof newKey>>;

function idToken(key: Key, claims: Record<string, unknown> = {}, header: Record<string, unknown> = {}) {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({ iss: ISSUER, aud: 'bff', sub: 'alice', iat: now, exp: now + 300, ...claims })
    .setProtectedHeader({ alg: key.alg, kid: key.kid, ...header })
    .sign(key.privateKey);
}

describe('ID token signatures', () => {
  let server: http.Server;
  let published: JWK[] = [];
  let fetches = 0;
  /** The key set's endpoint down: 503 with an HTML page. */
  let down = false;
  /** How long the key set's answer takes; its body is what was published when it was asked. */
  let delayMs = 0;
  let uri: URL;

  beforeAll(async () => {
    server = http.createServer((_req, res) => {
      fetches += 1;
      const body = JSON.stringify({ keys: published });
      const answer = () => {
        if (down) res.writeHead(503, { 'content-type': 'text/html' }).end('<html>down</html>');
        else res.writeHead(200, { 'content-type': 'application/json' }).end(body);
      };
      if (delayMs > 0) setTimeout(answer, delayMs);
      else answer();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    uri = new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}/jwks`);
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  it('accepts a good token and refuses alg none, HS256, a foreign key, a future iat and a wrong audience', async () => {
    const good = await newKey('k1');
    const foreign = await newKey('k1'); // same kid, different key
    published = [good.jwk];
    const jwks = createJwks(uri, { timeoutSeconds: 5 });
    await expect(verifyIdToken(await idToken(good), jwks, checks)).resolves.toMatchObject({ sub: 'alice' });

    const [head, body] = (await idToken(good)).split('.');
    const none = `${Buffer.from(JSON.stringify({ alg: 'none', kid: 'k1' })).toString('base64url')}.${body}.`;
    const hs = await new SignJWT({ iss: ISSUER, aud: 'bff', sub: 'a', iat: 1, exp: 9999999999 })
      .setProtectedHeader({ alg: 'HS256', kid: 'k1' })
      .sign(new TextEncoder().encode('a-shared-secret-guessed-by-an-attacker'));
    const refused = [
      none,
      hs,
      await idToken(foreign),
      await idToken(good, { iat: Math.floor(Date.now() / 1000) + 3600 }),
      await idToken(good, { aud: 'someone-else' }),
      await idToken(good, { iss: 'https://evil.example' }),
      `${head}.${body}.${'A'.repeat(342)}`,
    ];
    for (const [i, token] of refused.entries()) {
      const outcome = await verifyIdToken(token, jwks, checks).then(() => "accepted", () => "refused");
      expect([i, outcome]).toEqual([i, "refused"]);
    }
  });

  it('refetches the JWKS once on an unknown kid however recent the last fetch, so a provider key rotation does not break sign-in', async () => {
    const first = await newKey('rot-1');
    const second = await newKey('rot-2');
    published = [first.jwk];
    const jwks = createJwks(uri, { timeoutSeconds: 5, now: () => 0 });
    fetches = 0;
    await verifyIdToken(await idToken(first), jwks, checks);
    expect(fetches).toBe(1);
    published = [first.jwk, second.jwk]; // the provider rotates, at the same instant
    await expect(verifyIdToken(await idToken(second), jwks, checks)).resolves.toMatchObject({ sub: 'alice' });
    expect(fetches).toBe(2);
  });

  it('lets concurrent tokens with the new kid share one refetch', async () => {
    const first = await newKey('conc-1');
    const second = await newKey('conc-2');
    published = [first.jwk];
    const jwks = createJwks(uri, { timeoutSeconds: 5, now: () => 0 });
    await verifyIdToken(await idToken(first), jwks, checks);
    fetches = 0;
    published = [first.jwk, second.jwk];
    const results = await Promise.allSettled(Array.from({ length: 10 }, async () => verifyIdToken(await idToken(second), jwks, checks)));
    expect(results.map((r) => r.status)).toEqual(Array(10).fill('fulfilled'));
    expect(fetches).toBe(1);
  });

  it('bounds the fetches a flood of unknown kids can cause: once per kid a minute, once a second in all', async () => {
    const known = await newKey('known');
    published = [known.jwk];
    let now = 1_000_000;
    const jwks = createJwks(uri, { timeoutSeconds: 5, now: () => now });
    await verifyIdToken(await idToken(known), jwks, checks);
    fetches = 0;
    const forged = await newKey('forged');
    const forge = async (kid: string) => {
      const token = await idToken(forged, {}, { kid });
      return verifyIdToken(token, jwks, checks).then(() => 'accepted', () => 'refused');
    };
    // Within one second: one refetch in all, whatever the kids.
    for (let i = 0; i < 20; i++) expect(await forge(`forged-${i}`)).toBe('refused');
    expect(fetches).toBe(1);
    // Later: a new kid gets its refetch, a kid already refetched for does not (per-kid minute).
    now += 1500;
    expect(await forge('forged-0')).toBe('refused');
    expect(fetches).toBe(1);
    expect(await forge('forged-new')).toBe('refused');
    expect(fetches).toBe(2);
    now += 60_000;
    expect(await forge('forged-0')).toBe('refused');
    expect(fetches).toBe(3);
  });

  // Fails if, in oidc/jwks.ts createJwks, the stale set's refresh loses its gate
  // `&& at - lastFetch >= limits.minIntervalMs`: every token then asks the provider while its
  // keys are down; or if refetchFor loses `if (failedRecently(at)) throw lastFailure;`
  // (each forged kid then makes a request of its own). (jose's own cacheMaxAge runs on the real clock, which this test does not move:
  // that it is Infinity is read in the code, not pinned here.)
  it('keeps verifying with the cached keys while their refresh fails, and asks the provider at most once a second', async () => {
    const key = await newKey('steady');
    published = [key.jwk];
    let now = 5_000_000;
    const jwks = createJwks(uri, { timeoutSeconds: 5, now: () => now });
    try {
      await verifyIdToken(await idToken(key), jwks, checks);
      fetches = 0;
      down = true;
      now += 11 * 60 * 1000;
      for (let i = 0; i < 20; i++) await expect(verifyIdToken(await idToken(key), jwks, checks)).resolves.toMatchObject({ sub: 'alice' });
      await eventually('the background refresh', 5_000, () => fetches === 1 || undefined);
      expect(fetches).toBe(1);
      // Forged kids while the keys are down: refused, and no request of their own.
      const forged = await newKey('forged-in-outage');
      for (let i = 0; i < 5; i++) {
        await expect(verifyIdToken(await idToken(forged, {}, { kid: `outage-${i}` }), jwks, checks)).rejects.toBeDefined();
      }
      expect(fetches).toBe(1);
      now += 1000;
      await verifyIdToken(await idToken(key), jwks, checks);
      await eventually('the next refresh', 5_000, () => fetches === 2 || undefined);
      down = false;
      now += 1000;
      await verifyIdToken(await idToken(key), jwks, checks);
      await eventually('the refresh that succeeds', 5_000, () => fetches === 3 || undefined);
      now += 1000;
      await verifyIdToken(await idToken(key), jwks, checks);
      expect(fetches).toBe(3);
    } finally {
      down = false;
    }
  });

  // Fails if, in createJwks, the unknown-kid path goes back to `await pending; return remote(...)`
  // when a fetch is under way (the `if (pending) { ... }` block and `return refetchFor(...)`
  // replaced by it): a kid rotated in while the periodic refresh was answering is refused.
  it('gives a new kid its own refetch when the refresh it waited for was answered before the rotation', async () => {
    const old = await newKey('before-rotation');
    const rotated = await newKey('after-rotation');
    published = [old.jwk];
    let now = 7_000_000;
    const jwks = createJwks(uri, { timeoutSeconds: 5, now: () => now });
    try {
      await verifyIdToken(await idToken(old), jwks, checks);
      fetches = 0;
      delayMs = 300;
      now += 11 * 60 * 1000;
      // Starts the periodic refresh, whose answer is the set of before the rotation.
      const known = verifyIdToken(await idToken(old), jwks, checks);
      await eventually('the refresh to be asked', 5_000, () => fetches === 1 || undefined);
      published = [rotated.jwk, old.jwk];
      await expect(verifyIdToken(await idToken(rotated), jwks, checks)).resolves.toMatchObject({ sub: 'alice' });
      await expect(known).resolves.toMatchObject({ sub: 'alice' });
      expect(fetches).toBe(2);
    } finally {
      delayMs = 0;
    }
  });

  // Fails if, in createJwks, `if (!pending && failedRecently(at)) throw lastFailure;`
  // is removed: with no set yet and the provider's keys down, every token was one fetch.
  it('with no set yet and the keys down, fetches at most once a second, and verifies once they answer', async () => {
    const key = await newKey('cold');
    published = [key.jwk];
    let now = 9_000_000;
    const jwks = createJwks(uri, { timeoutSeconds: 5, now: () => now });
    fetches = 0;
    down = true;
    try {
      for (let i = 0; i < 10; i++) await expect(verifyIdToken(await idToken(key), jwks, checks)).rejects.toBeDefined();
      expect(fetches).toBe(1);
      down = false;
      await expect(verifyIdToken(await idToken(key), jwks, checks)).rejects.toBeDefined();
      expect(fetches).toBe(1);
      now += 1000;
      await expect(verifyIdToken(await idToken(key), jwks, checks)).resolves.toMatchObject({ sub: 'alice' });
      expect(fetches).toBe(2);
    } finally {
      down = false;
    }
  });
});

describe('provider metadata', () => {
  it('refuses metadata whose issuer differs from the configured one: not ready, and sign-in answers 503', async () => {
    const reserved = await reserveServer();
    const provider = await startTestProvider({ clients: [gatewayClient(reserved.url)] });
    // Same server, reached under another name: its metadata names http://127.0.0.1:PORT.
    const configured = provider.issuer.replace('127.0.0.1', 'localhost');
    const gw = await startTestGateway(buildTestConfig({ issuer: configured, publicUrl: reserved.url }), reserved, { waitForProvider: false });
    try {
      // Wait for the event itself: the first discovery attempt has failed (bounded), not a guess at how long it takes.
      await eventually('a discovery_failed log line', 10_000, () => gw.logs.some((l) => l.includes('discovery_failed')), { intervalMs: 20 });
      const client = new BrowserClient();
      const ready = await client.get(`${gw.url}/readyz`);
      expect(ready.status).toBe(503);
      expect(ready.json()).toMatchObject({ down: ['provider'] });
      const login = await client.get(`${gw.url}/auth/login`, { headers: { accept: 'application/json' } });
      expect(login.status).toBe(503);
      expect(login.json()).toMatchObject({ error: 'provider_unavailable' });
      expect(gw.logs.some((l) => l.includes('discovery_failed'))).toBe(true);
    } finally {
      await gw.close();
      await provider.close();
    }
  });
});
