import { storageReplicas } from '@memstream/kit';
import { Kvm, type KV } from '@nats-io/kv';
import { z } from 'zod';
import type { Bus } from '@memstream/bus';
import { KEYS_BUCKET, KEY_EXPIRING_SUBJECT, type KeyExpiringNotice } from '@memstream/contracts';
import { errorMessage, type Logger } from '@memstream/kit';
import { deriveKeySecret, expiringKeys, type KeyPorts, type KeyRecord, type KeyStore } from '../handlers/keys.js';
import type { AuthOptions } from '../http/auth.js';
import { kvKeyRateLimiter } from './rate-limit.js';

export { KEYS_BUCKET };
export const KEY_NOTICES_BUCKET = 'memstream-key-notices';

/** The stored shape, checked on every read: a record that does not parse is treated as absent. */
const StoredKey = z.object({
  id: z.string(),
  name: z.string(),
  containerTags: z.array(z.string()).min(1),
  hash: z.string().regex(/^[0-9a-f]{64}$/),
  createdAt: z.string(),
  expiresAt: z.string().nullable(),
  rateLimitMax: z.number().int().positive(),
  rateLimitTimeWindow: z.number().int().positive(),
  revokedAt: z.string().nullable(),
});

export interface KvKeyStore extends KeyStore {
  close(): Promise<void>;
}

function isConflict(err: unknown): boolean {
  return /wrong last sequence|key exists/i.test(errorMessage(err));
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms).unref());

/**
 * Scoped keys in a NATS KV bucket, keyed by key id, holding only the HMAC of each key. Every
 * replica keeps a copy in memory, fed by a KV watch (an ordered consumer, which nats.js re-creates
 * after a reconnect), so a revocation through any replica reaches every other one as soon as the
 * watch delivers it. A key not (yet) in the copy, say one created a moment ago through another
 * replica, is read from the bucket.
 */
export async function kvKeyStore(bus: Bus, opts: { log: Logger; replicas?: number }): Promise<KvKeyStore> {
  const { log } = opts;
  const kv: KV = await new Kvm(bus.js).create(KEYS_BUCKET, { history: 1, replicas: opts.replicas ?? storageReplicas() });
  const cache = new Map<string, { record: KeyRecord; revision: number }>();
  const enc = (r: KeyRecord) => JSON.stringify(r);
  const dec = (bytes: string): KeyRecord | null => {
    try {
      const r = StoredKey.safeParse(JSON.parse(bytes));
      return r.success ? r.data : null;
    } catch {
      return null;
    }
  };
  const apply = (id: string, record: KeyRecord | null, revision: number) => {
    const cur = cache.get(id);
    if (cur && cur.revision >= revision) return;
    if (record) cache.set(id, { record, revision });
    else cache.delete(id);
  };

  let stopped = false;
  let iter: Awaited<ReturnType<KV['watch']>> | null = null;
  void (async () => {
    while (!stopped) {
      try {
        // The bucket's current contents first, then every change. Entries carry their revision,
        // so an older one (a restarted watch replaying) never overwrites a newer copy.
        iter = await kv.watch();
        for await (const e of iter) apply(e.key, e.operation === 'PUT' ? dec(e.string()) : null, e.revision);
      } catch (err) {
        if (!stopped) log.warn({ err: errorMessage(err) }, 'API key watch failed; restarting it');
      }
      if (!stopped) await sleep(1000);
    }
  })();

  async function read(id: string): Promise<{ record: KeyRecord; revision: number } | null> {
    const e = await kv.get(id);
    if (!e || e.operation !== 'PUT') return null;
    const record = dec(e.string());
    if (!record) return null;
    apply(id, record, e.revision);
    return { record, revision: e.revision };
  }

  return {
    async find(id) {
      const hit = cache.get(id);
      if (hit) return hit.record;
      return (await read(id))?.record ?? null;
    },
    async create(record) {
      const revision = await kv.create(record.id, enc(record));
      apply(record.id, record, revision);
    },
    async list() {
      const ids: string[] = [];
      for await (const k of await kv.keys()) ids.push(k);
      const records = (await Promise.all(ids.map(read))).flatMap((x) => (x ? [x.record] : []));
      return records.sort((a, b) => a.createdAt.localeCompare(b.createdAt) || a.id.localeCompare(b.id));
    },
    async revoke(id, at) {
      for (let attempt = 0; attempt < 10; attempt++) {
        const cur = await read(id);
        if (!cur) return null;
        if (cur.record.revokedAt !== null) return cur.record;
        const record = { ...cur.record, revokedAt: at };
        try {
          // Applied here at once: this replica refuses the key from now on, before its own watch echoes it.
          apply(id, record, await kv.update(id, enc(record), cur.revision));
          return record;
        } catch (err) {
          if (!isConflict(err)) throw err;
        }
      }
      throw new Error(`could not revoke API key ${id}: the record kept changing`);
    },
    async close() {
      stopped = true;
      iter?.stop();
    },
  };
}

