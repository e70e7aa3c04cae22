import { Kvm, type KV } from '@nats-io/kv';
import type { StoredSettings } from '@memstream/contracts';
import type { Bus } from '@memstream/bus';
import { storageReplicas } from '@memstream/kit';
import type { SettingsStore } from '../handlers/settings.js';

/**
 * Settings per key scope in a NATS KV bucket (`memstream-settings`): shared by every gateway
 * replica, kept with the rest of memstream's state. Keys are the owner, base64url-encoded. An
 * update is a compare-and-set on the entry's revision, retried when another replica won.
 */
export async function kvSettings(bus: Bus, replicas = storageReplicas()): Promise<SettingsStore> {
  const kv: KV = await new Kvm(bus.js).create('memstream-settings', { history: 1, replicas });
  const key = (owner: string) => Buffer.from(owner).toString('base64url');
  const read = async (owner: string) => {
    const e = await kv.get(key(owner));
    return { settings: e && e.operation === 'PUT' ? (e.json() as StoredSettings) : {}, revision: e?.revision ?? 0 };
  };
  return {
    async get(owner) {
      return (await read(owner)).settings;
    },
    async update(owner, change) {
      for (let attempt = 0; ; attempt++) {
        const { settings, revision } = await read(owner);
        const next = change(settings);
        try {
          if (revision === 0) await kv.create(key(owner), JSON.stringify(next));
          else await kv.update(key(owner), JSON.stringify(next), revision);
          return next;
        } catch (err) {
          if (attempt >= 8) throw err;
        }
      }
    },
  };
}
