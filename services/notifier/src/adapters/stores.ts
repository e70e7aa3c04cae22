import { storageReplicas } from '@memstream/kit';
import { Kvm, KvWatchInclude, type KV } from '@nats-io/kv';
import type { Bus } from '@memstream/bus';
import {
  KEYS_BUCKET,
  NOTIFIER_DOCS_BUCKET,
  type KeyLifetime,
  WEBHOOKS_BUCKET,
  WEBHOOK_DELIVERIES_BUCKET,
  WEBHOOK_DELIVERY_RECORD_TTL_MS,
  Webhook,
  type WebhookDelivery,
} from '@memstream/contracts';
import { errorMessage, type Logger } from '@memstream/kit';
import { mergeNote, type DocNote, type DocNotes } from '../handlers/transitions.js';

/** The buckets the notifier and the gateway share; `create` opens a bucket that exists. */
export async function openBuckets(bus: Bus, replicas = storageReplicas()): Promise<{ webhooks: KV; deliveries: KV; docs: KV; keys: KV }> {
  const kvm = new Kvm(bus.js);
  const [webhooks, deliveries, docs, keys] = await Promise.all([
    kvm.create(WEBHOOKS_BUCKET, { history: 1, replicas }),
    kvm.create(WEBHOOK_DELIVERIES_BUCKET, { history: 1, replicas, ttl: WEBHOOK_DELIVERY_RECORD_TTL_MS }),
    kvm.create(NOTIFIER_DOCS_BUCKET, { history: 1, replicas }),
    // The gateway's scoped keys (same settings as it creates them with): read for revocation and expiry only.
    kvm.create(KEYS_BUCKET, { history: 1, replicas }),
  ]);
  return { webhooks, deliveries, docs, keys };
}

/** Revocation and expiry of a scoped key, read from the gateway's bucket at each delivery (one KV get). */
export function kvKeyLifetimes(kv: KV): (keyId: string) => Promise<KeyLifetime | null> {
  return async (keyId) => {
    // Key ids are 20 hex digits; anything else names no key (and may not be a valid KV key).
    if (!/^[0-9a-f]{20}$/.test(keyId)) return null;
    const e = await kv.get(keyId);
    if (!e || e.operation !== 'PUT') return null;
    const r = JSON.parse(e.string()) as Partial<KeyLifetime>;
    return { revokedAt: typeof r.revokedAt === 'string' ? r.revokedAt : null, expiresAt: typeof r.expiresAt === 'string' ? r.expiresAt : null };
  };
}

/** Every registration, kept current by a KV watch: matching a transition reads no store. */
export interface WebhookRegistry {
  list(): readonly Webhook[];
  /** From the cache, else the bucket (a registration made a moment ago). */
  get(id: string): Promise<Webhook | null>;
  stop(): void;
}

export async function watchWebhooks(kv: KV, log: Logger): Promise<WebhookRegistry> {
  // Revision per key, tombstones included, so the initial load and the watch can arrive in any order.
  const known = new Map<string, { revision: number; hook: Webhook | null }>();
  let snapshot: Webhook[] = [];
  const apply = (key: string, revision: number, value: Uint8Array | null) => {
    const prev = known.get(key);
    if (prev && prev.revision >= revision) return;
    let hook: Webhook | null = null;
    if (value) {
      try {
        hook = Webhook.parse(JSON.parse(new TextDecoder().decode(value)));
      } catch (err) {
        log.error({ key, err: errorMessage(err) }, 'unreadable webhook registration: ignored');
      }
    }
    known.set(key, { revision, hook });
    snapshot = [...known.values()].flatMap((v) => (v.hook ? [v.hook] : []));
  };
  const watch = await kv.watch({ include: KvWatchInclude.UpdatesOnly });
  void (async () => {
    for await (const e of watch) apply(e.key, e.revision, e.operation === 'PUT' ? e.value : null);
  })().catch((err) => log.error({ err: errorMessage(err) }, 'webhook watch ended'));
  for await (const key of await kv.keys()) {
    const e = await kv.get(key);
    if (e) apply(key, e.revision, e.operation === 'PUT' ? e.value : null);
  }
  return {
    list: () => snapshot,
    async get(id) {
      const cached = known.get(id);
      if (cached) return cached.hook;
      const e = await kv.get(id);
      if (!e) return null;
      apply(id, e.revision, e.operation === 'PUT' ? e.value : null);
      return known.get(id)?.hook ?? null;
    },
    stop: () => watch.stop(),
  };
}

