import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { PermanentError, RetryableError } from '@memstream/kit';
import { createEmbedder } from './index.js';
import { retryAfterMs } from './http.js';
import { EmbeddingDimensionError, OpenAiEmbedder } from './openai.js';
import { localRateLimiter } from './rate-limit.js';
import { norm } from './testing/vectors.js';

interface Seen {
  method: string | undefined;
  url: string | undefined;
  auth: string | undefined;
  contentType: string | undefined;
  body: { model: string; input: string[] };
  /** performance.now() when the request arrived. */
  at: number;
}

type Reply = { status: number; headers?: Record<string, string>; body?: unknown } | 'destroy';

const DIM = 8;

/**
 * What a well-behaved server answers: input "t<k>" gets the vector (k+1)·e0 + e1 (not unit
 * length, so normalisation shows), and the data array comes back in REVERSE order so the
 * adapter must sort by `index`.
 */
function vectorsFor(input: string[], dim = DIM): Reply {
  const data = input.map((text, index) => {
    const k = Number(text.slice(1));
    const embedding = Array.from({ length: dim }, (_, i) => (i === 0 ? k + 1 : i === 1 ? 1 : 0));
    return { object: 'embedding', index, embedding };
  });
  return { status: 200, body: { object: 'list', model: 'm', data: data.reverse(), usage: { prompt_tokens: 1, total_tokens: 1 } } };
}

