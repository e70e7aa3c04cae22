import { describe, expect, it } from 'vitest';
import { retryBudgetMs, retryDelay } from './backoff.js';

describe('webhook retry schedule', () => {
  const policy = { maxAttempts: 12, baseMs: 10_000, maxMs: 3_600_000 };

  it('doubles from the base, capped, within ±20% jitter', () => {
    expect(retryDelay(1, policy, () => 0.5)).toBe(10_000);
    expect(retryDelay(2, policy, () => 0.5)).toBe(20_000);
    expect(retryDelay(9, policy, () => 0.5)).toBe(2_560_000);
    expect(retryDelay(10, policy, () => 0.5)).toBe(3_600_000);
    expect(retryDelay(30, policy, () => 0.5)).toBe(3_600_000);
    expect(retryDelay(3, policy, () => 0)).toBe(32_000);
    expect(retryDelay(3, policy, () => 0.999999)).toBe(48_000);
  });

  it('spends about three and a half hours by default before giving up', () => {
    // 10+20+…+2560 s, then 3600 s twice: 12 attempts over 11 waits.
    expect(retryBudgetMs(policy)).toBe((10 + 20 + 40 + 80 + 160 + 320 + 640 + 1280 + 2560 + 3600 + 3600) * 1000);
    expect(retryBudgetMs({ ...policy, maxAttempts: 1 })).toBe(0);
  });
});
