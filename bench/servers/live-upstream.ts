/**
 * The live-sessions scale run's upstream (bench/live.ts): the test suite's upstream (HTTP echo
 * and WebSocket server, test/support/upstream.ts) in a process of its own, so that its 10,000
 * sockets count against neither the gateway's nor the loader's open-file limit.
 */
import { startUpstream } from '../../test/support/upstream.js';
import { guardChild, serveChild } from '../lib/ipc.js';

guardChild(async () => {
  const upstream = await startUpstream({ websocket: true });
  serveChild({ url: upstream.url }, { websockets: () => upstream.wsConnections.length }, () => upstream.close());
});
