/**
 * oidc.privateKey (private_key_jwt), checked at load: oidc/client.ts signs with an RSA key as
 * RS256 and with an EC key as ES256 (P-256), so any other key would fail only inside provider
 * discovery, retried forever with /readyz 503. Never quotes the key or the parser's message.
 */
import { createPrivateKey, type KeyObject } from 'node:crypto';

export const MIN_RSA_BITS = 2048;

/** Why the key cannot be used, or undefined. */
export function privateKeyProblem(pem: string): string | undefined {
  let key: KeyObject;
  try {
    key = createPrivateKey(pem);
  } catch {
    return 'must be an unencrypted PEM private key (PKCS#8, e.g. `openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048`)';
  }
  const details = key.asymmetricKeyDetails ?? {};
  if (key.asymmetricKeyType === 'rsa') {
    return (details.modulusLength ?? 0) >= MIN_RSA_BITS ? undefined : `is an RSA key shorter than ${MIN_RSA_BITS} bits; use at least ${MIN_RSA_BITS}`;
  }
  if (key.asymmetricKeyType === 'ec') {
    return details.namedCurve === 'prime256v1' ? undefined : 'is an EC key on a curve other than P-256; use an RSA (2048 bits or more) or EC P-256 key';
  }
  return `is of type ${key.asymmetricKeyType ?? 'unknown'}; use an RSA (2048 bits or more) or EC P-256 key`;
}
