import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Kvm, type KV } from '@nats-io/kv';
import { startNatsServer, type NatsServerHandle } from '@memstream/cli';
import { RetryableError, createLogger } from '@memstream/kit';
import { connectBus, type Bus } from './connect.js';
import { RATE_LIMIT_BUCKET, kvRateLimiter, kvTokenBucket, type SharedRateLimiter } from './rate-limit.js';
// Relative: @memstream/bus does not depend on @memstream/embedder (the embedder port is structural).
import { OpenAiEmbedder, rateLimitKey } from '../../embedder/src/index.js';

/** The shared token bucket against a real nats-server, with two connections standing for two replicas. */
describe('kvRateLimiter: one token bucket in NATS KV shared by processes', () => {
  let dir: string;
  let nats: NatsServerHandle;
  let a: Bus;
  let b: Bus;
  const log = createLogger('test', { level: 'silent' });

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'memstream-ratelimit-'));
    nats = await startNatsServer({ storeDir: dir });
    a = await connectBus({ url: nats.url, name: 'replica-a', log });
    b = await connectBus({ url: nats.url, name: 'replica-b', log });
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
    await nats?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  /** Acquires in a loop until `ms` have passed; counts the acquisitions granted before the end. */
  async function drain(limiter: SharedRateLimiter, end: number): Promise<number> {
    let n = 0;
    while (Date.now() < end) {
      await limiter.acquire(1);
      if (Date.now() < end) n++;
    }
    return n;
  }

  it('two replicas at N rps over 2 s get about 2N + burst together, not twice that', async () => {
    const rps = 10;
    const burst = 3;
    const seconds = 2;
    const key = 'embeddings.two-replicas';
    const ra = await kvRateLimiter(a, { key, rps, burst });
    const rb = await kvRateLimiter(b, { key, rps, burst });
    const end = Date.now() + seconds * 1000;
    // Two callers per replica, as EMBEDDER_CONCURRENCY=2 would make.
    const counts = await Promise.all([drain(ra, end), drain(ra, end), drain(rb, end), drain(rb, end)]);
    const total = counts.reduce((x, y) => x + y, 0);
    console.log(`shared bucket ${rps} rps, burst ${burst}, ${seconds} s, 2 replicas × 2 callers: ${counts.join(' + ')} = ${total} (ceiling ${burst + rps * seconds}; unshared would allow ${2 * (burst + rps * seconds)})`);
    // The ceiling is exact; +1 allows for the clock read at `end` landing a hair after a grant.
    expect(total).toBeLessThanOrEqual(burst + rps * seconds + 1);
    // And the budget is used, by both replicas (a slow shared machine only lowers this).
    expect(total).toBeGreaterThanOrEqual(rps * seconds * 0.5);
    expect(counts[0]! + counts[1]!).toBeGreaterThan(0);
    expect(counts[2]! + counts[3]!).toBeGreaterThan(0);
  });

  it('loses no reservation when replicas race on the revision', async () => {
    const kvA: KV = await new Kvm(a.js).open(RATE_LIMIT_BUCKET);
    const kvB: KV = await new Kvm(b.js).open(RATE_LIMIT_BUCKET);
    // A frozen clock: no refill, so the stored tokens count every reservation exactly. A high
    // rate keeps the resulting waits (debt / rps) at a few ms.
    const t = Date.now();
    const opts = { key: 'embeddings.race', rps: 100_000, burst: 5, now: () => t };
    const limiters = [kvTokenBucket(kvA, opts), kvTokenBucket(kvA, opts), kvTokenBucket(kvB, opts), kvTokenBucket(kvB, opts)];
    const perLimiter = 15;
    await Promise.all(limiters.flatMap((l) => Array.from({ length: perLimiter }, () => l.acquire(1))));
    const state = (await kvA.get('embeddings.race'))!.json<{ tokens: number; at: number }>();
    expect(state.tokens).toBeCloseTo(5 - limiters.length * perLimiter, 9);
    expect(state.at).toBe(t);
  });

  it('hands back a RetryableError, reserving nothing, when the next slot is beyond maxWaitMs', async () => {
    const limiter = await kvRateLimiter(a, { key: 'embeddings.slow', rps: 0.5, burst: 1, maxWaitMs: 500 });
    await limiter.acquire(1); // the saved-up token
    const err = await limiter.acquire(1).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RetryableError);
    expect((err as RetryableError).message).toMatch(/next free slot is 2 s away/);
    expect((err as RetryableError).retryAfterMs).toBeGreaterThan(1500);
    const kv = await new Kvm(a.js).open(RATE_LIMIT_BUCKET);
    expect((await kv.get('embeddings.slow'))!.json<{ tokens: number }>().tokens).toBeLessThan(0.01);
  });

  it('two OpenAI-compatible embedders (two replicas) send at most the shared rate to the provider', async () => {
    const arrivals: number[] = [];
    const server = createServer(async (req, res) => {
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      arrivals.push(Date.now());
      const { input } = JSON.parse(Buffer.concat(chunks).toString()) as { input: string[] };
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ data: input.map((_, index) => ({ index, embedding: [1, index, 0, 0] })) }));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    try {
      const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
      const rps = 8;
      const burst = 2;
      const key = rateLimitKey(baseUrl, 'm');
      const replicas = await Promise.all(
        [a, b].map(async (bus) => new OpenAiEmbedder({ baseUrl, model: 'm', dim: 4, rateLimiter: await kvRateLimiter(bus, { key, rps, burst }) })),
      );
      const start = Date.now();
      const end = start + 1500;
      await Promise.all(replicas.flatMap((e) => [e, e]).map(async (e) => {
        while (Date.now() < end) await e.embed(['text']);
      }));
      const inWindow = arrivals.filter((t) => t < end).length;
      console.log(`provider saw ${inWindow} requests in 1.5 s from 2 replicas sharing ${rps} rps, burst ${burst} (ceiling ${burst + rps * 1.5})`);
      expect(inWindow).toBeLessThanOrEqual(burst + rps * 1.5 + 1);
      expect(inWindow).toBeGreaterThanOrEqual(rps * 1.5 * 0.5);
    } finally {
      await new Promise<void>((r) => server.close(() => r()));
    }
  });

  it('rejects a nonsensical rate', async () => {
    const kv = await new Kvm(a.js).open(RATE_LIMIT_BUCKET);
    expect(() => kvTokenBucket(kv, { key: 'k', rps: 0 })).toThrow(RangeError);
    expect(() => kvTokenBucket(kv, { key: 'k', rps: 1, burst: 0 })).toThrow(RangeError);
  });
});
