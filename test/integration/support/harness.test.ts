// Proves the test harness itself: if these fail, every other integration failure is suspect.
import { spawnSync } from 'node:child_process';
import http from 'node:http';
import type { Socket } from 'node:net';
import { Cluster, Redis } from 'ioredis';
import WebSocket from 'ws';
import {
  pingOnce,
  redisUrlForTests,
  startRedisCluster,
  startRedisServer,
  type RedisServer,
} from '../../support/redis-server.js';
import { incomingHeaders, rawExchange } from '../../support/raw-http.js';
import { eventually } from '../../support/wait.js';
import { startUpstream, type Upstream } from '../../support/upstream.js';

const MiB = 1024 * 1024;

/** redis-server titles itself `redis-server 127.0.0.1:PORT`, which identifies our children. */
function redisProcessesOn(port: number): string[] {
  const ps = spawnSync('ps', ['-eo', 'pid,args'], { encoding: 'utf8', timeout: 5_000 });
  return ps.stdout.split('\n').filter((l) => /redis-server/.test(l) && l.includes(`:${port}`));
}

interface Reply {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
  socket?: Socket;
}

/** A request through the suite's raw client; `keepOpen` leaves the connection open (keep-alive). */
async function request(
  url: string,
  opts: { method?: string; headers?: Record<string, string | string[]>; body?: Buffer; keepOpen?: boolean } = {},
): Promise<Reply> {
  const target = new URL(url);
  const headers = Object.entries(opts.headers ?? {}).flatMap(([name, value]) => (Array.isArray(value) ? value : [value]).map((v): [string, string] => [name, v]));
  const res = await rawExchange(target.origin, {
    target: `${target.pathname}${target.search}`,
    headers,
    ...(opts.method ? { method: opts.method } : {}),
    ...(opts.body ? { body: opts.body } : {}),
    ...(opts.keepOpen ? { keepOpen: true } : {}),
  });
  return { status: res.status, headers: incomingHeaders(res), body: res.body, ...(res.socket ? { socket: res.socket } : {}) };
}

function errorCode(p: Promise<unknown>): Promise<string | undefined> {
  return p.then(
    () => undefined,
    (err: NodeJS.ErrnoException) => err.code,
  );
}

