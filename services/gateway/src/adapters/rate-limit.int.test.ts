import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startNatsServer, type NatsServerHandle } from '@memstream/cli';
import { connectBus, type Bus } from '@memstream/bus';
import { createLogger } from '@memstream/kit';
import { kvKeyRateLimiter, type RateLimiter } from './rate-limit.js';

/** Two replicas' limiters (two NATS connections) over one shared KV bucket. */
describe('shared token buckets in NATS KV', () => {
  let dir: string;
  let nats: NatsServerHandle;
  const buses: Bus[] = [];
  const limiters: RateLimiter[] = [];
  const log = createLogger('rate-limit-test', { level: 'silent' });

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'memstream-ratelimit-'));
    nats = await startNatsServer({ storeDir: path.join(dir, 'nats') });
    for (let i = 0; i < 2; i++) {
      const bus = await connectBus({ url: nats.url, name: `replica-${i}`, log });
      buses.push(bus);
      limiters.push(await kvKeyRateLimiter(bus, { log }));
    }
  });
  afterAll(async () => {
    for (const b of buses) await b.close();
    await nats?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('exact across replicas: 400 concurrent requests on two replicas against a bucket of 50 let exactly 50 through', async () => {
    // An hour's window: the refill during the test is far below one token.
    const limit = { max: 50, windowMs: 3_600_000 };
    const started = performance.now();
    const results = await Promise.all(Array.from({ length: 400 }, (_, i) => limiters[i % 2]!.take('key.exact', limit)));
    const ms = performance.now() - started;
    const granted = results.filter((r) => r.ok).length;
    console.log(`400 concurrent takes over 2 replicas: ${granted} granted, ${400 - granted} refused, in ${ms.toFixed(0)} ms`);
    expect(granted).toBe(50);
    for (const r of results) if (!r.ok) expect(r.retryAfterMs).toBeGreaterThan(0);
    // Spent means spent on both replicas.
    expect((await limiters[0]!.take('key.exact', limit)).ok).toBe(false);
    expect((await limiters[1]!.take('key.exact', limit)).ok).toBe(false);
  });

  it('what a debit costs: one replica, and two replicas taking turns (figures)', async () => {
    const limit = { max: 10_000, windowMs: 60_000 };
    const time = async (label: string, pick: (i: number) => RateLimiter) => {
      const n = 300;
      const t0 = performance.now();
      for (let i = 0; i < n; i++) expect((await pick(i).take(`key.cost.${label}`, limit)).ok).toBe(true);
      return (performance.now() - t0) / n;
    };
    const one = await time('one', () => limiters[0]!);
    // Strict alternation is the worst case: each replica's last-seen revision is always stale, so every debit is read, then written.
    const two = await time('two', (i) => limiters[i % 2]!);
    console.log(`a granted request costs ${one.toFixed(2)} ms on one replica (1 KV update), ${two.toFixed(2)} ms when two replicas alternate (update refused, get, update)`);
  });

  it('buckets are per key: one spent key leaves another untouched', async () => {
    const limit = { max: 2, windowMs: 3_600_000 };
    expect((await limiters[0]!.take('key.p', limit)).ok).toBe(true);
    expect((await limiters[1]!.take('key.p', limit)).ok).toBe(true);
    expect((await limiters[0]!.take('key.p', limit)).ok).toBe(false);
    expect((await limiters[1]!.take('key.q', limit)).ok).toBe(true);
  });

  it('refills: a short window grants again after the wait it announced', async () => {
    const limit = { max: 1, windowMs: 200 };
    expect((await limiters[0]!.take('key.refill', limit)).ok).toBe(true);
    const refused = await limiters[1]!.take('key.refill', limit);
    expect(refused.ok).toBe(false);
    if (refused.ok) return;
    await new Promise((r) => setTimeout(r, refused.retryAfterMs + 5));
    expect((await limiters[1]!.take('key.refill', limit)).ok).toBe(true);
  });
});
