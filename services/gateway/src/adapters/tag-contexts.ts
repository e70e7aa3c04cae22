import { storageReplicas, type Logger } from '@memstream/kit';
import { Kvm, type KV } from '@nats-io/kv';
import type { Bus } from '@memstream/bus';
import type { TagContexts } from '../handlers/documents.js';
import { kvReadCache } from './kv-cache.js';

/**
 * entityContext per container tag, in a NATS KV bucket: shared by every gateway replica and
 * kept with the rest of memstream's state in JetStream. Keys are the tag, base64url-encoded
 * (tags may hold characters KV keys may not). Every add reads its tags' contexts: they are read
 * through a cache (./kv-cache.ts: a change made here is seen at once, one made elsewhere as soon
 * as the bucket's watch reports it, and nothing is served older than `cacheMs`).
 */
export async function kvTagContexts(bus: Bus, opts: { replicas?: number; cacheMs?: number; log?: Logger } = {}): Promise<TagContexts & { close(): void }> {
  const kv: KV = await new Kvm(bus.js).create('memstream-tag-contexts', { history: 1, replicas: opts.replicas ?? storageReplicas() });
  const key = (tag: string) => Buffer.from(tag).toString('base64url');
  const cache = kvReadCache<string | null>(kv, {
    decode: (e) => (e && e.operation === 'PUT' ? e.string() : null),
    ...(opts.cacheMs !== undefined ? { ttlMs: opts.cacheMs } : {}),
    ...(opts.log ? { log: opts.log } : {}),
    closed: () => bus.nc.isClosed(),
    whileConnected: bus.whileConnected,
  });
  return {
    get(tag) {
      return cache.get(key(tag));
    },
    async set(tag, context) {
      const k = key(tag);
      cache.put(k, context, await kv.put(k, context));
    },
    async delete(tag) {
      const k = key(tag);
      await kv.delete(k);
      cache.forget(k);
    },
    close: () => cache.close(),
  };
}
