/**
 * A throwaway self-signed certificate for https tests, made at test time with the `openssl`
 * CLI (Debian package `openssl`, present wherever the suite runs: no npm dependency and no
 * key material in the repository). Valid for localhost and 127.0.0.1, one day.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

export interface TlsCertificate {
  /** PEM; also the trust anchor a client needs (it signs itself). */
  cert: string;
  key: string;
}

export function makeSelfSignedCertificate(): TlsCertificate {
  const dir = mkdtempSync(path.join(tmpdir(), 'bff-tls-'));
  try {
    const keyFile = path.join(dir, 'key.pem');
    const certFile = path.join(dir, 'cert.pem');
    execFileSync(
      'openssl',
      ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '1',
        '-subj', '/CN=localhost', '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1',
        '-keyout', keyFile, '-out', certFile],
      { stdio: ['ignore', 'ignore', 'pipe'], timeout: 10_000 },
    );
    return { cert: readFileSync(certFile, 'utf8'), key: readFileSync(keyFile, 'utf8') };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
