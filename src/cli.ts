#!/usr/bin/env node
// Libraries' debug output (the `debug` package: express's router, express-session, ...) goes
// straight to stderr, past the logger's redaction: with DEBUG set it printed every request URL
// (the callback's code and state) and the whole signed session cookie (found by red team). It
// is read once, as those libraries load, so it goes before any of them does. `log.level: trace`
// is the gateway's own, redacted, detail.
delete process.env.DEBUG;
const { main } = await import('./main.js');

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
