import { mkdtempSync, rmSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startNatsServer, type NatsServerHandle } from '@memstream/cli';
import { blobStore, connectBus, ensureTopology, type Bus } from '@memstream/bus';
import { createLogger } from '@memstream/kit';
import { SqliteDocumentViews } from '@memstream/views';
import { createApp } from '../app.js';
import { jetstreamEventLog } from '../adapters/event-log.js';
import { kvKeyStore, type KvKeyStore } from '../adapters/keys.js';
import { kvKeyRateLimiter } from '../adapters/rate-limit.js';
import { kvTagContexts } from '../adapters/tag-contexts.js';
import { deriveKeySecret } from '../handlers/keys.js';

const ADMIN = 'ms_admin_key_for_the_load_test';

function percentile(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? 0;
}

/**
 * A bounded load test on loopback: two gateway replicas sharing the key buckets; one key far over
 * its limit, three others well within theirs, all at once, every request alternating replicas.
 */
describe('rate limits under load, two replicas', () => {
  let dir: string;
  let nats: NatsServerHandle;
  let views: SqliteDocumentViews;
  const replicas: Array<{ url: string; bus: Bus; store: KvKeyStore; server: Server }> = [];
  const log = createLogger('load-test', { level: 'silent' });

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'memstream-keyload-'));
    nats = await startNatsServer({ storeDir: path.join(dir, 'nats') });
    views = SqliteDocumentViews.open(path.join(dir, 'views.sqlite'));
    for (let i = 0; i < 2; i++) {
      const bus = await connectBus({ url: nats.url, name: `load-${i}`, log });
      await ensureTopology(bus.jsm, { ackWaitMs: 2_000 });
      const blobs = blobStore(bus);
      const ports = { views, index: { deleteDocument: async () => 0 }, blobs, events: jetstreamEventLog(bus), tagContexts: await kvTagContexts(bus), now: () => new Date() };
      const store = await kvKeyStore(bus, { log });
      const keys = { store, secret: deriveKeySecret(ADMIN), now: () => new Date(), defaults: { rateLimitMax: 500, rateLimitTimeWindow: 60_000 } };
      const app = createApp({ ports, apiKey: ADMIN, log, auth: { keys, limiter: await kvKeyRateLimiter(bus, { log }), log } });
      const server = await new Promise<Server>((resolve, reject) => {
        const s = app.listen(0, '127.0.0.1', () => resolve(s));
        s.once('error', reject);
      });
      replicas.push({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, bus, store, server });
    }
  });
  afterAll(async () => {
    for (const r of replicas) {
      await new Promise<void>((res) => r.server.close(() => res()));
      await r.store.close();
      await r.bus.close();
    }
    await views?.close();
    await nats?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  async function createKey(body: Record<string, unknown>): Promise<string> {
    const res = await fetch(`${replicas[0]!.url}/v3/auth/scoped-key`, { method: 'POST', headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    expect(res.status).toBe(200);
    return ((await res.json()) as { key: string }).key;
  }

  it('the key over its limit gets 429s after its burst; the others all succeed', { timeout: 60_000 }, async () => {
    const BURST = 20;
    // An hour's window: the refill during the run is a small fraction of one token.
    const hot = await createKey({ containerTag: 'hot', rateLimitMax: BURST, rateLimitTimeWindow: 3_600_000 });
    const cold = await Promise.all(['cold-1', 'cold-2', 'cold-3'].map((t) => createKey({ containerTag: t, rateLimitMax: 10_000 })));

    type Sample = { key: string; status: number; ms: number; retryAfterMs: number | null };
    const samples: Sample[] = [];
    let n = 0;
    const worker = async (name: string, key: string, count: number) => {
      for (let i = 0; i < count; i++) {
        const url = replicas[n++ % 2]!.url;
        const t0 = performance.now();
        const res = await fetch(`${url}/v3/documents/list`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: '{}' });
        await res.arrayBuffer();
        const ra = res.headers.get('retry-after-ms');
        samples.push({ key: name, status: res.status, ms: performance.now() - t0, retryAfterMs: ra === null ? null : Number(ra) });
      }
    };
    const started = performance.now();
    await Promise.all([
      ...Array.from({ length: 8 }, () => worker('hot', hot, 50)),
      ...cold.flatMap((k, i) => Array.from({ length: 2 }, () => worker(`cold-${i + 1}`, k, 50))),
    ]);
    const elapsed = performance.now() - started;

    const by = (k: string) => samples.filter((s) => s.key === k);
    const hotS = by('hot');
    const hotOk = hotS.filter((s) => s.status === 200);
    const hot429 = hotS.filter((s) => s.status === 429);
    const lines = [
      `${samples.length} requests in ${elapsed.toFixed(0)} ms over 2 replicas (${((samples.length * 1000) / elapsed).toFixed(0)} requests/s, 14 concurrent clients, loopback)`,
      `hot key (burst ${BURST}, 1 h window): ${hotS.length} sent, ${hotOk.length} × 200, ${hot429.length} × 429; p50 ${percentile(hot429.map((s) => s.ms), 50).toFixed(1)} ms for a 429`,
    ];
    for (const k of ['cold-1', 'cold-2', 'cold-3']) {
      const s = by(k);
      const ok = s.filter((x) => x.status === 200).length;
      lines.push(`${k}: ${s.length} sent, ${ok} × 200 (${((100 * ok) / s.length).toFixed(1)}%), p50 ${percentile(s.map((x) => x.ms), 50).toFixed(1)} ms, p99 ${percentile(s.map((x) => x.ms), 99).toFixed(1)} ms`);
    }
    // The ceiling in the same run: the same clients and requests with the admin key, which no limit applies to.
    const base: number[] = [];
    const t1 = performance.now();
    await Promise.all(
      Array.from({ length: 14 }, async () => {
        for (let i = 0; i < 50; i++) {
          const t0 = performance.now();
          const res = await fetch(`${replicas[n++ % 2]!.url}/v3/documents/list`, { method: 'POST', headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' }, body: '{}' });
          await res.arrayBuffer();
          expect(res.status).toBe(200);
          base.push(performance.now() - t0);
        }
      }),
    );
    const baseMs = performance.now() - t1;
    lines.push(`ceiling, admin key (no limit checked): ${base.length} requests in ${baseMs.toFixed(0)} ms (${((base.length * 1000) / baseMs).toFixed(0)} requests/s), p50 ${percentile(base, 50).toFixed(1)} ms, p99 ${percentile(base, 99).toFixed(1)} ms`);
    console.log(lines.join('\n'));

    expect(hotS).toHaveLength(400);
    expect(hotOk).toHaveLength(BURST);
    expect(hot429).toHaveLength(400 - BURST);
    for (const s of hot429) expect(s.retryAfterMs).toBeGreaterThan(0);
    for (const k of ['cold-1', 'cold-2', 'cold-3']) {
      expect(by(k)).toHaveLength(100);
      expect(by(k).every((s) => s.status === 200)).toBe(true);
    }
  });
});
