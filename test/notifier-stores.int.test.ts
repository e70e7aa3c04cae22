import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startNatsServer, type NatsServerHandle } from '@memstream/cli';
import { connectBus, ensureTopology, type Bus } from '@memstream/bus';
import type { Webhook } from '@memstream/contracts';
import { createLogger } from '@memstream/kit';
import { kvDocNotes, openBuckets, watchWebhooks } from '../services/notifier/src/adapters/stores.js';

/** The notifier's KV adapters against a real nats-server. */
describe('notifier stores over NATS KV', () => {
  let dir: string;
  let nats: NatsServerHandle;
  let bus: Bus;
  const log = createLogger('test', { level: 'silent' });

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'memstream-notifier-'));
    nats = await startNatsServer({ storeDir: dir });
    bus = await connectBus({ url: nats.url, name: 'notifier-int', log });
    await ensureTopology(bus.jsm);
  });
  afterAll(async () => {
    await bus?.close();
    await nats?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const hook = (id: string, url = 'https://example.com/'): Webhook => ({
    id,
    url,
    containerTags: [],
    events: ['done'],
    secret: 'whsec_' + Buffer.alloc(32, 2).toString('base64'),
    description: null,
    createdAt: new Date().toISOString(),
    createdBy: null,
  });

  async function until(check: () => boolean): Promise<void> {
    for (let i = 0; i < 200 && !check(); i++) await new Promise((r) => setTimeout(r, 25));
    expect(check()).toBe(true);
  }

  it('the registry loads what exists and follows puts and deletes', async () => {
    const { webhooks } = await openBuckets(bus);
    await webhooks.put('wh_1', JSON.stringify(hook('wh_1')));
    await webhooks.put('wh_bad', '{"not":"a webhook"}');
    const registry = await watchWebhooks(webhooks, log);
    try {
      expect(registry.list().map((h) => h.id)).toEqual(['wh_1']);
      await webhooks.put('wh_2', JSON.stringify(hook('wh_2')));
      await until(() => registry.list().length === 2);
      await webhooks.put('wh_1', JSON.stringify(hook('wh_1', 'https://example.org/new')));
      await until(() => registry.list().find((h) => h.id === 'wh_1')?.url === 'https://example.org/new');
      await webhooks.delete('wh_2');
      await until(() => registry.list().length === 1);
      expect(await registry.get('wh_2')).toBeNull();
      // Not seen by the watch yet (or ever): read from the bucket.
      expect(await registry.get('wh_missing')).toBeNull();
    } finally {
      registry.stop();
    }
  });

  it('document notes merge concurrent updates without losing one', async () => {
    const { docs } = await openBuckets(bus);
    const notes = kvDocNotes(docs);
    await Promise.all([
      notes.note('d1', { customId: 'c1', containerTags: ['a'], tagsVersion: 0, revision: 1 }),
      notes.note('d1', { containerTags: ['b'], tagsVersion: 3 }),
      notes.note('d1', { revision: 2 }),
    ]);
    expect(await notes.get('d1')).toEqual({ customId: 'c1', containerTags: ['b'], tagsVersion: 3, revision: 2 });
    await notes.forget('d1');
    expect(await notes.get('d1')).toBeNull();
  });

  it('notes read from the cache are at most cacheMs old, and a write from a stale cache loses nothing', async () => {
    const { docs } = await openBuckets(bus);
    let t = 0;
    const a = kvDocNotes(docs, { cacheMs: 1_000, now: () => t });
    const b = kvDocNotes(docs, { cacheMs: 1_000, now: () => t });
    await a.note('d2', { customId: 'c2', containerTags: ['a'], tagsVersion: 0, revision: 1 });
    // Another replica changes the tags: A's cached note is old until cacheMs has passed.
    await b.note('d2', { containerTags: ['b'], tagsVersion: 1 });
    expect((await a.get('d2'))?.containerTags).toEqual(['a']);
    // A write from A's old copy fails its KV revision check, reads again and merges: B's tags stay.
    await a.note('d2', { revision: 2 });
    expect(await kvDocNotes(docs, { cacheMs: 0 }).get('d2')).toEqual({ customId: 'c2', containerTags: ['b'], tagsVersion: 1, revision: 2 });
    expect(await a.get('d2')).toEqual({ customId: 'c2', containerTags: ['b'], tagsVersion: 1, revision: 2 });
    await b.note('d2', { containerTags: ['c'], tagsVersion: 2 });
    t += 1_000;
    expect((await a.get('d2'))?.containerTags).toEqual(['c']);
  });
});