/**
 * The key.expiring notices: every `everyMs`, each key that expires within `warnDays` gets one
 * notice per UTC day, whichever replica gets there first. The "once" is a marker created in a KV
 * bucket (create fails if it exists) before the notice goes out on core NATS subject
 * `keys.expiring` and to the log. The notice's `id` (key.expiring.<keyId>.<day>) is stable, so a
 * consumer that stores notices can drop a repeat by it.
 */
export async function startExpiryNotices(opts: {
  bus: Bus;
  store: KeyStore;
  warnDays: number;
  everyMs: number;
  log: Logger;
  now?: () => Date;
  replicas?: number;
}): Promise<{ check(): Promise<KeyExpiringNotice[]>; stop(): void }> {
  const { bus, store, log } = opts;
  const now = opts.now ?? (() => new Date());
  // Markers live two days: long enough to cover their day on every replica's clock.
  const markers = await new Kvm(bus.js).create(KEY_NOTICES_BUCKET, { history: 1, ttl: 2 * 24 * 60 * 60 * 1000, replicas: opts.replicas ?? storageReplicas() });
  const check = async (): Promise<KeyExpiringNotice[]> => {
    const at = now();
    const day = at.toISOString().slice(0, 10);
    const sent: KeyExpiringNotice[] = [];
    for (const { record, daysLeft } of expiringKeys(await store.list(), at, opts.warnDays)) {
      try {
        await markers.create(`${record.id}.${day}`, day);
      } catch (err) {
        if (isConflict(err)) continue;
        throw err;
      }
      const notice: KeyExpiringNotice = {
        id: `key.expiring.${record.id}.${day}`,
        type: 'key.expiring',
        keyId: record.id,
        name: record.name,
        containerTags: record.containerTags,
        expiresAt: record.expiresAt!,
        daysLeft,
        day,
        occurredAt: at.toISOString(),
      };
      bus.nc.publish(KEY_EXPIRING_SUBJECT, JSON.stringify(notice));
      log.warn({ keyId: record.id, name: record.name, containerTags: record.containerTags, expiresAt: record.expiresAt, daysLeft }, 'key.expiring: a scoped API key expires soon');
      sent.push(notice);
    }
    return sent;
  };
  const run = () =>
    check().catch((err: unknown) => {
      log.warn({ err: errorMessage(err) }, 'key expiry check failed; trying again at the next interval');
      return [];
    });
  void run();
  const timer = setInterval(() => void run(), opts.everyMs);
  timer.unref();
  return { check, stop: () => clearInterval(timer) };
}

/** The gateway's key settings (a slice of its Config). */
export interface KeyAuthSettings {
  MEMSTREAM_API_KEY: string;
  MEMSTREAM_KEY_SECRET?: string | undefined;
  MEMSTREAM_KEY_EXPIRY_WARN_DAYS: number;
  MEMSTREAM_KEY_EXPIRY_CHECK_MS: number;
  MEMSTREAM_KEY_RATE_LIMIT_MAX: number;
  MEMSTREAM_KEY_RATE_LIMIT_WINDOW_MS: number;
  MEMSTREAM_ADMIN_RATE_LIMIT?: number | undefined;
  MEMSTREAM_ADMIN_RATE_LIMIT_WINDOW_MS: number;
}

/** Scoped keys, their rate limits and the expiry notices, wired for createApp's `auth`. */
export async function startKeyAuth(bus: Bus, settings: KeyAuthSettings, log: Logger): Promise<{ auth: AuthOptions; store: KvKeyStore; stop(): Promise<void> }> {
  const store = await kvKeyStore(bus, { log });
  const keys: KeyPorts = {
    store,
    secret: deriveKeySecret(settings.MEMSTREAM_API_KEY, settings.MEMSTREAM_KEY_SECRET),
    now: () => new Date(),
    defaults: { rateLimitMax: settings.MEMSTREAM_KEY_RATE_LIMIT_MAX, rateLimitTimeWindow: settings.MEMSTREAM_KEY_RATE_LIMIT_WINDOW_MS },
  };
  const limiter = await kvKeyRateLimiter(bus, { log });
  const notices =
    settings.MEMSTREAM_KEY_EXPIRY_WARN_DAYS > 0
      ? await startExpiryNotices({ bus, store, warnDays: settings.MEMSTREAM_KEY_EXPIRY_WARN_DAYS, everyMs: settings.MEMSTREAM_KEY_EXPIRY_CHECK_MS, log })
      : null;
  const auth: AuthOptions = {
    keys,
    limiter,
    log,
    ...(settings.MEMSTREAM_ADMIN_RATE_LIMIT !== undefined ? { adminRateLimit: { max: settings.MEMSTREAM_ADMIN_RATE_LIMIT, windowMs: settings.MEMSTREAM_ADMIN_RATE_LIMIT_WINDOW_MS } } : {}),
  };
  return {
    auth,
    store,
    async stop() {
      notices?.stop();
      await store.close();
    },
  };
}
