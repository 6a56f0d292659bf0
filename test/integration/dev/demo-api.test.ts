// The demo API as a resource server: it must accept exactly the tokens a careful API would, and
// say why it refuses the others in RFC 6750 terms, since the gateway's retry logic reads them.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, SignJWT, UnsecuredJWT, type CryptoKey, type JWK } from 'jose';
import { createDemoApi, type DemoApi } from '../../../src/dev/demo-api.js';

const AUDIENCE = 'https://api.demo.test';
const SCOPE = 'demo:read';

interface KeyServer {
  url: string;
  /** What the key server answers: its JWKS, a 500, or its discovery document's issuer. */
  state: { failing: boolean; issuer: string | undefined };
  close(): Promise<void>;
}

async function startKeyServer(jwks: { keys: JWK[] }): Promise<KeyServer> {
  const state: KeyServer['state'] = { failing: false, issuer: undefined };
  const server = http.createServer((req, res) => {
    if (state.failing) {
      res.writeHead(500).end();
      return;
    }
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const body =
      req.url === '/.well-known/openid-configuration'
        ? { issuer: state.issuer ?? base, jwks_uri: `${base}/jwks` }
        : req.url === '/jwks'
          ? jwks
          : undefined;
    if (!body) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    state,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

interface Key {
  kid: string;
  alg: 'RS256' | 'PS256' | 'ES256';
  privateKey: CryptoKey;
  publicJwk: JWK;
}

async function makeKey(kid: string, alg: Key['alg']): Promise<Key> {
  const { privateKey, publicKey } = await generateKeyPair(alg);
  return { kid, alg, privateKey, publicJwk: { ...(await exportJWK(publicKey)), kid, alg, use: 'sig' } };
}

let rsa: Key;
let ps: Key;
let ec: Key;
let keyServer: KeyServer;
let issuer: string;
let api: DemoApi;
let apiUrl: string;
let closeApi: () => Promise<void>;

async function token(
  overrides: { key?: Key; kid?: string; iss?: string; aud?: string | string[]; exp?: number | null; scope?: string | null; claims?: Record<string, unknown> } = {},
): Promise<string> {
  const key = overrides.key ?? rsa;
  const now = Math.floor(Date.now() / 1000);
  const claims: Record<string, unknown> = { client_id: 'demo-bff', ...overrides.claims };
  if (overrides.scope !== null) claims.scope = overrides.scope ?? `openid ${SCOPE}`;
  const jwt = new SignJWT(claims)
    .setProtectedHeader({ alg: key.alg, kid: overrides.kid ?? key.kid, typ: 'at+jwt' })
    .setIssuer(overrides.iss ?? issuer)
    .setAudience(overrides.aud ?? AUDIENCE)
    .setSubject('alice')
    .setIssuedAt(now - 5)
    .setJti(`jti-${Math.random()}`);
  if (overrides.exp !== null) jwt.setExpirationTime(overrides.exp ?? now + 300);
  return jwt.sign(key.privateKey);
}

interface Reply {
  status: number;
  headers: Headers;
  text: string;
  json: Record<string, unknown>;
}

async function call(path: string, authorization?: string, base = apiUrl): Promise<Reply> {
  const res = await fetch(`${base}${path}`, { headers: authorization === undefined ? {} : { authorization } });
  const text = await res.text();
  return { status: res.status, headers: res.headers, text, json: JSON.parse(text) as Record<string, unknown> };
}

beforeAll(async () => {
  [rsa, ps, ec] = await Promise.all([makeKey('rsa-1', 'RS256'), makeKey('ps-1', 'PS256'), makeKey('ec-1', 'ES256')]);
  keyServer = await startKeyServer({ keys: [rsa.publicJwk, ps.publicJwk, ec.publicJwk] });
  issuer = keyServer.url;
  api = createDemoApi({ issuer, audience: AUDIENCE, requiredScope: SCOPE, jwksUri: `${keyServer.url}/jwks` });
  const listening = await api.listen(0);
  apiUrl = `http://127.0.0.1:${listening.port}`;
  closeApi = listening.close;
});

afterAll(async () => {
  await closeApi?.();
  await keyServer?.close();
});

describe('demo API', () => {
  it('answers /healthz without a token', async () => {
    const reply = await call('/healthz');
    expect(reply.status).toBe(200);
    expect(reply.headers.get('cache-control')).toBe('no-store');
  });

  it('answers a valid token with what it saw, and never the token', async () => {
    const jwt = await token();
    const reply = await call('/api/hello', `Bearer ${jwt}`);
    expect(reply.status).toBe(200);
    expect(reply.headers.get('cache-control')).toBe('no-store');
    expect(reply.headers.get('content-type')).toMatch(/^application\/json/);
    expect(reply.json).toMatchObject({
      message: 'Hello from the demo API',
      subject: 'alice',
      scopes: ['openid', SCOPE],
      audience: AUDIENCE,
      clientId: 'demo-bff',
      path: '/api/hello',
    });
    expect(new Date(reply.json.expiresAt as string).getTime()).toBeGreaterThan(Date.now());
    expect(reply.text).not.toContain(jwt);
    expect(reply.text).not.toContain(jwt.split('.')[2]);
  });

  it.each([
    ['PS256', () => ps],
    ['ES256', () => ec],
  ])('accepts %s signatures', async (_alg, key) => {
    const reply = await call('/api/whoami', `Bearer ${await token({ key: key() })}`);
    expect(reply.status).toBe(200);
    expect(reply.json.path).toBe('/api/whoami');
  });

  it('takes the client from azp when there is no client_id, and an audience list', async () => {
    const jwt = await token({ claims: { client_id: undefined, azp: 'other-client' }, aud: [AUDIENCE, 'https://x.test'] });
    const reply = await call('/api/hello', `Bearer ${jwt}`);
    expect(reply.status).toBe(200);
    expect(reply.json.clientId).toBe('other-client');
    expect(reply.json.audience).toEqual([AUDIENCE, 'https://x.test']);
  });

  it.each([
    ['no Authorization header', undefined],
    ['an empty Authorization header', ''],
    ['another scheme', 'Basic YWxpY2U6c2VjcmV0'],
  ])('answers %s with a challenge but no error code (RFC 6750 §3.1)', async (_name, header) => {
    const reply = await call('/api/hello', header);
    expect(reply.status).toBe(401);
    expect(reply.headers.get('www-authenticate')).toBe('Bearer realm="demo-api"');
    expect(reply.json.error).toBe('invalid_token');
    expect(typeof reply.json.error_description).toBe('string');
  });

  const now = () => Math.floor(Date.now() / 1000);
  const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
  const bad: [string, () => Promise<string>][] = [
    ['an expired token', () => token({ exp: now() - 3600 })],
    ['a token without exp', () => token({ exp: null })],
    ['another audience', () => token({ aud: 'https://elsewhere.test' })],
    ['another issuer', () => token({ iss: 'https://evil.test' })],
    [
      'a bad signature',
      async () => {
        // Signed by a stranger's key under a kid the API knows.
        const stranger = await makeKey('rsa-1', 'RS256');
        return token({ key: stranger });
      },
    ],
    [
      'a tampered payload',
      async () => {
        const [h, , s] = (await token()).split('.');
        return `${h}.${b64({ iss: issuer, aud: AUDIENCE, sub: 'mallory', exp: now() + 300, scope: SCOPE })}.${s}`;
      },
    ],
    [
      'alg none',
      async () =>
        new UnsecuredJWT({ scope: SCOPE, sub: 'mallory' }).setIssuer(issuer).setAudience(AUDIENCE).setExpirationTime('5m').encode(),
    ],
    [
      'alg HS256 keyed with the public key',
      async () => {
        const secret = new TextEncoder().encode(JSON.stringify(rsa.publicJwk));
        return new SignJWT({ scope: SCOPE })
          .setProtectedHeader({ alg: 'HS256', kid: rsa.kid })
          .setIssuer(issuer)
          .setAudience(AUDIENCE)
          .setExpirationTime('5m')
          .sign(secret);
      },
    ],
    ['an unknown kid', () => token({ kid: 'no-such-key' })],
    ['garbage', async () => 'not.a.jwt'],
  ];

  it.each(bad)('refuses %s with 401 invalid_token', async (_name, make) => {
    const jwt = await make();
    const reply = await call('/api/hello', `Bearer ${jwt}`);
    expect(reply.status).toBe(401);
    expect(reply.headers.get('www-authenticate')).toMatch(/^Bearer realm="demo-api", error="invalid_token"/);
    expect(reply.headers.get('cache-control')).toBe('no-store');
    expect(reply.json.error).toBe('invalid_token');
    expect(typeof reply.json.error_description).toBe('string');
    expect(reply.text).not.toContain(jwt);
    expect(reply.headers.get('www-authenticate')).not.toContain(jwt);
  });

  it('refuses a malformed Bearer header with 401 invalid_token', async () => {
    const reply = await call('/api/hello', 'Bearer two tokens');
    expect(reply.status).toBe(401);
    expect(reply.headers.get('www-authenticate')).toMatch(/error="invalid_token"/);
  });

  it('says why: expiry and audience are named in error_description', async () => {
    const expired = await call('/api/hello', `Bearer ${await token({ exp: now() - 3600 })}`);
    expect(expired.json.error_description).toMatch(/expired/);
    const aud = await call('/api/hello', `Bearer ${await token({ aud: 'https://elsewhere.test' })}`);
    expect(aud.json.error_description).toMatch(/audience/);
  });

  it('refuses a token without the required scope with 403 insufficient_scope', async () => {
    for (const scope of ['openid profile', null]) {
      const jwt = await token({ scope });
      const reply = await call('/api/hello', `Bearer ${jwt}`);
      expect(reply.status).toBe(403);
      expect(reply.headers.get('www-authenticate')).toMatch(
        /^Bearer realm="demo-api", error="insufficient_scope", scope="demo:read"/,
      );
      expect(reply.json.error).toBe('insufficient_scope');
      expect(reply.text).not.toContain(jwt);
    }
  });

  it('accepts the scope as an scp list too', async () => {
    const reply = await call('/api/hello', `Bearer ${await token({ scope: null, claims: { scp: [SCOPE] } })}`);
    expect(reply.status).toBe(200);
    expect(reply.json.scopes).toEqual([SCOPE]);
  });

  it('answers 404 outside /api/ (and /apix is not /api)', async () => {
    const jwt = await token();
    expect((await call('/apix', `Bearer ${jwt}`)).status).toBe(404);
    expect((await call('/other', `Bearer ${jwt}`)).status).toBe(404);
  });

  it('discovers the key set from the issuer when no jwksUri is given', async () => {
    const discovering = createDemoApi({ issuer, audience: AUDIENCE, requiredScope: SCOPE });
    const { port, close } = await discovering.listen(0);
    try {
      const reply = await call('/api/hello', `Bearer ${await token()}`, `http://127.0.0.1:${port}`);
      expect(reply.status).toBe(200);
    } finally {
      await close();
    }
  });

  it('answers 503 when the keys cannot be fetched, and recovers without a restart', async () => {
    const fresh = createDemoApi({ issuer, audience: AUDIENCE, requiredScope: SCOPE });
    const { port, close } = await fresh.listen(0);
    const base = `http://127.0.0.1:${port}`;
    try {
      keyServer.state.failing = true;
      const down = await call('/api/hello', `Bearer ${await token()}`, base);
      expect(down.status).toBe(503);
      expect(down.headers.get('cache-control')).toBe('no-store');
      expect(down.json.error).toBe('temporarily_unavailable');

      keyServer.state.failing = false;
      const back = await call('/api/hello', `Bearer ${await token()}`, base);
      expect(back.status).toBe(200);
    } finally {
      keyServer.state.failing = false;
      await close();
    }
  });

  it('answers 503 when the JWKS endpoint itself fails', async () => {
    const fresh = createDemoApi({ issuer, audience: AUDIENCE, requiredScope: SCOPE, jwksUri: 'http://127.0.0.1:1/jwks' });
    const { port, close } = await fresh.listen(0);
    try {
      const reply = await call('/api/hello', `Bearer ${await token()}`, `http://127.0.0.1:${port}`);
      expect(reply.status).toBe(503);
    } finally {
      await close();
    }
  });

  it('refuses keys from discovery metadata that names another issuer', async () => {
    keyServer.state.issuer = 'https://impostor.test';
    const fresh = createDemoApi({ issuer, audience: AUDIENCE, requiredScope: SCOPE });
    const { port, close } = await fresh.listen(0);
    try {
      const reply = await call('/api/hello', `Bearer ${await token()}`, `http://127.0.0.1:${port}`);
      expect(reply.status).toBe(503);
    } finally {
      keyServer.state.issuer = undefined;
      await close();
    }
  });

  it('exposes a plain request handler for an existing server', async () => {
    const server = http.createServer(api.handler);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const reply = await call('/api/hello', `Bearer ${await token()}`, `http://127.0.0.1:${(server.address() as AddressInfo).port}`);
      expect(reply.status).toBe(200);
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
