import { describe, expect, it } from 'vitest';
import { ZodError } from 'zod';
import type { Webhook, WebhookDelivery } from '@memstream/contracts';
import { AppError, NotFoundError, PermissionError, ValidationError } from '@memstream/kit';
import { WEBHOOKS_PER_KEY, WEBHOOKS_PER_TAG, createWebhook, deleteWebhook, getWebhook, listDeliveries, listWebhooks, type Caller, type WebhookPorts, type WebhookStore } from './webhooks.js';

/** The store port in memory. */
function memoryStore(): WebhookStore & { hooks: Map<string, Webhook>; records: WebhookDelivery[] } {
  const hooks = new Map<string, Webhook>();
  const records: WebhookDelivery[] = [];
  return {
    hooks,
    records,
    put: async (h) => void hooks.set(h.id, h),
    get: async (id) => hooks.get(id) ?? null,
    list: async () => [...hooks.values()],
    delete: async (id) => void hooks.delete(id),
    deliveries: async (id) => records.filter((r) => r.webhookId === id),
  };
}

const admin: Caller = { kind: 'admin' };
const teamKey: Caller = { kind: 'scoped', keyId: 'k1', containerTags: ['team', 'shared'] };

function setup(allowPrivate = false) {
  const store = memoryStore();
  const ports: WebhookPorts = { store, now: () => new Date('2026-01-01T00:00:00Z'), allowPrivate };
  return { store, ports };
}

