/**
 * A YAML warning never prints the config's source (which may hold a secret) and never lets a
 * config through: `clientSecret: !vault <secret>` made the yaml package emit a process warning
 * quoting that line to stderr, then ignore the unknown tag and accept the secret as written.
 * Now it is one ConfigError line naming the file, position and warning code only.
 *
 * Fails if, in src/config/load.ts loadConfigFile, `if (doc.warnings.length > 0) {` becomes
 * `if (false) {` (the config is accepted). The old `parseYaml(text)` fails it too: the warning
 * reaches process.emitWarning with the secret (checked by hand).
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import process from 'node:process';
import { randomBytes } from 'node:crypto';
import { jest } from '@jest/globals';
import { ConfigError, loadConfigFile } from '../../../src/config/load.js';

const SECRET_VALUE = 'Sup3rS3cretValue-123';

function configFile(clientSecretLine: string): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'bff-yaml-'));
  const file = path.join(dir, 'config.yaml');
  writeFileSync(
    file,
    [
      'server: { publicUrl: "https://app.example.com" }',
      'oidc:',
      '  issuer: "https://idp.example.com"',
      '  clientId: bff',
      clientSecretLine,
      `session: { secrets: ["${randomBytes(30).toString('base64')}"], encryptionKeys: ["${randomBytes(32).toString('base64')}"] }`,
      'redis: { url: "redis://127.0.0.1:6379" }',
    ].join('\n'),
  );
  return file;
}

/** What loading `file` throws, and everything it sent to process warnings and stderr. */
async function load(file: string): Promise<{ error: unknown; printed: string }> {
  const printed: string[] = [];
  const onWarning = (w: Error) => printed.push(`${w.name}: ${w.message}`);
  process.on('warning', onWarning);
  const emit = jest.spyOn(process, 'emitWarning').mockImplementation((w: string | Error) => void printed.push(String(w)));
  const write = jest.spyOn(process.stderr, 'write').mockImplementation((chunk: unknown) => (printed.push(String(chunk)), true));
  let error: unknown;
  try {
    loadConfigFile(file, { env: {} });
  } catch (err) {
    error = err;
  }
  await new Promise((r) => setImmediate(r)); // process warnings are emitted on the next tick
  emit.mockRestore();
  write.mockRestore();
  process.off('warning', onWarning);
  // Jest's own warning (VM modules are experimental) may land meanwhile.
  const ours = printed.filter((p) => !/ExperimentalWarning|--trace-warnings/.test(p));
  return { error, printed: ours.join('\n') };
}

describe('YAML warnings in the config file', () => {
  it('refuses an unknown tag with one line naming its position, printing no source', async () => {
    const file = configFile(`  clientSecret: !vault ${SECRET_VALUE}`);
    const { error, printed } = await load(file);
    expect(printed).not.toContain(SECRET_VALUE);
    expect(printed).toBe('');
    expect(error).toBeInstanceOf(ConfigError);
    const problems = (error as ConfigError).problems;
    expect(problems).toEqual([`${file}: YAML warning TAG_RESOLVE_FAILED (line 5, column 17): refused, the parser would skip over it`]);
    expect((error as ConfigError).message).not.toContain(SECRET_VALUE);
  });

  it('still loads the same config without the tag', async () => {
    const { error, printed } = await load(configFile(`  clientSecret: ${SECRET_VALUE}`));
    expect(error).toBeUndefined();
    expect(printed).toBe('');
  });
});
