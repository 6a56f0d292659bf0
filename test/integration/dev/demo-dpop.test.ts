/**
 * The embedded demo (config/default.yaml) shows DPoP and token exchange end to end: its /api
 * route sends DPoP-bound tokens with proofs (nonces on at the dev provider and the demo API),
 * its /api/ledger route a token exchanged for the ledger audience, and the demo API checks both.
 *
 * Mutation that fails it (checked by hand): in config/default.yaml, drop `dpop: true` from the
 * /api route: the session is no longer bound and the demo API's answer says `bearer`.
 */
import { decodeJwt } from 'jose';
import { BrowserClient } from '../../support/browser-client.js';
import { signIn } from '../../support/drive-login.js';
import { startDemoOnFreePorts, type RunningDemo } from '../../support/demo.js';
import { tokensOfSession } from '../../support/assertions.js';
import type { TestGateway } from '../../support/gateway.js';

let demo: RunningDemo;
const csrf = { 'x-csrf': '1', accept: 'application/json' };

beforeAll(async () => {
  demo = await startDemoOnFreePorts();
}, 30_000);

afterAll(async () => {
  await demo?.stop();
});

describe('the demo with DPoP and token exchange', () => {
  it('calls the demo API with a DPoP-bound token and a proof, and the ledger with an exchanged token', async () => {
    const client = new BrowserClient();
    await signIn(client, demo.url, { user: 'alice', password: 'alice-password', returnTo: '/' });
    const hello = await client.get(`${demo.url}/api/hello`, { headers: csrf });
    expect(hello.status).toBe(200);
    expect(hello.json()).toMatchObject({ scheme: 'dpop', subject: 'alice', path: '/api/hello' });

    const ledger = await client.get(`${demo.url}/api/ledger/balance`, { headers: csrf });
    expect(ledger.status).toBe(200);
    const answer = ledger.json<{ scheme: string; audience: unknown; scopes: string[]; subject: string }>();
    expect(answer).toMatchObject({ scheme: 'bearer', subject: 'alice', scopes: ['ledger:read'] });
    expect([answer.audience].flat()).toContain(`${demo.apiUrl}/ledger`);

    const cookie = client.cookies(demo.url)[demo.config.derived.sessionCookieName] as string;
    const tokens = await tokensOfSession({ runtime: demo.gateway.runtime } as TestGateway, cookie);
    expect(decodeJwt(tokens?.accessToken ?? '').cnf).toBeDefined();
    expect(tokens?.exchanged?.['/api/ledger']).toBeDefined();
  });
});