describe('OpenAiEmbedder against a loopback /v1/embeddings server', () => {
  let server: Server;
  let baseUrl: string;
  let seen: Seen[];
  let answer: (req: Seen, n: number) => Reply;

  function send(res: ServerResponse, reply: Exclude<Reply, 'destroy'>): void {
    res.writeHead(reply.status, { 'content-type': 'application/json', ...reply.headers });
    res.end(reply.body === undefined ? '' : typeof reply.body === 'string' ? reply.body : JSON.stringify(reply.body));
  }

  beforeAll(async () => {
    server = createServer(async (req, res) => {
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      const s: Seen = {
        method: req.method,
        url: req.url,
        auth: req.headers.authorization,
        contentType: req.headers['content-type'],
        body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as Seen['body'],
        at: performance.now(),
      };
      seen.push(s);
      const reply = answer(s, seen.length);
      if (reply === 'destroy') req.socket.destroy();
      else send(res, reply);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  });

  afterAll(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  beforeEach(() => {
    seen = [];
    answer = (req) => vectorsFor(req.body.input);
  });

  /** Fast backoff so retry tests take milliseconds; the waits a server asks for are not shortened. */
  const make = (extra: Partial<ConstructorParameters<typeof OpenAiEmbedder>[0]> = {}) =>
    new OpenAiEmbedder({ baseUrl, model: 'm', dim: DIM, baseBackoffMs: 5, maxBackoffMs: 5_000, ...extra });

  it('splits 150 inputs into 3 requests of at most 64 and keeps input order via `index`', async () => {
    const texts = Array.from({ length: 150 }, (_, k) => `t${k}`);
    const vectors = await make().embed(texts);
    expect(seen.map((s) => s.body.input.length)).toEqual([64, 64, 22]);
    expect(seen.flatMap((s) => s.body.input)).toEqual(texts);
    expect(vectors).toHaveLength(150);
    vectors.forEach((v, k) => {
      // (k+1, 1, 0…) normalised: the ratio of the first two components identifies the input.
      expect(v[0]! / v[1]!).toBeCloseTo(k + 1, 3);
    });
  });

  it('returns unit vectors of the configured dimension, as Float32Array', async () => {
    answer = () => ({ status: 200, body: { data: [{ index: 0, embedding: [3, 4, 0, 0, 0, 0, 0, 0] }] } });
    const [v] = await make().embed(['x']);
    expect(v).toBeInstanceOf(Float32Array);
    expect(v?.length).toBe(DIM);
    expect(Array.from(v!.slice(0, 2))).toEqual([expect.closeTo(0.6, 6), expect.closeTo(0.8, 6)]);
    expect(norm(v!)).toBeCloseTo(1, 6);
  });

  it('POSTs {model, input} as JSON to <baseUrl>/embeddings, with the bearer key only when one is set', async () => {
    await make({ apiKey: 'sk-test-123', baseUrl: `${baseUrl}/` }).embed(['t1']);
    await make().embed(['t2']);
    expect(seen[0]).toMatchObject({ method: 'POST', url: '/v1/embeddings', auth: 'Bearer sk-test-123', body: { model: 'm', input: ['t1'] } });
    expect(seen[0]?.contentType).toMatch(/^application\/json/);
    expect(seen[1]?.auth).toBeUndefined();
  });

  it('sends no request for no texts', async () => {
    expect(await make().embed([])).toEqual([]);
    expect(seen).toHaveLength(0);
  });

  it('names the model openai:<model>:<dim>, the same for every instance', () => {
    const a = new OpenAiEmbedder({ baseUrl, model: 'text-embedding-3-small', dim: 1536 });
    const b = createEmbedder({ kind: 'openai', baseUrl: 'http://other:1/v1', model: 'text-embedding-3-small', dim: 1536 });
    expect(a.model).toBe('openai:text-embedding-3-small:1536');
    expect(b).toBeInstanceOf(OpenAiEmbedder);
    expect(b.model).toBe(a.model);
    expect(b.dim).toBe(1536);
  });

  it('waits out 429 with retry-after-ms, then succeeds', async () => {
    answer = (req, n) => (n <= 2 ? { status: 429, headers: { 'retry-after-ms': '100' }, body: { error: 'slow down' } } : vectorsFor(req.body.input));
    const started = performance.now();
    const vectors = await make({ baseBackoffMs: 1 }).embed(['t0', 't1']);
    const ms = performance.now() - started;
    expect(vectors).toHaveLength(2);
    expect(seen).toHaveLength(3);
    // The server's wait, not the 1 ms backoff, decided the spacing.
    expect(seen[1]!.at - seen[0]!.at).toBeGreaterThanOrEqual(95);
    expect(seen[2]!.at - seen[1]!.at).toBeGreaterThanOrEqual(95);
    expect(ms).toBeLessThan(2_000);
  });

  it('waits out 429 with Retry-After in seconds (twice 1 s), then succeeds after >= 2 s', async () => {
    answer = (req, n) => (n <= 2 ? { status: 429, headers: { 'retry-after': '1' }, body: { error: 'rate limited' } } : vectorsFor(req.body.input));
    const started = performance.now();
    const vectors = await make({ baseBackoffMs: 1 }).embed(['t5']);
    const ms = performance.now() - started;
    expect(vectors[0]![0]! / vectors[0]![1]!).toBeCloseTo(6, 3);
    expect(seen).toHaveLength(3);
    expect(ms).toBeGreaterThanOrEqual(1_990);
    expect(ms).toBeLessThan(4_000);
  });

  it('reads Retry-After as an HTTP date, and prefers retry-after-ms', () => {
    const now = Date.parse('2025-01-01T00:00:00Z');
    expect(retryAfterMs(new Headers({ 'retry-after': 'Wed, 01 Jan 2025 00:00:03 GMT' }), now)).toBe(3_000);
    expect(retryAfterMs(new Headers({ 'retry-after': 'Tue, 31 Dec 2024 23:59:00 GMT' }), now)).toBe(0);
    expect(retryAfterMs(new Headers({ 'retry-after': '2', 'retry-after-ms': '250' }), now)).toBe(250);
    expect(retryAfterMs(new Headers({ 'retry-after': 'soon' }), now)).toBeUndefined();
    expect(retryAfterMs(new Headers(), now)).toBeUndefined();
  });

  it('retries 408 and 5xx with backoff, and recovers', async () => {
    const statuses = [503, 408, 502];
    answer = (req, n) => (n <= statuses.length ? { status: statuses[n - 1]!, body: 'busy' } : vectorsFor(req.body.input));
    expect(await make().embed(['t1'])).toHaveLength(1);
    expect(seen).toHaveLength(4);
  });

  it('retries a dropped connection', async () => {
    answer = (req, n) => (n === 1 ? 'destroy' : vectorsFor(req.body.input));
    expect(await make().embed(['t1'])).toHaveLength(1);
    expect(seen).toHaveLength(2);
  });

  it('fails a 400 at once with a PermanentError carrying the server reason', async () => {
    answer = () => ({ status: 400, body: { error: { message: "This model's maximum context length is 8192 tokens" } } });
    const err = await make().embed(['t1']).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PermanentError);
    expect((err as Error).name).toBe('PermanentError');
    expect((err as Error).message).toMatch(/permanently refused/);
    expect((err as Error).message).toMatch(/400/);
    expect((err as Error).message).toMatch(/maximum context length/);
    expect(seen).toHaveLength(1);
  });

  it('gives up on 500 forever with a RetryableError after maxRetries retries', async () => {
    answer = () => ({ status: 500, body: 'internal error' });
    const err = await make({ maxRetries: 3 }).embed(['t1']).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RetryableError);
    expect((err as Error).message).toMatch(/500.*gave up after 4 attempts/s);
    expect(seen).toHaveLength(4);
  });

  it('gives up on an unreachable server with a RetryableError', async () => {
    // A port that was free a moment ago: connection refused on loopback.
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const port = (probe.address() as AddressInfo).port;
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    const err = await make({ baseUrl: `http://127.0.0.1:${port}/v1`, maxRetries: 2 }).embed(['t1']).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RetryableError);
    expect((err as Error).message).toMatch(/unreachable.*ECONNREFUSED.*gave up after 3 attempts/s);
  });

  it('does not sit on a Retry-After longer than maxBackoffMs: RetryableError carrying the wait', async () => {
    answer = () => ({ status: 429, headers: { 'retry-after': '120' }, body: 'quota' });
    const started = performance.now();
    const err = await make().embed(['t1']).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RetryableError);
    expect((err as RetryableError).retryAfterMs).toBe(120_000);
    expect(performance.now() - started).toBeLessThan(1_000);
    expect(seen).toHaveLength(1);
  });

  it('fails with a clear error naming both dimensions when the model returns another dim', async () => {
    answer = (req) => vectorsFor(req.body.input, 16);
    const err = await make().embed(['t1']).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(EmbeddingDimensionError);
    expect((err as Error).message).toMatch(/16-dimensional.*configured dim is 8.*EMBEDDING_DIM=16/s);
  });

  it('rejects a 200 whose data does not match the inputs as retryable', async () => {
    answer = () => ({ status: 200, body: { data: [{ index: 0, embedding: Array(DIM).fill(1) }] } });
    await expect(make().embed(['a', 'b'])).rejects.toThrow(RetryableError);
    answer = () => ({ status: 200, body: '<html>proxy</html>' });
    await expect(make().embed(['a'])).rejects.toThrow(/not JSON/);
  });

  it('spaces requests by requestsPerSecond', async () => {
    const texts = ['t0', 't1', 't2', 't3', 't4'];
    const started = performance.now();
    await make({ batchSize: 1, requestsPerSecond: 10 }).embed(texts);
    expect(seen).toHaveLength(5);
    // 10 rps with a bucket of 1: request k cannot leave before k × 100 ms (a few ms of timer
    // slack allowed). Measured from the start rather than between arrivals, which a busy
    // machine can bunch up after the client has waited correctly.
    seen.forEach((s, k) => expect(s.at - started).toBeGreaterThanOrEqual(k * 100 - 5));
    const gaps = seen.slice(1).map((s, i) => s.at - seen[i]!.at);
    console.log(`requestsPerSecond 10: gaps between requests ${gaps.map((g) => g.toFixed(0)).join(', ')} ms`);
  });
});

