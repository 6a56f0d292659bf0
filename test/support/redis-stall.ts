/**
 * A TCP pass-through in front of a real redis-server that can stall one command on the wire: what
 * a client sends is held from the first chunk containing a marker (e.g. a Lua script's text)
 * until the test releases it, as a slow network or a busy server would. The command then reaches
 * Redis unchanged. A test can run something else, against the same Redis through another
 * connection, exactly while that command waits, so a race window is staged deterministically.
 * Answers from Redis always pass straight through.
 *
 *   const stall = await startRedisStall(redisUrlForTests());
 *   const held = stall.holdAt("local val = ARGV[1]");   // the next session record write
 *   ... start the request; await held; do the other thing; stall.release(); ...
 */
import net from 'node:net';
import { listenOnLoopback } from './listen.js';

export interface RedisStall {
  /** redis://127.0.0.1:<port>, forwarding to the target. */
  url: string;
  /**
   * Holds the next chunk, on any connection, whose bytes (with the tail of the previous chunk)
   * contain `marker` (or any one of several: one command whichever of its forms is sent), and
   * everything after it on that connection, until release(). Resolves once something is held.
   */
  holdAt(marker: string | readonly string[]): Promise<void>;
  /** Sends what is held, in order, and passes everything through again. */
  release(): void;
  close(): Promise<void>;
}

interface Link {
  client: net.Socket;
  redis: net.Socket;
  /** Chunks held back, in order; undefined while passing through. */
  held: Buffer[] | undefined;
  tail: Buffer;
}

export async function startRedisStall(targetUrl: string): Promise<RedisStall> {
  const target = new URL(targetUrl);
  const links = new Set<Link>();
  let armed: { markers: Buffer[]; longest: number; resolve: () => void } | undefined;

  const server = net.createServer((client) => {
    const redis = net.connect(Number(target.port || 6379), target.hostname);
    const link: Link = { client, redis, held: undefined, tail: Buffer.alloc(0) };
    links.add(link);
    client.on('data', (chunk: Buffer) => {
      if (link.held) return void link.held.push(chunk);
      const seen = Buffer.concat([link.tail, chunk]);
      if (armed?.markers.some((marker) => seen.includes(marker))) {
        link.held = [chunk];
        const { resolve } = armed;
        armed = undefined;
        return resolve();
      }
      link.tail = armed ? seen.subarray(Math.max(0, seen.length - armed.longest + 1)) : Buffer.alloc(0);
      redis.write(chunk);
    });
    redis.pipe(client);
    const drop = () => {
      links.delete(link);
      client.destroy();
      redis.destroy();
    };
    client.on('close', drop).on('error', drop);
    redis.on('close', drop).on('error', drop);
  });
  const port = await listenOnLoopback(server);

  return {
    url: `redis://127.0.0.1:${port}`,
    holdAt(marker) {
      const markers = (typeof marker === 'string' ? [marker] : marker).map((m) => Buffer.from(m));
      return new Promise<void>((resolve) => {
        armed = { markers, longest: Math.max(...markers.map((m) => m.length)), resolve };
      });
    },
    release() {
      armed = undefined;
      for (const link of links) {
        const held = link.held;
        link.held = undefined;
        for (const chunk of held ?? []) link.redis.write(chunk);
      }
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const link of links) {
          link.client.destroy();
          link.redis.destroy();
        }
        server.close(() => resolve());
      }),
  };
}
