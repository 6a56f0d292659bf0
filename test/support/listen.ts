/** Test servers listen on 127.0.0.1 only, on a port the OS picks. */
import type { Server } from 'node:net';
import type { AddressInfo } from 'node:net';

/** Listens on 127.0.0.1:0 and answers the port given. */
export async function listenOnLoopback(server: Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

/** Drops open connections (keep-alive included) and waits until the server has closed. */
export async function closeServer(server: Server & { closeAllConnections?: () => void }): Promise<void> {
  server.closeAllConnections?.();
  await new Promise<void>((resolve) => server.close(() => resolve()));
}
