import { storageReplicas } from '@memstream/kit';
import { Kvm, type KV } from '@nats-io/kv';
import type { Bus } from '@memstream/bus';
import {
  OutboundEvent,
  STREAM_LIFECYCLE,
  STREAM_WEBHOOK_DELIVERIES,
  WEBHOOKS_BUCKET,
  WEBHOOK_DELIVERIES_BUCKET,
  WEBHOOK_DELIVERY_RECORD_TTL_MS,
  Webhook,
  WebhookDelivery,
  webhookDeliverySubject,
} from '@memstream/contracts';
import type { WebhookStore } from '../handlers/webhooks.js';
import type { LifecycleSource } from '../http/events.js';

const dec = new TextDecoder();

/** The notifier's buckets (same names and settings: whichever process starts first creates them). */
async function buckets(bus: Bus, replicas: number): Promise<{ webhooks: KV; deliveries: KV }> {
  const kvm = new Kvm(bus.js);
  const [webhooks, deliveries] = await Promise.all([
    kvm.create(WEBHOOKS_BUCKET, { history: 1, replicas }),
    kvm.create(WEBHOOK_DELIVERIES_BUCKET, { history: 1, replicas, ttl: WEBHOOK_DELIVERY_RECORD_TTL_MS }),
  ]);
  return { webhooks, deliveries };
}

/**
 * Every current value of a KV bucket under `filter` (key → value), read in one pass: an ordered
 * consumer delivering the last message per subject, fetched up to the count it had when created.
 * Not kv.history()/keys(): those end only once no write is pending, and the delivery records
 * are written continuously while a receiver is down (a listing then took over 30 s).
 */
async function lastValues(bus: Bus, bucket: string, filter = '>', since?: Date): Promise<Map<string, Uint8Array>> {
  const prefix = `$KV.${bucket}.`;
  const c = await bus.js.consumers.get(`KV_${bucket}`, {
    filter_subjects: prefix + filter,
    // A history-1 bucket holds only each key's latest value: from a start time, that is the keys written since.
    ...(since ? { opt_start_time: since.toISOString() } : { deliver_policy: 'last_per_subject' as const }),
    inactive_threshold: 30_000,
  });
  const out = new Map<string, Uint8Array>();
  try {
    const pending = (await c.info(true)).num_pending;
    if (pending === 0) return out;
    for await (const m of await c.fetch({ max_messages: pending, expires: 10_000 })) {
      const key = m.subject.slice(prefix.length);
      const op = m.headers?.get('KV-Operation');
      if (op === 'DEL' || op === 'PURGE') out.delete(key);
      else out.set(key, m.data);
    }
    return out;
  } finally {
    await c.delete().catch(() => false);
  }
}

/** Registrations in KV; deleting one also purges its queued deliveries (subject hook.<id>) and their records. */
export async function kvWebhookStore(bus: Bus, replicas = storageReplicas()): Promise<WebhookStore> {
  const { webhooks, deliveries } = await buckets(bus, replicas);
  return {
    async put(hook) {
      await webhooks.put(hook.id, JSON.stringify(Webhook.parse(hook)));
    },
    async get(id) {
      // Webhook ids are wh_ + base62: anything else is no key of ours (and may not even be a valid KV key).
      if (!/^wh_[A-Za-z0-9]{1,64}$/.test(id)) return null;
      const e = await webhooks.get(id);
      return e && e.operation === 'PUT' ? Webhook.parse(JSON.parse(e.string())) : null;
    },
    async list() {
      return [...(await lastValues(bus, WEBHOOKS_BUCKET)).values()].flatMap((v) => {
        const r = Webhook.safeParse(JSON.parse(dec.decode(v)));
        return r.success ? [r.data] : [];
      });
    },
    async delete(id) {
      await webhooks.delete(id);
      await bus.jsm.streams.purge(STREAM_WEBHOOK_DELIVERIES, { filter: webhookDeliverySubject(id) });
      for (const key of (await lastValues(bus, WEBHOOK_DELIVERIES_BUCKET, `${id}.>`)).keys()) await deliveries.purge(key);
    },
    async deliveries(webhookId, since) {
      return [...(await lastValues(bus, WEBHOOK_DELIVERIES_BUCKET, `${webhookId}.>`, since)).values()].flatMap((v) => {
        const r = WebhookDelivery.safeParse(JSON.parse(dec.decode(v)));
        return r.success ? [r.data] : [];
      });
    },
  };
}

/**
 * LIFECYCLE through an ordered consumer (server-side, in memory, no acks): from now, or from just
 * after a sequence the client saw (Last-Event-ID). Closing deletes the consumer at once rather
 * than leaving it to expire.
 */
export function jetstreamLifecycleSource(bus: Bus): LifecycleSource {
  return {
    async open(from) {
      // "From now" is a start sequence too, not DeliverPolicy.New: the client library recreates an
      // ordered consumer after a reconnect from its cursor, and with New and nothing delivered yet
      // that cursor would be 0, replaying the whole stream.
      const afterSeq = from.afterSeq ?? (await bus.jsm.streams.info(STREAM_LIFECYCLE)).state.last_seq;
      const c = await bus.js.consumers.get(STREAM_LIFECYCLE, {
        filter_subjects: 'lifecycle.>',
        opt_start_seq: afterSeq + 1,
        // A client that went away without closing: its consumer goes after a minute.
        inactive_threshold: 60_000,
      });
      const messages = await c.consume({ max_messages: 256 });
      return {
        async *[Symbol.asyncIterator]() {
          for await (const m of messages) {
            const r = OutboundEvent.safeParse(JSON.parse(dec.decode(m.data)));
            if (r.success) yield { seq: m.seq, event: r.data };
          }
        },
        async close() {
          messages.stop();
          await c.delete().catch(() => false);
        },
      };
    },
  };
}
