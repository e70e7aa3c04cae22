import { storageReplicas } from '@memstream/kit';
import { Kvm, type KV } from '@nats-io/kv';
import { z } from 'zod';
import type { Bus } from '@memstream/bus';
import { errorMessage, type Logger } from '@memstream/kit';

export const KEY_RATE_LIMIT_BUCKET = 'memstream-key-rate-limits';

/** `max` requests per `windowMs`: a bucket of `max` tokens refilled at max/windowMs per millisecond. */
export interface RateLimit {
  max: number;
  windowMs: number;
}

/** A bucket as stored: the tokens it held at `at` (epoch ms). */
export interface BucketState {
  tokens: number;
  at: number;
}

export type TakeResult = { ok: true; remaining: number } | { ok: false; retryAfterMs: number };

/** Whether a request may go ahead, for one bucket shared by every gateway replica. */
export interface RateLimiter {
  take(bucket: string, limit: RateLimit): Promise<TakeResult>;
}

/** The bucket at `now`: topped up for the time since `at`, never past `max`, never back in time. */
export function refill(state: BucketState | null, limit: RateLimit, now: number): BucketState {
  if (!state) return { tokens: limit.max, at: now };
  const at = Math.max(state.at, now);
  const tokens = Math.min(limit.max, state.tokens + ((at - state.at) * limit.max) / limit.windowMs);
  return { tokens, at };
}

/** Take one token at `now`: the new state, or how long until a token is there. */
export function takeToken(state: BucketState | null, limit: RateLimit, now: number): { state: BucketState; result: TakeResult } {
  const s = refill(state, limit, now);
  if (s.tokens >= 1) return { state: { tokens: s.tokens - 1, at: s.at }, result: { ok: true, remaining: Math.floor(s.tokens - 1) } };
  return { state: s, result: { ok: false, retryAfterMs: Math.max(1, Math.ceil(((1 - s.tokens) * limit.windowMs) / limit.max)) } };
}

const Stored = z.object({ tokens: z.number(), at: z.number() });

function isConflict(err: unknown): boolean {
  return /wrong last sequence|key exists/i.test(errorMessage(err));
}

/**
 * Token buckets in a NATS KV bucket, debited with compare-and-set (update at the revision read),
 * so every token taken on any replica is taken from the one shared bucket:
 *
 * - exact: across replicas, no more than `max` requests plus the refill since are let through;
 *   a debit that lost a race is re-read and retried, never applied twice or lost;
 * - approximate: the refill is computed from each replica's clock, so clock skew between
 *   replicas shifts refills by the skew (a bucket never refills backwards: `at` only grows);
 * - the local short cut: a replica that last saw the bucket empty answers 429 without asking
 *   the store, because other replicas can only take tokens, never add them (so this never
 *   refuses a request the shared bucket would have allowed);
 * - requests for one key on one replica are debited one at a time (a queue per key), so they do
 *   not race each other; only replicas race, and a debit that loses `maxAttempts` times in a
 *   row is answered 429 with a short wait rather than let through;
 * - the store unreachable: the request is let through (fail open) and a warning logged at most
 *   every 10 s: rate limits protect capacity, not data.
 */
export async function kvKeyRateLimiter(bus: Bus, opts: { log: Logger; now?: () => number; replicas?: number; maxAttempts?: number }): Promise<RateLimiter> {
  const now = opts.now ?? (() => Date.now());
  const maxAttempts = opts.maxAttempts ?? 20;
  // Entries untouched for an hour or more are full again anyway (the longest window is an hour).
  const kv: KV = await new Kvm(bus.js).create(KEY_RATE_LIMIT_BUCKET, { history: 1, ttl: 2 * 60 * 60 * 1000, replicas: opts.replicas ?? storageReplicas() });
  const seen = new Map<string, { state: BucketState | null; revision: number }>();
  const queues = new Map<string, Promise<unknown>>();
  let lastWarn = 0;

  async function read(bucket: string): Promise<{ state: BucketState | null; revision: number }> {
    const e = await kv.get(bucket);
    if (!e || e.operation !== 'PUT') return { state: null, revision: e?.revision ?? 0 };
    const parsed = Stored.safeParse(JSON.parse(e.string()));
    return { state: parsed.success ? parsed.data : null, revision: e.revision };
  }

  async function debit(bucket: string, limit: RateLimit): Promise<TakeResult> {
    let known = seen.get(bucket);
    for (let attempt = 0; attempt < maxAttempts; attempt++) {
      const t = now();
      if (known) {
        const { state, result } = takeToken(known.state, limit, t);
        if (!result.ok) return result;
        try {
          const revision = await createOrUpdate(bucket, state, known.revision);
          seen.set(bucket, { state, revision });
          return result;
        } catch (err) {
          if (!isConflict(err)) throw err;
        }
      }
      known = await read(bucket);
      seen.set(bucket, known);
    }
    return { ok: false, retryAfterMs: 50 };
  }

  /** Compare-and-set: create when there was no entry (revision 0), else update at the revision read. */
  async function createOrUpdate(bucket: string, state: BucketState, revision: number): Promise<number> {
    const data = JSON.stringify(state);
    return revision === 0 ? kv.create(bucket, data) : kv.update(bucket, data, revision);
  }

  return {
    async take(bucket, limit) {
      // The local short cut: seen empty, still empty (only time adds tokens).
      const known = seen.get(bucket);
      if (known?.state) {
        const { result } = takeToken(known.state, limit, now());
        if (!result.ok) return result;
      }
      const prev = queues.get(bucket) ?? Promise.resolve();
      const run = prev.then(() => debit(bucket, limit));
      const tail = run.catch(() => undefined);
      queues.set(bucket, tail);
      void tail.then(() => {
        if (queues.get(bucket) === tail) queues.delete(bucket);
      });
      try {
        return await run;
      } catch (err) {
        if (Date.now() - lastWarn > 10_000) {
          lastWarn = Date.now();
          opts.log.warn({ err: errorMessage(err), bucket }, 'rate-limit store unreachable; letting requests through');
        }
        return { ok: true, remaining: -1 };
      }
    },
  };
}
