/**
 * TLS to Redis is what the config says, however the scheme is spelled and in every mode: the
 * first bytes createRedis sends to a listener on 127.0.0.1 are a TLS ClientHello (0x16 0x03) for
 * `REDISS://`, `rediss://` and rediss:// cluster and sentinel nodes, never `*2\r\n$4\r\nauth`
 * with the password in cleartext. The listener is a plain socket: no handshake is answered.
 *
 * Mutations that fail it (checked by hand), in src/redis/client.ts:
 *  - createRedis, `isTlsNode(url) ? { ...common, tls: tlsFor(url) } : common` → `common`: REDISS:// sends AUTH in cleartext.
 *  - cluster `...(tls ? { tls: {} } : {})` removed: the cluster node gets AUTH in cleartext.
 *  - sentinel `...(tls ? { sentinelTLS: {}, ... } : {})` removed: the sentinel gets plaintext.
 *  - sentinel `enableTLSForSentinelMode: true` dropped: the master would get plaintext.
 */
import { createServer, type AddressInfo, type Server } from 'node:net';
import { Redis } from 'ioredis';
import { createRedis, disconnectRedis } from '../../../src/redis/client.js';
import type { RedisConfig } from '../../../src/config/schema.js';

const TLS_HANDSHAKE = [0x16, 0x03];
const servers: Server[] = [];

afterAll(() => servers.forEach((s) => s.close()));

/** A listener that resolves with the first 16 bytes of its first connection (or all it got). */
async function listener(): Promise<{ port: number; firstBytes: Promise<Buffer> }> {
  let got: (b: Buffer) => void = () => undefined;
  const firstBytes = new Promise<Buffer>((resolve) => (got = resolve));
  const server = createServer((socket) => {
    let received = Buffer.alloc(0);
    const done = () => {
      got(received);
      socket.destroy();
    };
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      if (received.length >= 16) done();
    });
    socket.on('end', done);
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { port: (server.address() as AddressInfo).port, firstBytes };
}

async function firstBytesSent(redis: (port: number) => Partial<RedisConfig>): Promise<Buffer> {
  const { port, firstBytes } = await listener();
  const cfg = { keyPrefix: 'bff:', commandTimeoutMs: 1000, password: 'cleartext-if-you-can-read-me', ...redis(port) } as RedisConfig;
  const client = createRedis(cfg);
  client.connect().catch(() => undefined);
  try {
    return await firstBytes;
  } finally {
    disconnectRedis(client);
  }
}

describe('createRedis speaks TLS when the config says rediss://', () => {
  it('sends AUTH in cleartext to redis:// (the listener sees what a client sends)', async () => {
    const bytes = await firstBytesSent((port) => ({ url: `redis://127.0.0.1:${port}` }));
    expect(bytes.toString('latin1')).toMatch(/^\*2\r\n\$4\r\nauth\r\n/i);
  });

  it.each([
    ['a single URL, lowercase', (port: number) => ({ url: `rediss://127.0.0.1:${port}` })],
    ['a single URL, uppercase scheme', (port: number) => ({ url: `REDISS://127.0.0.1:${port}` })],
    ['cluster nodes', (port: number) => ({ cluster: { nodes: [`rediss://127.0.0.1:${port}`] } })],
    ['sentinel nodes', (port: number) => ({ sentinel: { name: 'mymaster', nodes: [`rediss://127.0.0.1:${port}`] } })],
  ])('opens with a TLS ClientHello for %s', async (_, redis) => {
    const bytes = await firstBytesSent(redis);
    expect([...bytes.subarray(0, 2)]).toEqual(TLS_HANDSHAKE);
  });

  it('names a single host in the ClientHello (SNI), as its certificate is checked against it', async () => {
    const bytes = await firstBytesSent((port) => ({ url: `REDISS://localhost:${port}` }));
    expect([...bytes.subarray(0, 2)]).toEqual(TLS_HANDSHAKE);
    expect(bytes.includes('localhost')).toBe(true);
  });

  it('also speaks TLS to the master that rediss:// sentinels name', () => {
    const client = createRedis({ keyPrefix: 'bff:', commandTimeoutMs: 1000, sentinel: { name: 'm', nodes: ['rediss://127.0.0.1:1'] } } as RedisConfig);
    expect(client).toBeInstanceOf(Redis);
    const options = (client as Redis).options;
    expect(options.enableTLSForSentinelMode).toBe(true);
    expect(options.tls).toBeDefined();
    disconnectRedis(client);
  });
});
