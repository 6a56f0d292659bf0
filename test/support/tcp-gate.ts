/**
 * A TCP pass-through that can be shut (every link cut, new connections refused at once) and
 * opened again: one gateway process losing its network path to Redis while others keep theirs.
 */
import net from 'node:net';
import { listenOnLoopback } from './listen.js';

export interface TcpGate {
  url: string;
  /**
   * Stops carrying anything, either way, on the links whose client has subscribed (pub/sub: the
   * confirmation passed on),
   * and leaves them open: a NAT or load balancer that dropped an idle connection silently, or a
   * node that hangs. Later links are carried as usual. Returns how many it deafened now (one
   * deafened earlier and not closed yet is not counted again).
   */
  deafenSubscribers(): number;
  shut(): void;
  open(): void;
  close(): Promise<void>;
}

export async function startTcpGate(targetUrl: string): Promise<TcpGate> {
  const target = new URL(targetUrl);
  let isOpen = true;
  const links = new Set<{ client: net.Socket; upstream: net.Socket; subscribed?: boolean; deaf?: boolean }>();
  const server = net.createServer((client) => {
    if (!isOpen) return void client.destroy();
    const upstream = net.connect(Number(target.port || 6379), target.hostname);
    const link: { client: net.Socket; upstream: net.Socket; subscribed?: boolean; deaf?: boolean } = { client, upstream };
    links.add(link);
    client.pipe(upstream);
    upstream.pipe(client);
    // Subscribed once Redis's confirmation has been passed on (after the pipe's own write): a
    // link deafened between its SUBSCRIBE and the answer left the client waiting for it, which
    // it then sent again on a new link that nothing deafened (a flake seen in CI: no renewal).
    upstream.on('data', (chunk: Buffer) => {
      if (/subscribe/i.test(chunk.toString('latin1'))) link.subscribed = true;
    });
    const drop = () => {
      links.delete(link);
      client.destroy();
      upstream.destroy();
    };
    client.on('close', drop).on('error', drop);
    upstream.on('close', drop).on('error', drop);
  });
  const port = await listenOnLoopback(server);
  return {
    url: `redis://127.0.0.1:${port}`,
    deafenSubscribers() {
      let deafened = 0;
      for (const link of links) {
        if (!link.subscribed || link.deaf) continue;
        link.deaf = true;
        link.client.unpipe(link.upstream);
        link.upstream.unpipe(link.client);
        // Read and dropped from here on, as a black hole would.
        link.client.removeAllListeners('data');
        link.client.on('data', () => undefined);
        link.upstream.on('data', () => undefined);
        deafened += 1;
      }
      return deafened;
    },
    shut() {
      isOpen = false;
      for (const { client, upstream } of links) {
        client.destroy();
        upstream.destroy();
      }
      links.clear();
    },
    open() {
      isOpen = true;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const { client, upstream } of links) {
          client.destroy();
          upstream.destroy();
        }
        server.close(() => resolve());
      }),
  };
}
