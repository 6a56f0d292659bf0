// A process that embeds the gateway (src/index.ts, from dist/) the way a host program would: its
// config parsed from a map of its own (EMBEDDED_CONFIG; the process environment is not passed to
// parseConfig). With EMBEDDED_SET_AFTER=NAME=VALUE, that variable is set in the real environment
// once the gateway serves. Prints EMBEDDED READY, or EMBEDDED FAILED <reason> with exit code 1.
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const { createRuntime, parseConfig, startGateway } = await import(pathToFileURL(path.resolve('dist/index.js')).href);
const config = parseConfig(JSON.parse(process.env.EMBEDDED_CONFIG ?? '{}'), { env: {} });
let started = false;
try {
  await startGateway(config, await createRuntime(config, { defaultMetrics: false }));
  started = true;
} catch (err) {
  console.log(`EMBEDDED FAILED ${err instanceof Error ? err.message : String(err)}`);
  process.exitCode = 1;
}
if (started) {
  const after = process.env.EMBEDDED_SET_AFTER;
  if (after) {
    const at = after.indexOf('=');
    process.env[after.slice(0, at)] = after.slice(at + 1);
  }
  console.log('EMBEDDED READY');
}