describe('redis-server harness', () => {
  let server: RedisServer;
  let client: Redis | undefined;

  beforeAll(async () => {
    server = await startRedisServer();
  }, 10_000);

  afterEach(() => {
    client?.disconnect();
    client = undefined;
  });

  afterAll(async () => {
    await server.close();
    expect(redisProcessesOn(server.port)).toEqual([]);
  }, 10_000);

  test('global setup provides a shared Redis', async () => {
    const url = new URL(redisUrlForTests());
    expect(await pingOnce(Number(url.port), 1_000, url.hostname)).toBe(true);
  });

  test('pause stalls the server, resume brings it back, stop/start restarts it empty on the same port', async () => {
    // Only the probe of a stalled server needs a short timeout; everything else may take its
    // time on a busy machine (a 300 ms bound on every command failed once under load).
    client = new Redis(server.url, { commandTimeout: 5_000, maxRetriesPerRequest: 1 });
    client.on('error', () => undefined);
    const probe = new Redis(server.url, { commandTimeout: 300, maxRetriesPerRequest: 1 });
    probe.on('error', () => undefined);
    await client.set('harness:k', 'v');
    expect(await probe.ping()).toBe('PONG');

    server.pause();
    const t0 = Date.now();
    await expect(probe.ping()).rejects.toThrow(/timed out/i);
    expect(Date.now() - t0).toBeLessThan(2_000);
    expect(await pingOnce(server.port, 300)).toBe(false);
    probe.disconnect();

    server.resume();
    expect(await client.ping()).toBe('PONG');
    expect(await client.get('harness:k')).toBe('v');

    await server.stop();
    expect(await pingOnce(server.port, 300)).toBe(false);
    expect(redisProcessesOn(server.port)).toEqual([]);

    await server.start();
    expect(await pingOnce(server.port)).toBe(true);
    expect(await server.keys('harness:*')).toEqual([]);
  }, 20_000);

  test('stop works on a paused server', async () => {
    server.pause();
    await server.stop();
    expect(redisProcessesOn(server.port)).toEqual([]);
    await server.start();
    expect(await pingOnce(server.port)).toBe(true);
  }, 15_000);

  test('commandStats counts commands and resetStats clears them', async () => {
    client = new Redis(server.url, { maxRetriesPerRequest: 1 });
    await server.resetStats();
    await client.get('stats:a');
    await client.get('stats:b');
    await client.set('stats:c', '1');
    const stats = await server.commandStats();
    expect(stats.get).toBe(2);
    expect(stats.set).toBe(1);
    await server.resetStats();
    expect((await server.commandStats()).get).toBeUndefined();
  });

  test('keys and dumpValues see every key type', async () => {
    client = new Redis(server.url, { maxRetriesPerRequest: 1 });
    await client.set('leak:string', 'secret-in-string');
    await client.hset('leak:hash', 'field-name', 'secret-in-hash');
    await client.sadd('leak:set', 'secret-in-set');
    await client.rpush('leak:list', 'secret-in-list');
    await client.zadd('leak:zset', 1, 'secret-in-zset');
    await client.set('other:string', 'not-matched');

    expect(await server.keys('leak:*')).toEqual(['leak:hash', 'leak:list', 'leak:set', 'leak:string', 'leak:zset']);
    const values = await server.dumpValues('leak:*');
    expect(values).toEqual(
      expect.arrayContaining(['secret-in-string', 'field-name', 'secret-in-hash', 'secret-in-set', 'secret-in-list', 'secret-in-zset']),
    );
    expect(values).not.toContain('not-matched');
    expect(await server.dumpValues()).toContain('not-matched');
  });

  test('close is idempotent and admin calls on a closed server fail fast', async () => {
    const other = await startRedisServer();
    await other.close();
    await other.close();
    expect(redisProcessesOn(other.port)).toEqual([]);
    await expect(other.commandStats()).rejects.toThrow();
    await expect(other.start()).rejects.toThrow(/closed/);
  }, 15_000);
});

describe('redis cluster harness', () => {
  test('creates a working 3-master cluster and closes without leftovers', async () => {
    const cluster = await startRedisCluster();
    const ports = cluster.nodes.map((n) => Number(new URL(n).port));
    let client: Cluster | undefined;
    try {
      expect(cluster.nodes).toHaveLength(3);
      client = new Cluster(
        ports.map((port) => ({ host: '127.0.0.1', port })),
        { redisOptions: { commandTimeout: 2_000 }, clusterRetryStrategy: () => null },
      );
      const keys = Array.from({ length: 30 }, (_, i) => `harness:cluster:${i}`);
      for (const k of keys) await client.set(k, `v-${k}`);
      for (const k of keys) expect(await client.get(k)).toBe(`v-${k}`);

      // Every master must own some of the keys, or the test proves nothing about redirections.
      const perNode = await Promise.all(
        ports.map(async (port) => {
          const node = new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 1 });
          try {
            return await node.dbsize();
          } finally {
            node.disconnect();
          }
        }),
      );
      for (const n of perNode) expect(n).toBeGreaterThan(0);
      expect(perNode.reduce((a, b) => a + b, 0)).toBe(keys.length);
    } finally {
      client?.disconnect();
      await cluster.close();
    }
    await cluster.close();
    for (const port of ports) {
      expect(redisProcessesOn(port)).toEqual([]);
      expect(await pingOnce(port, 300)).toBe(false);
    }
  }, 60_000);
});

