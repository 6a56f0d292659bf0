/**
 * What the gateway reads of its process's own environment beyond its config (the process edge,
 * as main.ts is). Node reads NODE_TLS_REJECT_UNAUTHORIZED from the real environment, whatever
 * map the config was parsed with: a process embedding the gateway (src/index.ts) that parsed
 * its config with a map of its own, the variable set in its environment, sent the client secret
 * to an impostor provider (found by review).
 */
import { unsafeEnvironment } from './config/safety.js';
import { StartupError } from './startup.js';

export function refuseUnsafeProcessEnvironment(): void {
  const [problem] = unsafeEnvironment(process.env);
  if (problem !== undefined) throw new StartupError(problem);
}
