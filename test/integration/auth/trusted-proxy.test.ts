/**
 * server.trustProxy (SPEC §2, §4): `true` means exactly one trusted hop, so the client address
 * (login rate limit, logs) is the one that hop appended to X-Forwarded-For, never one the
 * browser wrote further left; `N` trusts N hops; a CIDR list trusts the hops in it.
 *
 * The test client plays the load balancer: it connects from 127.0.0.1 (the socket peer the
 * gateway sees) and sends `X-Forwarded-For: <what the browser wrote>, <the real client>`,
 * exactly what a load balancer appending `$remote_addr` forwards.
 *
 * Mutation check: in src/proxy/trust.ts make `true` trust every hop
 * (`if (setting === true) return () => true;`, Express's meaning of `true`, which 0.3.0 used):
 * the flood gets every spoofed attempt through and the tests fail.
 */
import { BrowserClient } from '../../support/browser-client.js';
import { startStack, type Stack } from '../../support/stack.js';
import { startUpstream, type Upstream } from '../../support/upstream.js';

const LIMIT = 5;
const csrf = { 'x-csrf': '1' };
let upstream: Upstream;

beforeAll(async () => {
  upstream = await startUpstream();
});
afterAll(async () => {
  await upstream?.close();
});

async function withStack(trustProxy: boolean | number | string[], run: (stack: Stack) => Promise<void>): Promise<void> {
  const stack = await startStack({
    config: {
      server: { trustProxy },
      rateLimit: { loginPerMinute: LIMIT },
      routes: [{ path: '/api', target: upstream.url, auth: 'none' }],
    },
  });
  try {
    await run(stack);
  } finally {
    await stack.close();
  }
}

/** Login starts accepted (302) out of `attempts`, each with a fresh spoofed left-most entry. */
async function flood(stack: Stack, realClient: string, attempts: number): Promise<number> {
  let accepted = 0;
  for (let i = 0; i < attempts; i++) {
    const res = await new BrowserClient().get(`${stack.gateway.url}/auth/login`, {
      headers: { accept: 'application/json', 'x-forwarded-for': `198.51.100.${i + 1}, ${realClient}` },
    });
    expect([302, 429]).toContain(res.status);
    if (res.status === 302) accepted += 1;
  }
  return accepted;
}

/** The X-Forwarded-For the upstream received for one proxied call with `xff`. */
async function forwardedFor(stack: Stack, xff: string): Promise<unknown> {
  upstream.reset();
  const res = await new BrowserClient().get(`${stack.gateway.url}/api/echo`, { headers: { ...csrf, 'x-forwarded-for': xff } });
  expect(res.status).toBe(200);
  return upstream.requests[0]?.headers['x-forwarded-for'];
}

describe('trustProxy: true (one hop)', () => {
  it('keys the login rate limit on the address the hop appended: a spoofed X-Forwarded-For flood is limited per real client', async () => {
    await withStack(true, async (stack) => {
      const first = await flood(stack, '203.0.113.10', 20);
      const second = await flood(stack, '203.0.113.20', 20);
      console.log(`spoofed flood, 20 attempts each: ${first} and ${second} accepted (limit ${LIMIT}/min)`);
      // A fixed one-minute window: a run that straddles a minute boundary lets two windows' worth through.
      for (const accepted of [first, second]) {
        expect(accepted).toBeGreaterThanOrEqual(LIMIT);
        expect(accepted).toBeLessThanOrEqual(2 * LIMIT);
      }
    });
  });

  it('keeps and extends the trusted hop’s chain towards the upstream', async () => {
    await withStack(true, async (stack) => {
      expect(await forwardedFor(stack, '198.51.100.7, 203.0.113.10')).toBe('198.51.100.7, 203.0.113.10, 127.0.0.1');
    });
  });

  // Fails if, in src/proxy/headers.ts forwardingHeaders, the FORWARDING drop loop runs only for
  // an untrusted peer (as before): the browser's headers pass the load balancer and the gateway.
  it('sets the origin from publicUrl and drops the other forwarding headers a browser wrote through the hop', async () => {
    await withStack(true, async (stack) => {
      upstream.reset();
      const res = await new BrowserClient().get(`${stack.gateway.url}/api/echo`, {
        headers: {
          ...csrf,
          'x-forwarded-for': '203.0.113.10',
          'x-forwarded-host': 'evil.example',
          'x-forwarded-proto': 'https',
          'x-forwarded-port': '8443',
          'x-forwarded-prefix': '/admin',
          forwarded: 'for=6.6.6.6;host=evil.example',
          'x-real-ip': '6.6.6.6',
        },
      });
      expect(res.status).toBe(200);
      const seen = upstream.requests[0]?.headers ?? {};
      expect(seen['x-forwarded-for']).toBe('203.0.113.10, 127.0.0.1');
      expect(seen['x-forwarded-host']).toBe(new URL(stack.gateway.url).host);
      expect(seen['x-forwarded-proto']).toBe('http');
      for (const dropped of ['x-forwarded-port', 'x-forwarded-prefix', 'forwarded', 'x-real-ip']) expect(seen[dropped]).toBeUndefined();
    });
  });
});

describe('trustProxy: N hops and CIDR lists', () => {
  it('with 2 hops, the client is the second entry from the right', async () => {
    await withStack(2, async (stack) => {
      // Both spoofed entries vary; the entry two hops out is the same real client each time.
      let accepted = 0;
      for (let i = 0; i < 20; i++) {
        const res = await new BrowserClient().get(`${stack.gateway.url}/auth/login`, {
          headers: { accept: 'application/json', 'x-forwarded-for': `198.51.100.${i + 1}, 203.0.113.30, 10.0.0.${i + 1}` },
        });
        if (res.status === 302) accepted += 1;
      }
      expect(accepted).toBeGreaterThanOrEqual(LIMIT);
      expect(accepted).toBeLessThanOrEqual(2 * LIMIT);
    });
  });

  it('trusts only peers inside the listed ranges: a browser outside them has its forwarding headers replaced', async () => {
    await withStack(['10.0.0.0/8'], async (stack) => {
      // The socket peer (127.0.0.1) is not a listed proxy: its X-Forwarded-For is the browser's own word.
      expect(await forwardedFor(stack, '203.0.113.99')).toBe('127.0.0.1');
      const accepted = await flood(stack, '203.0.113.40', 12);
      expect(accepted).toBeLessThanOrEqual(2 * LIMIT);
    });
    await withStack(['127.0.0.0/8'], async (stack) => {
      expect(await forwardedFor(stack, '203.0.113.99')).toBe('203.0.113.99, 127.0.0.1');
    });
  });
});
