/**
 * A TCP relay in front of an upstream that can "reboot" the upstream host: its connections so
 * far are forgotten without a FIN (half-open on the gateway's side), and what the gateway then
 * writes on one is answered with a reset, as a rebooted host's kernel answers. New connections
 * pass through as before.
 *
 *   const relay = await startRebootingRelay(upstream.port);   // route target: relay.url
 *   relay.reboot();
 */
import net from 'node:net';
import { listenOnLoopback } from './listen.js';

export interface RebootingRelay {
  url: string;
  /** Every connection open now: further data from the gateway on it is answered with a reset. */
  reboot(): void;
  /** Connections open through the relay now. */
  links(): number;
  close(): Promise<void>;
}

export async function startRebootingRelay(targetPort: number): Promise<RebootingRelay> {
  const sockets = new Set<net.Socket>();
  const reboots = new Set<() => void>();
  const server = net.createServer((client) => {
    const up = net.connect(targetPort, '127.0.0.1');
    sockets.add(client).add(up);
    let gone = false;
    const reboot = () => {
      gone = true;
      // The old host is gone, and the gateway is not told.
      up.destroy();
    };
    reboots.add(reboot);
    client.on('data', (chunk) => (gone ? client.resetAndDestroy() : up.write(chunk)));
    up.on('data', (chunk) => gone || client.write(chunk));
    up.on('end', () => gone || client.end());
    up.on('error', () => gone || client.destroy());
    client.on('error', () => up.destroy());
    client.on('close', () => {
      sockets.delete(client);
      reboots.delete(reboot);
      up.destroy();
    });
    up.on('close', () => sockets.delete(up));
  });
  const port = await listenOnLoopback(server);
  return {
    url: `http://127.0.0.1:${port}`,
    reboot() {
      for (const reboot of [...reboots]) reboot();
    },
    links: () => reboots.size,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
