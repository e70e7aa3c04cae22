import { createHash } from 'node:crypto';

/**
 * Hands out permission to send requests, `n` units at a time, at a sustained rate.
 *
 * The OpenAI-compatible embedder acquires 1 unit before every HTTP request, retries included,
 * since a provider counts every request against its limit. Two adapters:
 *  - `localRateLimiter` (here): a token bucket in this process only, so N replicas each
 *    configured with `rps` send up to N × rps together;
 *  - `kvRateLimiter` (@memstream/bus, packages/bus/src/rate-limit.ts): one token bucket in a NATS
 *    KV bucket, shared by every embedder replica and every gateway (query embeddings). It lives
 *    with the bus because this package knows nothing of NATS; services pass it in as
 *    `rateLimiter`.
 */
export interface RateLimiter {
  /** Resolves when `n` units may be spent; callers of one limiter are served in the order they asked. */
  acquire(n: number): Promise<void>;
}

/**
 * An in-process token bucket: `rps` units per second, at most `burst` (default 1) saved up, so
 * with the default, requests are spaced at least 1/rps seconds apart. A request for more units
 * than `burst` is let through once the bucket is full and leaves it in debt, which later callers
 * wait out, so the long-run rate holds for any `n`.
 */
export function localRateLimiter(rps: number, burst = 1): RateLimiter {
  if (!(rps > 0) || !Number.isFinite(rps)) throw new RangeError(`localRateLimiter: rps must be a positive number, got ${rps}`);
  if (!(burst >= 1) || !Number.isFinite(burst)) throw new RangeError(`localRateLimiter: burst must be >= 1, got ${burst}`);
  let tokens = burst;
  let last = performance.now();
  // A chain of callers: each waits for the previous one, so waiting callers cannot overtake.
  let tail: Promise<void> = Promise.resolve();
  const refill = (): void => {
    const now = performance.now();
    tokens = Math.min(burst, tokens + ((now - last) / 1000) * rps);
    last = now;
  };
  return {
    acquire(n: number): Promise<void> {
      if (!(n > 0)) return Promise.resolve();
      const turn = tail.then(async () => {
        refill();
        const need = Math.min(n, burst);
        if (tokens < need) {
          await sleep(((need - tokens) / rps) * 1000);
          refill();
        }
        tokens -= n;
      });
      tail = turn;
      return turn;
    },
  };
}

/**
 * The name of the shared bucket of one provider limit: endpoint and model, hashed into the
 * characters a NATS KV key allows. Every process that sends to the same endpoint with the same
 * model derives the same key, so they draw from one bucket.
 */
export function rateLimitKey(baseUrl: string, model: string): string {
  const normalised = `${baseUrl.replace(/\/+$/, '')}\n${model}`;
  return `embeddings.${createHash('sha256').update(normalised).digest('hex').slice(0, 24)}`;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
