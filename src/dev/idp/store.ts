/**
 * In-memory storage: the oidc-provider adapter behind every model, with the indexes it needs.
 */
import type { Adapter, AdapterPayload } from 'oidc-provider';

// Models whose records die with their grant (revokeByGrantId).
const GRANT_BOUND = new Set([
  'AccessToken',
  'AuthorizationCode',
  'RefreshToken',
  'DeviceCode',
  'BackchannelAuthenticationRequest',
  'PreAuthorizedCode',
]);

interface StoredEntry {
  model: string;
  id: string;
  payload: AdapterPayload;
  expiresAt: number;
}

/**
 * oidc-provider's bundled memory adapter is an LRU capped at 1000 records, which silently
 * drops grants under load, and it cannot list grants by account (the account page needs to).
 */
export class DevStore {
  readonly #entries = new Map<string, StoredEntry>();
  readonly #grantMembers = new Map<string, Set<string>>();
  readonly #sessionUids = new Map<string, string>();
  readonly #userCodes = new Map<string, string>();
  readonly #grantsByAccount = new Map<string, Set<string>>();
  readonly #toleranceMs: number;
  #writes = 0;

  constructor(clockToleranceSeconds: number) {
    this.#toleranceMs = clockToleranceSeconds * 1000;
  }

  adapterFor(model: string): Adapter {
    const keyOf = (id: string): string => `${model}:${id}`;
    return {
      upsert: async (id, payload, expiresIn) => this.#upsert(model, id, payload, expiresIn),
      find: async (id) => this.#read(keyOf(id)),
      findByUid: async (uid) => this.#readIndexed(this.#sessionUids, uid, keyOf),
      findByUserCode: async (userCode) => this.#readIndexed(this.#userCodes, userCode, keyOf),
      consume: async (id) => this.#consume(keyOf(id)),
      destroy: async (id) => this.#remove(keyOf(id)),
      revokeByGrantId: async (grantId) => this.#removeGrantMembers(grantId, `${model}:`),
    };
  }

  grantIdsFor(accountId: string): string[] {
    return [...(this.#grantsByAccount.get(accountId) ?? [])];
  }

  /** Every token and code of the grant, then the grant itself. */
  destroyGrant(grantId: string): void {
    this.#removeGrantMembers(grantId, '');
    this.#remove(`Grant:${grantId}`);
  }

  #upsert(model: string, id: string, payload: AdapterPayload, expiresIn: number | undefined): void {
    const key = `${model}:${id}`;
    this.#remove(key);
    const expiresAt = typeof expiresIn === 'number' ? Date.now() + expiresIn * 1000 + this.#toleranceMs : Infinity;
    this.#entries.set(key, { model, id, payload, expiresAt });
    this.#index(key, model, id, payload);
    this.#writes += 1;
    if (this.#writes % 256 === 0) this.#sweep();
  }

  #index(key: string, model: string, id: string, payload: AdapterPayload): void {
    if (payload.grantId && GRANT_BOUND.has(model)) addTo(this.#grantMembers, payload.grantId, key);
    if (model === 'Session' && payload.uid) this.#sessionUids.set(payload.uid, id);
    if (payload.userCode) this.#userCodes.set(payload.userCode, id);
    if (model === 'Grant' && payload.accountId) addTo(this.#grantsByAccount, payload.accountId, id);
  }

  #read(key: string): AdapterPayload | undefined {
    const entry = this.#entries.get(key);
    if (!entry) return undefined;
    if (entry.expiresAt <= Date.now()) {
      this.#remove(key);
      return undefined;
    }
    return { ...entry.payload };
  }

  #readIndexed(index: Map<string, string>, value: string, keyOf: (id: string) => string): AdapterPayload | undefined {
    const id = index.get(value);
    return id === undefined ? undefined : this.#read(keyOf(id));
  }

  #consume(key: string): void {
    const entry = this.#entries.get(key);
    if (entry) entry.payload.consumed = Math.floor(Date.now() / 1000);
  }

  #remove(key: string): void {
    const entry = this.#entries.get(key);
    if (!entry) return;
    this.#entries.delete(key);
    const { model, id, payload } = entry;
    if (payload.grantId) removeFrom(this.#grantMembers, payload.grantId, key);
    if (payload.uid && this.#sessionUids.get(payload.uid) === id) this.#sessionUids.delete(payload.uid);
    if (payload.userCode && this.#userCodes.get(payload.userCode) === id) this.#userCodes.delete(payload.userCode);
    if (model === 'Grant' && payload.accountId) removeFrom(this.#grantsByAccount, payload.accountId, id);
  }

  #removeGrantMembers(grantId: string, keyPrefix: string): void {
    for (const key of [...(this.#grantMembers.get(grantId) ?? [])]) {
      if (key.startsWith(keyPrefix)) this.#remove(key);
    }
  }

  #sweep(): void {
    const now = Date.now();
    for (const [key, entry] of [...this.#entries]) {
      if (entry.expiresAt <= now) this.#remove(key);
    }
  }
}

function addTo(index: Map<string, Set<string>>, key: string, value: string): void {
  const set = index.get(key) ?? new Set<string>();
  set.add(value);
  index.set(key, set);
}

function removeFrom(index: Map<string, Set<string>>, key: string, value: string): void {
  const set = index.get(key);
  if (!set) return;
  set.delete(value);
  if (set.size === 0) index.delete(key);
}
