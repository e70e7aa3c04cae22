import { storageReplicas } from '@memstream/kit';
import { Kvm, type KV } from '@nats-io/kv';
import type { Bus } from '@memstream/bus';
import type { TagContexts } from '../handlers/documents.js';

/**
 * entityContext per container tag, in a NATS KV bucket: shared by every gateway replica and
 * kept with the rest of memstream's state in JetStream. Keys are the tag, base64url-encoded
 * (tags may hold characters KV keys may not).
 */
export async function kvTagContexts(bus: Bus, replicas = storageReplicas()): Promise<TagContexts> {
  const kv: KV = await new Kvm(bus.js).create('memstream-tag-contexts', { history: 1, replicas });
  const key = (tag: string) => Buffer.from(tag).toString('base64url');
  return {
    async get(tag) {
      const e = await kv.get(key(tag));
      return e && e.operation === 'PUT' ? e.string() : null;
    },
    async set(tag, context) {
      await kv.put(key(tag), context);
    },
    async delete(tag) {
      await kv.delete(key(tag));
    },
  };
}