/**
 * Document notes in KV: merged with optimistic concurrency, so replicas and concurrent events do
 * not lose an update. What this process read or wrote is kept for `cacheMs`: a document's
 * transitions follow one another within seconds, and each read a note it had just written (one
 * KV get per transition, four or five per document, most of the notifier's broker traffic after
 * the deliveries themselves). Writes stay conditional on the KV revision, so a cached note that
 * another replica changed meanwhile only makes the write retry with what it wrote. A read may be
 * `cacheMs` old only where another replica changed the note (a tag change it handled): with one
 * notifier, as `./memstream up` runs it, the cache is exact.
 */
export function kvDocNotes(kv: KV, opts: { cacheMs?: number; max?: number; now?: () => number } = {}): DocNotes {
  const cacheMs = opts.cacheMs ?? 10_000;
  const max = opts.max ?? 10_000;
  const now = opts.now ?? Date.now;
  const read = (v: Uint8Array): DocNote => JSON.parse(new TextDecoder().decode(v)) as DocNote;
  /** id → the note and its KV revision (0: none in KV), as of `at`. */
  const cache = new Map<string, { note: DocNote | null; revision: number; at: number }>();
  const remember = (id: string, note: DocNote | null, revision: number) => {
    cache.delete(id);
    cache.set(id, { note, revision, at: now() });
    if (cache.size > max) cache.delete(cache.keys().next().value!);
  };
  const fresh = (id: string) => {
    const c = cache.get(id);
    return c && now() - c.at < cacheMs ? c : null;
  };
  const load = async (id: string) => {
    const e = await kv.get(id);
    const note = e && e.operation === 'PUT' ? read(e.value) : null;
    remember(id, note, e?.revision ?? 0);
    return { note, revision: e?.revision ?? 0 };
  };
  return {
    async get(id) {
      return (fresh(id) ?? (await load(id))).note;
    },
    async note(id, patch) {
      // Nothing known of the document here: most likely a new one (its submission), so try to
      // create the note first — one request instead of a read and then a write; if a note exists,
      // the create fails and the loop reads and merges.
      let cur: { note: DocNote | null; revision: number } = fresh(id) ?? { note: null, revision: 0 };
      for (let i = 0; ; i++) {
        const next = mergeNote(cur.note, patch);
        if (cur.note && JSON.stringify(cur.note) === JSON.stringify(next)) return next;
        try {
          const revision = cur.revision ? await kv.update(id, JSON.stringify(next), cur.revision) : await kv.create(id, JSON.stringify(next));
          remember(id, next, revision);
          return next;
        } catch (err) {
          // Another writer got there first (or the cached revision is old): merge again with what it wrote.
          if (i >= 5 || !/wrong last sequence|exists/i.test(errorMessage(err))) throw err;
          cur = await load(id);
        }
      }
    },
    async forget(id) {
      cache.delete(id);
      await kv.purge(id);
    },
  };
}

export function deliveryKey(webhookId: string, eventId: string): string {
  return `${webhookId}.${eventId}`;
}

/** The latest state of each delivery, under <webhookId>.<eventId>; `exists`: it was attempted (within the records' 7 days). */
export function kvDeliveryRecords(kv: KV): { put(d: WebhookDelivery): Promise<void>; exists(webhookId: string, eventId: string): Promise<boolean> } {
  return {
    async put(d) {
      await kv.put(deliveryKey(d.webhookId, d.id), JSON.stringify(d));
    },
    async exists(webhookId, eventId) {
      const e = await kv.get(deliveryKey(webhookId, eventId));
      return e !== null && e.operation === 'PUT';
    },
  };
}
