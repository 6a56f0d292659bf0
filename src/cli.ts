#!/usr/bin/env node
import { main } from './main.js';

main(process.argv.slice(2), process.env).then(
  (code) => {
    process.exitCode = code;
    // A cluster worker's IPC channel would keep a worker that could not start alive, and
    // disconnecting it makes Node exit with 0: a worker leaves with its own code, explicitly.
    if (process.connected) process.exit(code);
  },
  (err: unknown) => {
    process.stderr.write(`bff-gateway: fatal: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = 1;
  },
);
