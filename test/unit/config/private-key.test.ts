/**
 * oidc.privateKey is parsed at load (src/config/private-key.ts): oidc/client.ts signs with RSA
 * (RS256) or EC P-256 (ES256) only, and any other key used to fail inside provider discovery,
 * retried forever with /readyz 503 while --check passed. Pure.
 *
 * Fails if, in src/config/private-key.ts, `return details.namedCurve === 'prime256v1' ? ...`
 * becomes `return undefined;` (a P-384 key passes).
 */
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { configProblems } from '../../support/config.js';

const KEY = randomBytes(32).toString('base64');
const SECRET = randomBytes(30).toString('base64');

const problems = (privateKey: string): string[] =>
  configProblems({
    server: { publicUrl: 'https://app.example.com' },
    oidc: { issuer: 'https://idp.example.com', clientId: 'bff', clientAuthMethod: 'private_key_jwt', privateKey },
    session: { secrets: [SECRET], encryptionKeys: [KEY] },
  });

const pkcs8 = (k: ReturnType<typeof generateKeyPairSync>['privateKey']) => k.export({ format: 'pem', type: 'pkcs8' }) as string;
const rsa = (bits: number) => generateKeyPairSync('rsa', { modulusLength: bits }).privateKey;
const ec = (namedCurve: string) => generateKeyPairSync('ec', { namedCurve }).privateKey;

describe('oidc.privateKey', () => {
  it('accepts an RSA key of 2048 bits or more and an EC P-256 key, PKCS#8 or the traditional PEM forms', () => {
    expect(problems(pkcs8(rsa(2048)))).toEqual([]);
    expect(problems(rsa(3072).export({ format: 'pem', type: 'pkcs1' }) as string)).toEqual([]);
    expect(problems(pkcs8(ec('P-256')))).toEqual([]);
    expect(problems(ec('prime256v1').export({ format: 'pem', type: 'sec1' }) as string)).toEqual([]);
  });

  it('refuses, one line each, a key client.ts cannot sign with', () => {
    expect(problems(pkcs8(ec('P-384')))).toEqual(['oidc.privateKey: is an EC key on a curve other than P-256; use an RSA (2048 bits or more) or EC P-256 key']);
    expect(problems(pkcs8(generateKeyPairSync('ed25519').privateKey))).toEqual(['oidc.privateKey: is of type ed25519; use an RSA (2048 bits or more) or EC P-256 key']);
    expect(problems(pkcs8(generateKeyPairSync('rsa-pss', { modulusLength: 2048 }).privateKey))).toEqual([expect.stringMatching(/^oidc\.privateKey: is of type rsa-pss; /)]);
    expect(problems(pkcs8(rsa(1024)))).toEqual(['oidc.privateKey: is an RSA key shorter than 2048 bits; use at least 2048']);
  });

  it('refuses what is not an unencrypted PEM private key, quoting none of it', () => {
    const notPem = [
      '-----BEGIN PRIVATE KEY-----\nTHIS-IS-NOT-A-KEY\n-----END PRIVATE KEY-----\n',
      JSON.stringify(ec('P-256').export({ format: 'jwk' })),
      rsa(2048).export({ format: 'pem', type: 'pkcs8', cipher: 'aes-256-cbc', passphrase: 'pass-PHRASE' }) as string,
      generateKeyPairSync('rsa', { modulusLength: 2048 }).publicKey.export({ format: 'pem', type: 'spki' }) as string,
    ];
    for (const value of notPem) {
      const lines = problems(value);
      expect(lines).toEqual([expect.stringMatching(/^oidc\.privateKey: must be an unencrypted PEM private key/)]);
      expect(lines.join('\n')).not.toMatch(/THIS-IS-NOT|BEGIN|"d"|PHRASE/);
    }
  });
});
