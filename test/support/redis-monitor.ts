/**
 * Redis MONITOR on a raw socket: every command the server runs, as the line Redis prints
 * (`+<time> [<db> <client>] "cmd" "arg" ...`, arguments quoted and escaped, so one line per
 * command). Not through ioredis: its monitor mode took a pub/sub line for a reply to a command
 * of its own and threw ("Command queue state error"), now and then, with the gateway's
 * subscriber on the same server.
 */
import net from 'node:net';

export interface RedisMonitor {
  readonly lines: string[];
  stop(): void;
}

export async function startRedisMonitor(redisUrl: string): Promise<RedisMonitor> {
  const url = new URL(redisUrl);
  const socket = net.connect(Number(url.port || 6379), url.hostname);
  const lines: string[] = [];
  let pending = '';
  await new Promise<void>((resolve, reject) => {
    socket.once('error', reject);
    socket.once('connect', () => {
      socket.off('error', reject);
      resolve();
    });
  });
  socket.on('error', () => undefined);
  const started = new Promise<void>((resolve) => {
    socket.on('data', (chunk: Buffer) => {
      pending += chunk.toString('latin1');
      const parts = pending.split('\r\n');
      pending = parts.pop() ?? '';
      for (const line of parts) {
        if (line === '+OK') resolve();
        else lines.push(line);
      }
    });
  });
  socket.write('MONITOR\r\n');
  await started;
  return { lines, stop: () => socket.destroy() };
}
