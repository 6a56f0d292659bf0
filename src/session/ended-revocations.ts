/**
 * Revoking what an ended session held, and taking up what an earlier try left owed
 * (revocation-outbox.ts): every end that revokes goes through revokeEnded(), which releases the
 * journal entry once the provider has heard the revocation, and leaves it otherwise.
 */
import type { Sealer } from '../crypto/seal.js';
import type { Revoker } from '../oidc/revocation.js';
import type { StoredSession } from './record-codec.js';
import { SWEEP_BATCH, type RevocationOutbox } from './revocation-outbox.js';
import type { TokenSet } from './tokens.js';
import type { TokenVault } from './vault.js';

/** At most this many batches (of SWEEP_BATCH) per sweep. */
const MAX_BATCHES_PER_SWEEP = 16;
/** Each wait between sweeps is the interval, give or take this fraction of it. */
const SWEEP_JITTER = 0.2;

export interface EndedRevocationsOptions {
  outbox: RevocationOutbox;
  vault: TokenVault;
  /** Tells a value sealed with a key this process lacks (another process may open it). */
  sealer: Pick<Sealer, 'sealedElsewhere'>;
  revoke: Revoker;
  /** Whether the provider can be asked: an instance that cannot would claim and fail every entry, spending its tries. */
  ready: () => boolean;
  /** Between sweeps (jittered by a fifth either way). */
  sweepIntervalMs: number;
  /** Told how many revocations a sweep took up, when any. */
  onResumed?: (count: number) => void;
  /**
   * A sweep's last try was not heard (failed, or dropped past the queue): the kept copy expires
   * before a later sweep could find it, so it and its entry are released, and the session's
   * tokens stay valid at the provider until they expire. `handle` is the session's public
   * handle, when this process can open the copy's auth.
   */
  onAbandoned?: (handle: string | undefined) => void;
  /**
   * A sweep dropped this many entries no sweep had reached before their copies expired (none ran
   * for all that time: the provider's metadata not loaded, or a backlog), their revocations never
   * sent, or sent and unheard, as far as the journal knows.
   */
  onUnreached?: (count: number) => void;
  /** A sweep's Redis command failed (it is tried again at the next). */
  onError?: (err: unknown) => void;
}

export interface EndedRevocations {
  /**
   * Revokes the token set of the record an end took (`taken`: its sealed tokens as stored, ''
   * for none); resolves as the revoker does (done, or its wait over). The kept copy and its entry
   * are released once the provider has heard it; a failure, a drop past the queue or this
   * process's death leaves them for a later sweep. An end that took nothing (`taken` undefined:
   * another end has the copy, and releases it) revokes `otherwise` (what its request read),
   * unjournaled.
   */
  revokeEnded(sessionDigest: string, taken: string | undefined, otherwise?: TokenSet): Promise<void>;
  /** revokeEnded() for each record an end of many took (a provider's logout, a sign-in's), not waited for. */
  revokeAll(ended: readonly { digest: string; stored: StoredSession }[]): void;
  /** One sweep: takes up the entries whose lease lapsed; resolves to how many it revoked. */
  sweep(): Promise<number>;
  /** Sweeps every interval until stop(). */
  start(): void;
  stop(): void;
}

export function createEndedRevocations(options: EndedRevocationsOptions): EndedRevocations {
  const { outbox, vault, sealer, revoke } = options;
  const release = (d: string) => outbox.release(d).catch((err: unknown) => options.onError?.(err));
  let timer: NodeJS.Timeout | undefined;
  let sweeping = false;
  /**
   * A claimed copy that expires sooner than this is tried for the last time: the entry is due
   * again a lease after the claim, and found at the first sweep after that (an interval, jittered
   * up by a fifth, and a second for the batches before it). A copy that expired between two tries
   * would be forgotten unsaid, so this try is the last one, said when it fails.
   */
  const lastTryWithinMs = outbox.leaseMs + options.sweepIntervalMs * (1 + SWEEP_JITTER) + 1000;

  /** What a kept copy's `sealed` owes: its token set, nothing (released), or `elsewhere` (another process's key). */
  function owed(d: string, sealed: string): TokenSet | 'elsewhere' | undefined {
    const tokens = vault.openEnded(d, sealed || undefined);
    return tokens ?? (sealed && sealer.sealedElsewhere(sealed) ? 'elsewhere' : undefined);
  }

  /** The last try was not heard: said, and the journal lets the session go. */
  async function abandon(d: string): Promise<void> {
    const kept = await outbox.kept(d).catch(() => undefined);
    options.onAbandoned?.(kept?.auth?.handle);
    await release(d);
  }

  function revokeOwed(d: string, tokens: TokenSet | 'elsewhere' | undefined, last = false): Promise<void> {
    if (tokens === 'elsewhere') return Promise.resolve();
    if (tokens === undefined) {
      // Nothing to revoke (no token set, or one that is not the gateway's): nothing is owed.
      revoke.track(release(d));
      return Promise.resolve();
    }
    return revoke(tokens, (outcome) => (outcome === 'success' ? release(d) : last ? abandon(d) : undefined));
  }

  /** Whether another batch may be taken up now. */
  const mayTakeUp = () => options.ready() && revoke.underWay() < SWEEP_BATCH;

  async function sweep(): Promise<number> {
    // As many revocations under way as one batch: the provider is slow or the queue long, and a
    // sweep would only add to it what their owners are still sending.
    if (sweeping || !mayTakeUp()) return 0;
    sweeping = true;
    try {
      let resumed = 0;
      // Batch after batch while they come back full and nothing piles up: entries without a
      // copy (dropped at once) must not hold back the owed ones behind them.
      for (let batch = 0; batch < MAX_BATCHES_PER_SWEEP && mayTakeUp(); batch++) {
        const { due: claimed, unreached } = await outbox.claimDue(SWEEP_BATCH);
        if (unreached > 0) options.onUnreached?.(unreached);
        for (const due of claimed) {
          if (!due.kept) {
            await outbox.forget(due);
            continue;
          }
          const tokens = owed(due.digest, due.sealed);
          if (typeof tokens === 'object') resumed += 1;
          void revokeOwed(due.digest, tokens, due.expiresInMs <= lastTryWithinMs);
        }
        if (claimed.length < SWEEP_BATCH) break;
      }
      if (resumed > 0) options.onResumed?.(resumed);
      return resumed;
    } finally {
      sweeping = false;
    }
  }

  function schedule(): void {
    const jitter = 1 - SWEEP_JITTER + Math.random() * 2 * SWEEP_JITTER;
    timer = setTimeout(() => {
      const run = sweep().then(
        () => undefined,
        (err: unknown) => options.onError?.(err),
      );
      revoke.track(run);
      void run.then(() => {
        if (timer !== undefined) schedule();
      });
    }, options.sweepIntervalMs * jitter);
    timer.unref();
  }

  const revokeEnded = (d: string, taken: string | undefined, otherwise?: TokenSet): Promise<void> =>
    taken === undefined ? revoke(otherwise) : revokeOwed(d, owed(d, taken));

  return {
    revokeEnded,
    revokeAll(ended) {
      for (const { digest, stored } of ended) void revokeEnded(digest, stored.tokens.sealed);
    },
    sweep,
    start() {
      if (timer === undefined) schedule();
    },
    stop() {
      if (timer !== undefined) clearTimeout(timer);
      timer = undefined;
    },
  };
}
