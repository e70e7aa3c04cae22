import { Kvm, type KV } from '@nats-io/kv';
import type { StoredSettings } from '@memstream/contracts';
import type { Bus } from '@memstream/bus';
import { storageReplicas, type Logger } from '@memstream/kit';
import type { SettingsStore } from '../handlers/settings.js';
import { kvReadCache } from './kv-cache.js';

/**
 * Settings per key scope in a NATS KV bucket (`memstream-settings`): shared by every gateway
 * replica, kept with the rest of memstream's state. Keys are the owner, base64url-encoded. An
 * update is a compare-and-set on the entry's revision, retried when another replica won.
 * Every add reads its scope's settings: `get` reads through a cache (./kv-cache.ts: an update made
 * here is seen at once, one made elsewhere as soon as the bucket's watch reports it, and nothing
 * is served older than `cacheMs`); `update` always reads the bucket itself.
 */
export async function kvSettings(bus: Bus, opts: { replicas?: number; cacheMs?: number; log?: Logger } = {}): Promise<SettingsStore & { close(): void }> {
  const kv: KV = await new Kvm(bus.js).create('memstream-settings', { history: 1, replicas: opts.replicas ?? storageReplicas() });
  const key = (owner: string) => Buffer.from(owner).toString('base64url');
  // Frozen: the same object is handed to every reader.
  const decode = (e: { operation: string; json<T>(): T } | null): StoredSettings => Object.freeze(e && e.operation === 'PUT' ? e.json<StoredSettings>() : {});
  const cache = kvReadCache<StoredSettings>(kv, { decode, ...(opts.cacheMs !== undefined ? { ttlMs: opts.cacheMs } : {}), ...(opts.log ? { log: opts.log } : {}), closed: () => bus.nc.isClosed(), whileConnected: bus.whileConnected });
  const read = async (owner: string) => {
    const e = await kv.get(key(owner));
    return { settings: decode(e), revision: e?.revision ?? 0 };
  };
  return {
    get(owner) {
      return cache.get(key(owner));
    },
    async update(owner, change) {
      for (let attempt = 0; ; attempt++) {
        const { settings, revision } = await read(owner);
        const next = change(settings);
        try {
          const written = revision === 0 ? await kv.create(key(owner), JSON.stringify(next)) : await kv.update(key(owner), JSON.stringify(next), revision);
          cache.put(key(owner), Object.freeze(next), written);
          return next;
        } catch (err) {
          if (attempt >= 8) throw err;
        }
      }
    },
    close: () => cache.close(),
  };
}
