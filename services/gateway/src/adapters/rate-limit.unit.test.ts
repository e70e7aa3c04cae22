import { describe, expect, it } from 'vitest';
import { refill, takeToken, type BucketState } from './rate-limit.js';

const limit = { max: 10, windowMs: 1000 };

describe('token bucket arithmetic', () => {
  it('a new bucket is full: max requests at once, then a refusal saying when the next token comes', () => {
    let s: BucketState | null = null;
    for (let i = 0; i < 10; i++) {
      const r = takeToken(s, limit, 0);
      expect(r.result).toEqual({ ok: true, remaining: 9 - i });
      s = r.state;
    }
    // One token per 100 ms.
    expect(takeToken(s, limit, 0).result).toEqual({ ok: false, retryAfterMs: 100 });
    expect(takeToken(s, limit, 40).result).toEqual({ ok: false, retryAfterMs: 60 });
    expect(takeToken(s, limit, 100).result).toEqual({ ok: true, remaining: 0 });
  });

  it('refills at max per window, never past max, and never backwards in time', () => {
    expect(refill({ tokens: 0, at: 1000 }, limit, 1500)).toEqual({ tokens: 5, at: 1500 });
    expect(refill({ tokens: 0, at: 1000 }, limit, 60_000)).toEqual({ tokens: 10, at: 60_000 });
    // A replica whose clock is behind the bucket's: no refill, and `at` stays.
    expect(refill({ tokens: 2, at: 5000 }, limit, 4000)).toEqual({ tokens: 2, at: 5000 });
  });

  it('over any interval, grants never exceed max plus the refill (property over random arrival times)', () => {
    for (let trial = 0; trial < 40; trial++) {
      let s: BucketState | null = null;
      let t = 0;
      let granted = 0;
      const horizon = 5000;
      while (t < horizon) {
        t += Math.floor(Math.random() * 30);
        const r = takeToken(s, limit, t);
        s = r.state;
        if (r.result.ok) granted++;
        else expect(r.result.retryAfterMs).toBeGreaterThan(0);
      }
      expect(granted).toBeLessThanOrEqual(limit.max + Math.floor((t * limit.max) / limit.windowMs));
    }
  });
});
