import { storageReplicas } from '@memstream/kit';
import { JetStreamApiCodes, JetStreamApiError } from '@nats-io/jetstream';
import { Kvm, type KV } from '@nats-io/kv';
import { RetryableError } from '@memstream/kit';
import type { Bus } from './connect.js';

/** The KV bucket holding every shared rate limit's state, one key per limit. */
export const RATE_LIMIT_BUCKET = 'memstream-ratelimits';

/** Structurally the RateLimiter port of @memstream/embedder (this package does not depend on it). */
export interface SharedRateLimiter {
  /** Resolves when `n` units may be spent. */
  acquire(n: number): Promise<void>;
}

export interface KvRateLimiterOptions {
  /** The limit's key in the bucket (see rateLimitKey in @memstream/embedder); KV key characters only. */
  key: string;
  /** Units per second, summed over every process sharing the key. */
  rps: number;
  /** Units that may be saved up and spent at once (default 1). */
  burst?: number | undefined;
  /**
   * The longest wait a caller accepts (default 60 s). When the next free slot is further away (a
   * long queue of reservations ahead), acquire reserves nothing and throws a RetryableError, so a
   * worker hands its message back to the broker instead of holding it.
   */
  maxWaitMs?: number | undefined;
  /** Wall clock in ms; every process sharing a key must agree on it (NTP). Injected by tests. */
  now?: () => number;
}

/** What is stored under the key: tokens at wall-clock time `at` (negative: reserved ahead). */
interface BucketState {
  tokens: number;
  at: number;
  /** The rate and burst of the last writer, for whoever reads the bucket by hand. */
  rps: number;
  burst: number;
}

/** Opens (creating if needed) the shared bucket and returns a limiter for one key in it. */
export async function kvRateLimiter(bus: Bus, options: KvRateLimiterOptions, bucket = { replicas: storageReplicas() }): Promise<SharedRateLimiter> {
  const kv = await new Kvm(bus.js).create(RATE_LIMIT_BUCKET, { history: 1, replicas: bucket.replicas });
  return kvTokenBucket(kv, options);
}

/**
 * A token bucket whose state is one KV entry, shared by every process that uses the same key:
 * the embedder's replicas and the gateways all draw from one provider limit.
 *
 * Each acquire is a reservation, made with compare-and-set: read the entry, refill it for the
 * time elapsed since its `at` (capped at `burst`), take `n` tokens (going negative when they are
 * not there yet), and write it back with the revision read (`kv.update`, or `kv.create` for the
 * first one). A writer that lost the race reads again. Then the caller sleeps until its tokens
 * would have been there: (need − tokens) / rps after `at`. One round trip per request, no
 * polling, and reservations are served in the order they were written.
 *
 * Exact: every reservation is written exactly once (a conflict retries, it never overwrites), so
 * over any interval T the holders of a key are released at most burst + rps × T units, on the
 * timeline of the bucket's `at`; a caller never sends early (timers do not fire early), only
 * late. Approximate: `at` only moves forward, to the latest writer's clock, so a process whose
 * clock runs ahead refills the bucket early by its lead (at most `burst` extra, once per jump),
 * and a process whose clock lags waits its lag longer than needed. A process that reserves and
 * then dies leaves its slot unused (the limit is under-used, never exceeded). Processes
 * configured with different rps/burst for one key each apply their own to the refills they compute.
 */
export function kvTokenBucket(kv: KV, options: KvRateLimiterOptions): SharedRateLimiter {
  const { key, rps } = options;
  const burst = options.burst ?? 1;
  const maxWaitMs = options.maxWaitMs ?? 60_000;
  const now = options.now ?? Date.now;
  if (!(rps > 0) || !Number.isFinite(rps)) throw new RangeError(`kvRateLimiter: rps must be a positive number, got ${rps}`);
  if (!(burst >= 1) || !Number.isFinite(burst)) throw new RangeError(`kvRateLimiter: burst must be >= 1, got ${burst}`);

  /** Makes one reservation and returns how long its holder must wait, in ms. */
  const reserve = async (n: number): Promise<number> => {
    for (let attempt = 0; ; attempt++) {
      let entry;
      try {
        entry = await kv.get(key);
      } catch (err) {
        throw new RetryableError(`shared rate limit ${key}: the KV bucket cannot be read: ${(err as Error).message}`);
      }
      const t = now();
      let tokens = burst;
      let at = t;
      const s = entry !== null && entry.operation === 'PUT' ? readState(entry.string()) : undefined;
      if (s !== undefined) {
        // `at` never moves back: a writer whose clock lags the last one adds no refill.
        at = Math.max(t, s.at);
        tokens = Math.min(burst, s.tokens + (Math.max(0, t - s.at) / 1000) * rps);
      }
      const need = Math.min(n, burst);
      const waitMs = Math.max(0, at - t + (tokens >= need ? 0 : ((need - tokens) / rps) * 1000));
      if (waitMs > maxWaitMs) {
        throw new RetryableError(`shared rate limit ${key}: the next free slot is ${Math.ceil(waitMs / 1000)} s away (over ${maxWaitMs} ms)`, waitMs);
      }
      const next: BucketState = { tokens: tokens - n, at, rps, burst };
      const data = JSON.stringify(next);
      try {
        if (entry === null) await kv.create(key, data);
        else await kv.update(key, data, entry.revision);
        return waitMs;
      } catch (err) {
        if (!isConflict(err)) throw new RetryableError(`shared rate limit ${key}: the KV bucket cannot be written: ${(err as Error).message}`);
        // Another process wrote between our read and write: read again. A little jitter keeps
        // two processes that collide from colliding again in lockstep.
        if (attempt > 2) await sleep(Math.random() * Math.min(50, 2 ** attempt));
      }
    }
  };

  // One reservation at a time per process: concurrent callers of one limiter would only
  // collide with each other on the revision. The sleeps after reserving run concurrently.
  let tail: Promise<unknown> = Promise.resolve();
  return {
    async acquire(n: number): Promise<void> {
      if (!(n > 0)) return;
      const turn = tail.then(() => reserve(n));
      tail = turn.catch(() => undefined);
      const waitMs = await turn;
      if (waitMs > 0) await sleep(waitMs);
    },
  };
}

/** The stored state, or undefined when the entry is not one (written by hand): it then starts full. */
function readState(text: string): BucketState | undefined {
  try {
    const s = JSON.parse(text) as Partial<BucketState>;
    return typeof s.tokens === 'number' && Number.isFinite(s.tokens) && typeof s.at === 'number' && Number.isFinite(s.at) ? (s as BucketState) : undefined;
  } catch {
    return undefined;
  }
}

function isConflict(err: unknown): boolean {
  if (err instanceof JetStreamApiError) {
    return err.code === JetStreamApiCodes.StreamWrongLastSequence || err.code === JetStreamApiCodes.StreamWrongLastSequenceUnknown;
  }
  // kv.create on a key that exists reports it this way on some server versions.
  return err instanceof Error && /wrong last sequence|key exists/i.test(err.message);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