describe('upstream harness', () => {
  let upstream: Upstream;

  beforeAll(async () => {
    upstream = await startUpstream({ websocket: true });
  });

  beforeEach(() => {
    upstream.reset();
    upstream.setHandler(undefined);
  });

  afterAll(async () => {
    await upstream.close();
  });

  test('records headers and echoes under any path prefix', async () => {
    const reply = await request(`${upstream.url}/api/v1/echo?x=1`, {
      headers: { 'x-test': 'hello', 'x-dup': ['a', 'b'] },
    });
    expect(reply.status).toBe(200);
    const echoed = JSON.parse(reply.body.toString()) as { method: string; url: string; headers: Record<string, string> };
    expect(echoed).toMatchObject({ method: 'GET', url: '/api/v1/echo?x=1', headers: { 'x-test': 'hello' } });

    expect(upstream.requests).toHaveLength(1);
    const rec = upstream.requests[0]!;
    expect(rec.headers['x-test']).toBe('hello');
    expect(rec.rawHeaders.filter((h) => h.toLowerCase() === 'x-dup')).toHaveLength(2);
  });

  test('status routes, 401 challenge and set-cookie', async () => {
    const r401 = await request(`${upstream.url}/x/status/401`);
    expect(r401.status).toBe(401);
    expect(r401.headers['www-authenticate']).toBe('Bearer error="invalid_token"');
    expect((await request(`${upstream.url}/status/503`)).status).toBe(503);
    const cookie = await request(`${upstream.url}/set-cookie`);
    expect(cookie.headers['set-cookie']).toEqual(['upstream_cookie=1; Path=/; HttpOnly']);
  });

  test('streams a 5 MiB download', async () => {
    const reply = await request(`${upstream.url}/files/download?bytes=${5 * MiB}`);
    expect(reply.status).toBe(200);
    expect(reply.headers['content-length']).toBe(String(5 * MiB));
    expect(reply.body.length).toBe(5 * MiB);
  }, 15_000);

  test('streams a 5 MiB chunked upload and counts it', async () => {
    const reply = await new Promise<Reply>((resolve, reject) => {
      const req = http.request(`${upstream.url}/files/upload`, { method: 'POST', timeout: 10_000 });
      req.once('error', reject);
      req.once('timeout', () => req.destroy(new Error('upload timeout')));
      req.once('response', (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.once('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
      });
      const chunk = Buffer.alloc(64 * 1024, 'u');
      let sent = 0;
      const pump = (): void => {
        while (sent < 5 * MiB) {
          sent += chunk.length;
          if (!req.write(chunk)) return void req.once('drain', pump);
        }
        req.end();
      };
      pump();
    });
    expect(reply.status).toBe(200);
    expect(JSON.parse(reply.body.toString())).toEqual({ bytes: 5 * MiB });
    expect(upstream.requests[0]).toMatchObject({ method: 'POST', bodyBytes: 5 * MiB });
    expect(upstream.requests[0]!.headers['transfer-encoding']).toBe('chunked');
  }, 15_000);

  test('SSE delivers the first event before the response ends', async () => {
    const res = await new Promise<http.IncomingMessage>((resolve, reject) => {
      const req = http.get(`${upstream.url}/events/sse`, resolve);
      req.once('error', reject);
    });
    expect(res.headers['content-type']).toBe('text/event-stream');
    let text = '';
    let ended = false;
    res.setEncoding('utf8');
    // One listener for the whole stream: removing it would not pause the stream, and chunks
    // would be dropped.
    const firstEvent = new Promise<void>((resolve) => {
      res.on('data', (c: string) => {
        text += c;
        if (text.includes('data: first\n\n')) resolve();
      });
    });
    const end = new Promise<void>((resolve) =>
      res.once('end', () => {
        ended = true;
        resolve();
      }),
    );
    await firstEvent;
    expect(ended).toBe(false);

    // The stream is still open when the release arrives: the upstream counts it among the open
    // ones (an event, where a pause of a guessed length would only sample the wall clock).
    const release = await request(`${upstream.url}/events/sse-release`, { method: 'POST' });
    expect(JSON.parse(release.body.toString())).toEqual({ released: 1 });
    await end;
    expect(text).toBe('data: first\n\ndata: last\n\n');
  }, 10_000);

  test('slow answers after the delay; a custom handler overrides the routes', async () => {
    const t0 = Date.now();
    const slow = await request(`${upstream.url}/slow?ms=300`);
    expect(slow.status).toBe(200);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(290);

    upstream.setHandler((req, res) => {
      let n = 0;
      req.on('data', (c: Buffer) => (n += c.length));
      req.on('end', () => res.writeHead(418, { 'x-seen': String(n) }).end());
    });
    const custom = await request(`${upstream.url}/echo`, { method: 'PUT', body: Buffer.from('12345') });
    expect(custom.status).toBe(418);
    expect(custom.headers['x-seen']).toBe('5');
    expect(upstream.requests.at(-1)).toMatchObject({ method: 'PUT', url: '/echo', bodyBytes: 5 });
  });

  test('WebSocket upgrades are recorded and echoed', async () => {
    const ws = new WebSocket(`${upstream.url.replace('http', 'ws')}/api/ws?room=1`, { headers: { authorization: 'Bearer t' } });
    try {
      await new Promise<void>((resolve, reject) => {
        ws.once('open', () => resolve());
        ws.once('error', reject);
      });
      const echoed = new Promise<string>((resolve) => ws.once('message', (d: Buffer) => resolve(d.toString())));
      ws.send('ping-text');
      expect(await echoed).toBe('ping-text');
      expect(upstream.wsConnections).toHaveLength(1);
      expect(upstream.wsConnections[0]).toMatchObject({ url: '/api/ws?room=1', headers: { authorization: 'Bearer t' } });
    } finally {
      ws.terminate();
    }
  });

  test('stop refuses connections (even with keep-alive sockets open), start accepts them again', async () => {
    let keptAlive: Socket | undefined;
    try {
      const first = await request(`${upstream.url}/echo`, { keepOpen: true });
      keptAlive = first.socket;
      expect(first.status).toBe(200);
      expect(keptAlive?.destroyed).toBe(false);
      const port = upstream.port;
      // A pending slow request and an open SSE stream must not keep stop() waiting.
      const pending = errorCode(request(`${upstream.url}/slow?ms=20000`));
      await eventually('the slow request recorded', 2_000, () => upstream.requests.some((r) => r.url.startsWith('/slow')), { intervalMs: 20 }).catch(() => undefined);
      expect(upstream.requests.some((r) => r.url.startsWith('/slow'))).toBe(true);
      const t0 = Date.now();
      await upstream.stop();
      expect(Date.now() - t0).toBeLessThan(2_000);
      expect(await pending).toBe('ECONNRESET');
      expect(await errorCode(request(`${upstream.url}/echo`))).toBe('ECONNREFUSED');

      await upstream.start();
      expect(upstream.port).toBe(port);
      expect((await request(`${upstream.url}/echo`)).status).toBe(200);
    } finally {
      keptAlive?.destroy();
    }
  }, 15_000);

  test('an upstream without websocket records and refuses upgrades', async () => {
    const plain = await startUpstream();
    try {
      const ws = new WebSocket(`${plain.url.replace('http', 'ws')}/ws`);
      const failure = await new Promise<string>((resolve) => {
        ws.once('unexpected-response', (_req, res) => resolve(`status ${res.statusCode}`));
        ws.once('error', (err) => resolve(err.message));
      });
      ws.terminate();
      expect(failure).toMatch(/400/);
      expect(plain.requests).toHaveLength(1);
      expect(plain.requests[0]!.headers.upgrade).toBe('websocket');
    } finally {
      await plain.close();
      await plain.close();
    }
  });
});
