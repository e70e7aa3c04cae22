import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Kvm } from '@nats-io/kv';
import { startNatsServer, type NatsServerHandle } from '@memstream/cli';
import { connectBus, ensureTopology, type Bus } from '@memstream/bus';
import {
  STREAM_LIFECYCLE,
  STREAM_WEBHOOK_DELIVERIES,
  WEBHOOK_DELIVERIES_BUCKET,
  lifecycleSubject,
  webhookDeliverySubject,
  type LifecycleEvent,
  type Webhook,
  type WebhookDelivery,
} from '@memstream/contracts';
import { createLogger } from '@memstream/kit';
import { jetstreamLifecycleSource, kvWebhookStore } from './webhooks.js';

/** The gateway's webhook adapters against a real nats-server. */
describe('webhook store and lifecycle source over JetStream', () => {
  let dir: string;
  let nats: NatsServerHandle;
  let bus: Bus;
  const enc = new TextEncoder();

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'memstream-webhooks-'));
    nats = await startNatsServer({ storeDir: dir });
    bus = await connectBus({ url: nats.url, name: 'webhooks-int', log: createLogger('test', { level: 'silent' }) });
    await ensureTopology(bus.jsm);
  });
  afterAll(async () => {
    await bus?.close();
    await nats?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const hook = (id: string): Webhook => ({
    id,
    url: 'https://example.com/',
    containerTags: [],
    events: ['done'],
    secret: 'whsec_' + Buffer.alloc(32, 1).toString('base64'),
    description: null,
    createdAt: new Date().toISOString(),
    createdBy: null,
  });
  const record = (webhookId: string, id: string, attempts: number): WebhookDelivery => ({
    id,
    webhookId,
    type: 'document.done',
    documentId: 'doc1',
    status: 'retrying',
    attempts,
    lastStatusCode: 503,
    lastError: 'HTTP 503',
    nextRetryAt: new Date().toISOString(),
    enqueuedAt: new Date().toISOString(),
    lastAttemptAt: new Date().toISOString(),
    deliveredAt: null,
  });

  it('stores, lists and deletes registrations; a deletion takes its queued deliveries and records along', async () => {
    const store = await kvWebhookStore(bus);
    await store.put(hook('wh_a'));
    await store.put(hook('wh_b'));
    expect((await store.list()).map((h) => h.id).sort()).toEqual(['wh_a', 'wh_b']);
    expect((await store.get('wh_a'))?.secret).toMatch(/^whsec_/);
    expect(await store.get('wh_nope')).toBeNull();
    expect(await store.get('not a webhook id!')).toBeNull();

    const kv = await new Kvm(bus.js).open(WEBHOOK_DELIVERIES_BUCKET);
    await kv.put('wh_a.e1', JSON.stringify(record('wh_a', 'e1', 1)));
    await kv.put('wh_b.e1', JSON.stringify(record('wh_b', 'e1', 1)));
    await bus.js.publish(webhookDeliverySubject('wh_a'), enc.encode('{}'), { msgID: 'q1' });
    await store.delete('wh_a');
    expect((await store.list()).map((h) => h.id)).toEqual(['wh_b']);
    expect(await store.get('wh_a')).toBeNull();
    expect(await store.deliveries('wh_a', new Date(0))).toEqual([]);
    expect((await store.deliveries('wh_b', new Date(0))).map((d) => d.id)).toEqual(['e1']);
    const queued = await bus.jsm.streams.getMessage(STREAM_WEBHOOK_DELIVERIES, { last_by_subj: webhookDeliverySubject('wh_a') }).catch(() => null);
    expect(queued).toBeNull();
  });

  it('lists the latest state of each delivery while the records keep being written', async () => {
    const store = await kvWebhookStore(bus);
    const kv = await new Kvm(bus.js).open(WEBHOOK_DELIVERIES_BUCKET);
    for (const e of ['x1', 'x2', 'x3']) await kv.put(`wh_busy.${e}`, JSON.stringify(record('wh_busy', e, 1)));
    // A receiver that is down: every record rewritten again and again, as the notifier does.
    let writing = true;
    let n = 1;
    const writer = (async () => {
      while (writing) {
        n++;
        for (const e of ['x1', 'x2', 'x3']) await kv.put(`wh_busy.${e}`, JSON.stringify(record('wh_busy', e, n)));
      }
    })();
    try {
      for (let i = 0; i < 3; i++) {
        const got = await store.deliveries('wh_busy', new Date(0));
        expect(got.map((d) => d.id).sort()).toEqual(['x1', 'x2', 'x3']);
        expect(got.every((d) => d.attempts >= 1)).toBe(true);
      }
      // From a start time: only what was written since.
      expect(await store.deliveries('wh_busy', new Date(Date.now() + 60_000))).toEqual([]);
    } finally {
      writing = false;
      await writer;
    }
  });

  it('streams LIFECYCLE from now or after a sequence, and removes its consumer on close', async () => {
    const source = jetstreamLifecycleSource(bus);
    const event = (id: string): LifecycleEvent => ({
      id,
      type: 'document.queued',
      documentId: 'd1',
      customId: null,
      containerTags: [],
      status: 'queued',
      revision: 1,
      occurredAt: new Date().toISOString(),
    });
    const publish = async (id: string) => (await bus.js.publish(lifecycleSubject('d1'), enc.encode(JSON.stringify(event(id))), { msgID: id })).seq;
    const before = await publish('old');
    const live = await source.open({});
    const s1 = await publish('new1');
    await publish('new2');
    const seen: Array<[number, string]> = [];
    for await (const { seq, event: e } of live) {
      seen.push([seq, e.id]);
      if (seen.length === 2) break;
    }
    expect(seen).toEqual([
      [s1, 'new1'],
      [s1 + 1, 'new2'],
    ]);
    await live.close();

    const resumed = await source.open({ afterSeq: before });
    const again: string[] = [];
    for await (const { event: e } of resumed) {
      again.push(e.id);
      if (again.length === 2) break;
    }
    expect(again).toEqual(['new1', 'new2']);
    await resumed.close();
    expect((await bus.jsm.streams.info(STREAM_LIFECYCLE)).state.consumer_count).toBe(0);
  });
});
