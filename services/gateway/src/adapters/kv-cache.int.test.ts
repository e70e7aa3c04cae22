import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Kvm, type KV } from '@nats-io/kv';
import { startNatsServer, type NatsServerHandle } from '@memstream/cli';
import { connectBus, type Bus } from '@memstream/bus';
import { createLogger } from '@memstream/kit';
import { kvReadCache } from './kv-cache.js';
import { kvSettings } from './settings.js';
import { kvTagContexts } from './tag-contexts.js';

async function until(what: string, ok: () => boolean | Promise<boolean>, ms = 5000): Promise<number> {
  const t0 = performance.now();
  while (!(await ok())) {
    if (performance.now() - t0 > ms) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
  return performance.now() - t0;
}

/** Two gateway processes (two NATS connections) reading one bucket through their caches. */
describe('KV read cache', () => {
  let dir: string;
  let nats: NatsServerHandle;
  const buses: Bus[] = [];
  let kv: KV;
  const log = createLogger('kv-cache-test', { level: 'silent' });

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'memstream-kvcache-'));
    nats = await startNatsServer({ storeDir: path.join(dir, 'nats') });
    for (let i = 0; i < 2; i++) buses.push(await connectBus({ url: nats.url, name: `gateway-${i}`, log }));
    kv = await new Kvm(buses[0]!.js).create('kv-cache-test', { history: 1 });
  });
  afterAll(async () => {
    for (const b of buses) await b.close();
    await nats?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  /** A KV handle that counts its reads. */
  function counting(inner: KV): { kv: KV; reads: () => number } {
    let n = 0;
    const kvc = Object.create(inner) as KV;
    kvc.get = (k, o) => {
      n++;
      return inner.get(k, o);
    };
    return { kv: kvc, reads: () => n };
  }
  const decode = (e: { operation: string; string(): string } | null) => (e && e.operation === 'PUT' ? e.string() : null);

  it('reads the bucket once per key while the value holds, and concurrent readers share one read', async () => {
    await kv.put('a', 'one');
    const c = counting(kv);
    const cache = kvReadCache(c.kv, { decode, log, ttlMs: 60_000 });
    await new Promise((r) => setTimeout(r, 200));
    expect(await Promise.all([cache.get('a'), cache.get('a'), cache.get('a')])).toEqual(['one', 'one', 'one']);
    for (let i = 0; i < 100; i++) expect(await cache.get('a')).toBe('one');
    expect(await cache.get('absent')).toBeNull();
    expect(await cache.get('absent')).toBeNull();
    expect(c.reads()).toBe(2);
    cache.close();
  });

  it('sees a change made through another connection as soon as the watch reports it, and never one older after it', async () => {
    const other = await new Kvm(buses[1]!.js).open('kv-cache-test');
    const cache = kvReadCache(kv, { decode, log, ttlMs: 60_000 });
    await kv.put('b', 'v0');
    // Give the watch its moment to start before the value is cached.
    await new Promise((r) => setTimeout(r, 200));
    expect(await cache.get('b')).toBe('v0');
    for (let i = 1; i <= 20; i++) {
      await other.put('b', `v${i}`);
      const ms = await until(`v${i}`, async () => (await cache.get('b')) === `v${i}`);
      expect(ms).toBeLessThan(1000);
    }
    await other.delete('b');
    await until('the delete', async () => (await cache.get('b')) === null);
    cache.close();
  });

  it('serves nothing older than its bound when no watch tells it of a change', async () => {
    let t = 0;
    const cache = kvReadCache(kv, { decode, log, ttlMs: 1000, now: () => t });
    // Stop the watch at once: only the bound is left.
    cache.close();
    await kv.put('c', 'old');
    expect(await cache.get('c')).toBe('old');
    await kv.put('c', 'new');
    t = 999;
    expect(await cache.get('c')).toBe('old');
    t = 1000;
    expect(await cache.get('c')).toBe('new');
  });

  it('a write through the cache is read back at once, and a read sent before a change does not keep the older value', async () => {
    const c = counting(kv);
    const cache = kvReadCache(c.kv, { decode, log, ttlMs: 60_000 });
    // The watch's start drops what is cached: let it start first.
    await new Promise((r) => setTimeout(r, 200));
    await kv.put('d', 'first');
    const slow = cache.get('d');
    // Written through this process while the read is on its way.
    cache.put('d', 'second', await kv.put('d', 'second'));
    expect(await slow).toBe('first');
    expect(await cache.get('d')).toBe('second');
    const before = c.reads();
    // The watch's echo of that write is not taken for a change.
    await new Promise((r) => setTimeout(r, 200));
    expect(await cache.get('d')).toBe('second');
    expect(c.reads()).toBe(before);
    cache.forget('d');
    await kv.delete('d');
    expect(await cache.get('d')).toBeNull();
    cache.close();
  });

  it('tag contexts and settings: a change through one gateway process reaches the other within milliseconds', async () => {
    const [a, b] = await Promise.all(buses.map((bus) => kvTagContexts(bus, { log, cacheMs: 60_000 })));
    const [sa, sb] = await Promise.all(buses.map((bus) => kvSettings(bus, { log, cacheMs: 60_000 })));
    await new Promise((r) => setTimeout(r, 200));
    expect(await b!.get('tenant/ä')).toBeNull();
    expect(await sb!.get('tags:["x"]')).toEqual({});
    await a!.set('tenant/ä', 'a legal team');
    expect(await a!.get('tenant/ä')).toBe('a legal team');
    await sa!.update('tags:["x"]', (s) => ({ ...s, chunkSize: 512 }));
    expect(await sa!.get('tags:["x"]')).toEqual({ chunkSize: 512 });
    const ms = await until('the other process', async () => (await b!.get('tenant/ä')) === 'a legal team' && (await sb!.get('tags:["x"]')).chunkSize === 512);
    console.log(`a change through one process reached the other's cache in ${ms.toFixed(0)} ms`);
    await a!.delete('tenant/ä');
    expect(await a!.get('tenant/ä')).toBeNull();
    await until('the delete on the other process', async () => (await b!.get('tenant/ä')) === null);
    for (const x of [a, b, sa, sb]) x!.close();
  });
});