describe('webhook registrations', () => {
  it('creates a global webhook for every transition with a generated secret', async () => {
    const { ports } = setup();
    const h = await createWebhook(ports, admin, { url: 'https://hooks.example.com/memstream' });
    expect(h).toMatchObject({ url: 'https://hooks.example.com/memstream', containerTags: [], createdBy: null, createdAt: '2026-01-01T00:00:00.000Z' });
    expect(h.events).toEqual(['queued', 'extracting', 'chunking', 'embedding', 'done', 'failed', 'deleted']);
    expect(h.id).toMatch(/^wh_/);
    expect(h.secret).toMatch(/^whsec_/);
    const listed = await listWebhooks(ports, admin);
    expect(listed.webhooks).toHaveLength(1);
    expect(listed.webhooks[0]).not.toHaveProperty('secret');
  });

  it('a scoped key holds at most WEBHOOKS_PER_KEY webhooks: the next is a 429; a key of other tags is not affected', async () => {
    const { ports } = setup();
    for (let i = 0; i < WEBHOOKS_PER_KEY; i++) await createWebhook(ports, teamKey, { url: `https://hooks.example.com/${i}` });
    const e = await createWebhook(ports, teamKey, { url: 'https://hooks.example.com/one-more' }).then(() => 'accepted', (err: unknown) => err);
    expect(e).toBeInstanceOf(AppError);
    expect((e as AppError).httpStatus).toBe(429);
    expect((e as AppError).details).toMatch(/at most 25/);
    // (A key of the same tags would meet the per-tag cap: next case.)
    const other: Caller = { kind: 'scoped', keyId: 'k2', containerTags: ['elsewhere'] };
    expect((await createWebhook(ports, other, { url: 'https://hooks.example.com/other' })).createdBy).toBe('k2');
  });

  it('at most WEBHOOKS_PER_TAG webhooks of scoped keys follow one tag, whichever keys made them: the next is a 429 naming the tag', async () => {
    const { ports } = setup();
    // Five keys of one tag, five webhooks each: each key is within its own cap, the tag is full.
    const keys = Array.from({ length: 5 }, (_, k): Caller => ({ kind: 'scoped', keyId: `tk${k}`, containerTags: ['crowded', `own${k}`] }));
    for (const key of keys) for (let i = 0; i < WEBHOOKS_PER_TAG / 5; i++) await createWebhook(ports, key, { url: `https://hooks.example.com/${key.kind === 'scoped' ? key.keyId : ''}/${i}`, containerTags: ['crowded'] });
    const fresh: Caller = { kind: 'scoped', keyId: 'tk-new', containerTags: ['crowded', 'quiet'] };
    for (const body of [{ url: 'https://hooks.example.com/late', containerTags: ['crowded'] }, { url: 'https://hooks.example.com/late' }, { url: 'https://hooks.example.com/late', containerTags: ['quiet', 'crowded'] }]) {
      const e = await createWebhook(ports, fresh, body).then(() => 'accepted', (err: unknown) => err);
      expect(e, JSON.stringify(body)).toBeInstanceOf(AppError);
      expect((e as AppError).httpStatus).toBe(429);
      expect((e as AppError).message).toBe('Too many webhooks');
      expect((e as AppError).details).toMatch(/container tag "crowded" already has 25 webhooks .*at most 25 per tag/);
    }
    // Another tag of the same key, and the admin key, are not held back by it.
    expect((await createWebhook(ports, fresh, { url: 'https://hooks.example.com/late', containerTags: ['quiet'] })).createdBy).toBe('tk-new');
    expect((await createWebhook(ports, admin, { url: 'https://hooks.example.com/admin', containerTags: ['crowded'] })).createdBy).toBeNull();
    // Deleting one makes room.
    const one = (await listWebhooks(ports, keys[0]!)).webhooks.find((h) => h.containerTags.includes('crowded'))!;
    await deleteWebhook(ports, keys[0]!, one.id);
    expect((await createWebhook(ports, fresh, { url: 'https://hooks.example.com/late', containerTags: ['crowded'] })).containerTags).toEqual(['crowded']);
  });

  it('the same URL for the same tags from the same key is a 409 naming the first; other tags or another key are separate', async () => {
    const { ports } = setup();
    const first = await createWebhook(ports, teamKey, { url: 'https://hooks.example.com/x', containerTags: ['team'] });
    for (const url of ['https://hooks.example.com/x', 'https://HOOKS.example.com:443/x']) {
      const e = await createWebhook(ports, teamKey, { url, containerTags: ['team'], events: ['done'] }).then(() => 'accepted', (err: unknown) => err);
      expect(e).toBeInstanceOf(AppError);
      expect((e as AppError).httpStatus).toBe(409);
      expect((e as AppError).details).toContain(first.id);
    }
    expect((await createWebhook(ports, teamKey, { url: 'https://hooks.example.com/x', containerTags: ['shared'] })).id).not.toBe(first.id);
    const other: Caller = { kind: 'scoped', keyId: 'k2', containerTags: ['team'] };
    expect((await createWebhook(ports, other, { url: 'https://hooks.example.com/x' })).createdBy).toBe('k2');
  });

  it("lists a revoked or expired key's webhooks as disabled, saying why; the admin's never", async () => {
    const { ports } = setup();
    const keys: Record<string, { revokedAt: string | null; expiresAt: string | null }> = {
      k1: { revokedAt: null, expiresAt: null },
      k2: { revokedAt: null, expiresAt: '2025-12-31T00:00:00Z' },
    };
    ports.key = async (id) => keys[id] ?? null;
    const mine = await createWebhook(ports, teamKey, { url: 'https://a.example/' });
    const expired = await createWebhook(ports, { kind: 'scoped', keyId: 'k2', containerTags: ['team'] }, { url: 'https://b.example/' });
    const global = await createWebhook(ports, admin, { url: 'https://c.example/' });
    const byId = async () => Object.fromEntries((await listWebhooks(ports, admin)).webhooks.map((w) => [w.id, w.disabled]));
    expect(await byId()).toEqual({ [mine.id]: null, [expired.id]: expect.objectContaining({ reason: 'key_expired', since: '2025-12-31T00:00:00Z' }), [global.id]: null });
    keys.k1 = { revokedAt: '2026-01-01T00:00:00Z', expiresAt: null };
    expect((await getWebhook(ports, teamKey, mine.id)).disabled).toEqual({ reason: 'key_revoked', since: '2026-01-01T00:00:00Z', message: expect.stringMatching(/revoked/) });
  });

  it('keeps a chosen secret and orders chosen events', async () => {
    const { ports } = setup();
    const secret = 'whsec_' + Buffer.alloc(24, 1).toString('base64');
    const h = await createWebhook(ports, admin, { url: 'http://hooks.example.com/', events: ['failed', 'done'], secret });
    expect(h.secret).toBe(secret);
    expect(h.events).toEqual(['done', 'failed']);
  });

  it('refuses bad input with the field named', async () => {
    const { ports } = setup();
    const bad = async (body: unknown) => createWebhook(ports, admin, body).then(() => 'accepted', (e: unknown) => e);
    for (const body of [{ url: 'file:///etc/passwd' }, { url: 'https://x.example/', events: [] }, { url: 'https://x.example/', extra: 1 }, { url: 42 }]) {
      expect(await bad(body)).toBeInstanceOf(ZodError);
    }
    for (const url of ['http://127.0.0.1:8080/', 'http://localhost/hook', 'http://localhost./hook', 'http://a.localhost../hook', 'http://[::1]/', 'http://169.254.169.254/', 'http://10.1.2.3/']) {
      const e = await bad({ url });
      expect(e).toBeInstanceOf(ValidationError);
      expect((e as ValidationError).details).toMatch(/^url: .*MEMSTREAM_WEBHOOK_ALLOW_PRIVATE/);
    }
    const open = setup(true);
    expect((await createWebhook(open.ports, admin, { url: 'http://127.0.0.1:8080/' })).url).toBe('http://127.0.0.1:8080/');
  });

  it('confines a scoped key to its own tags: no global webhooks, no others, nothing of others visible', async () => {
    const { ports } = setup();
    const global = await createWebhook(ports, admin, { url: 'https://a.example/' });
    const others = await createWebhook(ports, admin, { url: 'https://b.example/', containerTags: ['elsewhere'] });
    const own = await createWebhook(ports, teamKey, { url: 'https://c.example/' });
    expect(own).toMatchObject({ containerTags: ['team', 'shared'], createdBy: 'k1' });
    const narrow = await createWebhook(ports, teamKey, { url: 'https://d.example/', containerTags: ['team'] });
    await expect(createWebhook(ports, teamKey, { url: 'https://e.example/', containerTags: ['team', 'elsewhere'] })).rejects.toThrow(PermissionError);
    expect((await listWebhooks(ports, teamKey)).webhooks.map((w) => w.id).sort()).toEqual([own.id, narrow.id].sort());
    expect((await listWebhooks(ports, admin)).webhooks).toHaveLength(4);
    await expect(deleteWebhook(ports, teamKey, global.id)).rejects.toThrow(NotFoundError);
    await expect(listDeliveries(ports, teamKey, others.id, {})).rejects.toThrow(NotFoundError);
    await deleteWebhook(ports, teamKey, narrow.id);
    expect((await listWebhooks(ports, admin)).webhooks).toHaveLength(3);
  });

  it('lists deliveries newest first, by status, with counts over all', async () => {
    const { ports, store } = setup();
    const h = await createWebhook(ports, admin, { url: 'https://a.example/' });
    const rec = (id: string, status: WebhookDelivery['status'], at: string): WebhookDelivery => ({
      id,
      webhookId: h.id,
      type: 'document.done',
      documentId: 'd',
      status,
      attempts: status === 'failed' ? 12 : 1,
      lastStatusCode: status === 'delivered' ? 200 : 500,
      lastError: status === 'delivered' ? null : 'HTTP 500',
      nextRetryAt: status === 'retrying' ? at : null,
      enqueuedAt: at,
      lastAttemptAt: at,
      deliveredAt: status === 'delivered' ? at : null,
    });
    store.records.push(rec('a', 'delivered', '2026-01-01T00:00:01Z'), rec('b', 'failed', '2026-01-01T00:00:03Z'), rec('c', 'retrying', '2026-01-01T00:00:02Z'));
    const all = await listDeliveries(ports, admin, h.id, {});
    expect(all.deliveries.map((d) => d.id)).toEqual(['b', 'c', 'a']);
    expect(all.counts).toEqual({ delivered: 1, failed: 1, retrying: 1 });
    expect((await listDeliveries(ports, admin, h.id, { status: 'failed' })).deliveries.map((d) => d.id)).toEqual(['b']);
    expect((await listDeliveries(ports, admin, h.id, { limit: '1' })).deliveries).toHaveLength(1);
    await expect(listDeliveries(ports, admin, h.id, { status: 'lost' })).rejects.toMatchObject({ details: expect.stringMatching(/^status: must be one of/) });
    await expect(listDeliveries(ports, admin, h.id, { limit: '0' })).rejects.toThrow(ValidationError);
    await expect(listDeliveries(ports, admin, 'wh_nope', {})).rejects.toThrow(NotFoundError);
    // The window: by default the last 24 hours before now (2026-01-01T00:00:00Z here).
    store.records.push(rec('old', 'failed', '2025-12-30T00:00:00Z'));
    expect((await listDeliveries(ports, admin, h.id, {})).counts.failed).toBe(1);
    expect((await listDeliveries(ports, admin, h.id, { since: '2025-12-29T00:00:00Z' })).counts.failed).toBe(2);
    await expect(listDeliveries(ports, admin, h.id, { since: 'yesterday' })).rejects.toMatchObject({ details: expect.stringMatching(/^since: /) });
  });
});