describe('localRateLimiter', () => {
  it('spaces acquisitions at 1/rps and serves callers in order', async () => {
    const limiter = localRateLimiter(20);
    const order: number[] = [];
    const times: number[] = [];
    const started = performance.now();
    await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        limiter.acquire(1).then(() => {
          order.push(i);
          times.push(performance.now() - started);
        }),
      ),
    );
    expect(order).toEqual([0, 1, 2, 3, 4, 5]);
    // The first is free (a full bucket of 1), then one every 50 ms: the i-th not before i × 50.
    times.forEach((t, i) => expect(t).toBeGreaterThanOrEqual(i * 50 - 3));
    console.log(`localRateLimiter(20): acquired at ${times.map((t) => t.toFixed(0)).join(', ')} ms`);
  });

  it('lets a burst through, then holds the sustained rate, also for n > burst', async () => {
    const limiter = localRateLimiter(50, 3);
    const started = performance.now();
    for (let i = 0; i < 3; i++) await limiter.acquire(1);
    expect(performance.now() - started).toBeLessThan(20);
    // 10 units from an empty bucket: granted once 3 (the burst) are saved, leaving a debt of 7;
    // the next caller waits for 8 units at 50/s, 160 ms.
    await limiter.acquire(10);
    const afterBig = performance.now();
    await limiter.acquire(1);
    expect(performance.now() - afterBig).toBeGreaterThanOrEqual(155);
  });

  it('rejects a nonsensical rate', () => {
    expect(() => localRateLimiter(0)).toThrow(RangeError);
    expect(() => localRateLimiter(Number.NaN)).toThrow(RangeError);
  });
});
