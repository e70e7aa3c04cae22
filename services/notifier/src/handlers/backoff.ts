/** The retry schedule of webhook deliveries: exponential, with jitter so retries of many deliveries spread out. */
export interface RetryPolicy {
  maxAttempts: number;
  baseMs: number;
  maxMs: number;
}

/** Delay after the `attempt`-th failed attempt (from 1): base·2^(attempt−1), capped, ±20%. */
export function retryDelay(attempt: number, policy: Pick<RetryPolicy, 'baseMs' | 'maxMs'>, random: () => number = Math.random): number {
  const base = Math.min(policy.maxMs, policy.baseMs * 2 ** Math.max(0, attempt - 1));
  return Math.max(1, Math.round(base * (0.8 + random() * 0.4)));
}

/** Nominal time from the first attempt to the last (no jitter): the retry budget the docs quote. */
export function retryBudgetMs(policy: RetryPolicy): number {
  let total = 0;
  for (let a = 1; a < policy.maxAttempts; a++) total += Math.min(policy.maxMs, policy.baseMs * 2 ** (a - 1));
  return total;
}
