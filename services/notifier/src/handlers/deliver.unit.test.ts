import { describe, expect, it } from 'vitest';
import type { KeyLifetime, Webhook, WebhookDelivery, WebhookDeliveryJob } from '@memstream/contracts';
import { PermanentError } from '@memstream/kit';
import { deliver, type SendResult } from './deliver.js';
import { verify } from './signing.js';

const hook: Webhook = {
  id: 'wh_1',
  url: 'https://example.com/hook',
  containerTags: [],
  events: ['done'],
  secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
  description: null,
  createdAt: '2026-01-01T00:00:00.000Z',
  createdBy: null,
};
const job: WebhookDeliveryJob = {
  webhookId: 'wh_1',
  enqueuedAt: '2026-01-01T00:00:01.000Z',
  event: { id: 'evt1', type: 'document.done', documentId: 'doc1', customId: null, containerTags: [], status: 'done', revision: 1, occurredAt: '2026-01-01T00:00:00.500Z' },
};
const policy = { maxAttempts: 3, baseMs: 1000, maxMs: 10_000 };

function ports(answer: () => Promise<SendResult>, registered: Webhook | null = hook, keys: Record<string, KeyLifetime> = {}) {
  const records: WebhookDelivery[] = [];
  const dead: WebhookDelivery[] = [];
  const sent: Array<{ url: string; headers: Record<string, string>; body: string }> = [];
  return {
    records,
    dead,
    sent,
    ports: {
      webhook: async () => registered,
      key: async (id: string) => keys[id] ?? null,
      send: async (r: { url: string; headers: Record<string, string>; body: string }) => {
        sent.push(r);
        return answer();
      },
      record: async (d: WebhookDelivery) => void records.push(d),
      deadLetter: async (_j: WebhookDeliveryJob, d: WebhookDelivery) => void dead.push(d),
      now: () => new Date('2026-01-01T00:00:02.000Z'),
    },
  };
}

describe('one delivery attempt', () => {
  it("delivers nothing for a scoped key's webhook once the key is revoked or expired (queued deliveries included)", async () => {
    const scoped = { ...hook, createdBy: 'k1' };
    const live = ports(async () => ({ status: 200, body: '' }), scoped, { k1: { revokedAt: null, expiresAt: '2026-02-01T00:00:00Z' } });
    expect(await deliver(job, 1, live.ports, policy)).toMatchObject({ action: 'ack', outcome: 'delivered' });
    for (const key of [{ revokedAt: '2026-01-01T00:00:01Z', expiresAt: null }, { revokedAt: null, expiresAt: '2026-01-01T00:00:01Z' }]) {
      const w = ports(async () => ({ status: 200, body: '' }), scoped, { k1: key });
      expect(await deliver(job, 1, w.ports, policy)).toEqual({ action: 'ack', outcome: 'dropped', delivery: null });
      expect(w.sent).toHaveLength(0);
    }
    const gone = ports(async () => ({ status: 200, body: '' }), scoped);
    expect((await deliver(job, 1, gone.ports, policy)).action).toBe('ack');
    expect(gone.sent).toHaveLength(0);
  });

  it('POSTs the event signed; a 2xx is delivered', async () => {
    const w = ports(async () => ({ status: 204, body: '' }));
    const out = await deliver(job, 1, w.ports, policy);
    expect(out).toMatchObject({ action: 'ack', outcome: 'delivered' });
    const s = w.sent[0]!;
    expect(JSON.parse(s.body)).toEqual(job.event);
    expect(s.headers['webhook-id']).toBe('evt1');
    expect(s.headers['webhook-timestamp']).toBe(String(Date.parse('2026-01-01T00:00:02Z') / 1000));
    expect(verify(hook.secret, 'evt1', Number(s.headers['webhook-timestamp']), s.body, s.headers['webhook-signature']!)).toBe(true);
    expect(w.records).toEqual([
      expect.objectContaining({ id: 'evt1', webhookId: 'wh_1', status: 'delivered', attempts: 1, lastStatusCode: 204, lastError: null, deliveredAt: '2026-01-01T00:00:02.000Z' }),
    ]);
  });

  it('retries a non-2xx or a network failure with backoff, recording when the next attempt is due', async () => {
    const w = ports(async () => ({ status: 503, body: 'busy' }));
    const out = await deliver(job, 2, w.ports, policy);
    expect(out.action).toBe('retry');
    const delay = (out as { delayMs: number }).delayMs;
    expect(delay).toBeGreaterThanOrEqual(1600);
    expect(delay).toBeLessThanOrEqual(2400);
    expect(w.records[0]).toMatchObject({ status: 'retrying', attempts: 2, lastStatusCode: 503, lastError: 'HTTP 503: busy' });
    expect(Date.parse(w.records[0]!.nextRetryAt!)).toBe(Date.parse('2026-01-01T00:00:02Z') + delay);

    const down = ports(async () => {
      throw new Error('ECONNREFUSED: connect ECONNREFUSED 127.0.0.1:9');
    });
    expect((await deliver(job, 1, down.ports, policy)).action).toBe('retry');
    expect(down.records[0]).toMatchObject({ status: 'retrying', lastStatusCode: null, lastError: expect.stringMatching(/ECONNREFUSED/) });
  });

  it("waits at least as long as the receiver's Retry-After, within the cap", async () => {
    const w = ports(async () => ({ status: 429, body: '', retryAfterMs: 7_000 }));
    expect(await deliver(job, 1, w.ports, policy)).toMatchObject({ action: 'retry', delayMs: 7_000 });
    const greedy = ports(async () => ({ status: 429, body: '', retryAfterMs: 3_600_000 }));
    expect(await deliver(job, 1, greedy.ports, policy)).toMatchObject({ action: 'retry', delayMs: 10_000 });
  });

  it('on the last attempt: failed, recorded and dead-lettered', async () => {
    const w = ports(async () => ({ status: 500, body: 'oops' }));
    const out = await deliver(job, 3, w.ports, policy);
    expect(out).toMatchObject({ action: 'ack', outcome: 'failed' });
    expect(w.records[0]).toMatchObject({ status: 'failed', attempts: 3, nextRetryAt: null, lastError: 'HTTP 500: oops (after 3 attempts)' });
    expect(w.dead).toEqual(w.records);
  });

  it('a refused address fails at once; a deleted webhook drops the delivery', async () => {
    const w = ports(async () => {
      throw new PermanentError('refused to deliver to 10.0.0.1');
    });
    expect(await deliver(job, 1, w.ports, policy)).toMatchObject({ action: 'ack', outcome: 'failed' });
    expect(w.records[0]).toMatchObject({ status: 'failed', attempts: 1 });
    const gone = ports(async () => ({ status: 200, body: '' }), null);
    expect(await deliver(job, 1, gone.ports, policy)).toEqual({ action: 'ack', outcome: 'dropped', delivery: null });
    expect(gone.sent).toHaveLength(0);
  });
});
