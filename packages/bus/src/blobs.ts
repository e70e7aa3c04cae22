import { Objm, type ObjectStore } from '@nats-io/obj';
import { StorageType } from '@nats-io/jetstream';
import { BLOB_BUCKET } from '@memstream/contracts';
import type { Bus } from './connect.js';

/** Blobs (uploads, claim-checked event data) in the NATS Object Store, keyed under doc/<documentId>/. */
export interface BlobStore {
  put(key: string, data: Uint8Array): Promise<void>;
  putStream(key: string, stream: ReadableStream<Uint8Array>): Promise<{ size: number }>;
  get(key: string): Promise<Uint8Array | null>;
  getStream(key: string): Promise<ReadableStream<Uint8Array> | null>;
  /** Remove every blob of a document. */
  deleteDocument(documentId: string): Promise<number>;
}

const stores = new WeakMap<Bus, Promise<ObjectStore>>();

function objectStore(bus: Bus, replicas = 1): Promise<ObjectStore> {
  let p = stores.get(bus);
  if (!p) {
    p = new Objm(bus.js).create(BLOB_BUCKET, { storage: StorageType.File, replicas });
    stores.set(bus, p);
    p.catch(() => stores.delete(bus));
  }
  return p;
}

export function blobKey(documentId: string, ...parts: string[]): string {
  return ['doc', documentId, ...parts].join('/');
}

export function blobStore(bus: Bus): BlobStore {
  return {
    async put(key, data) {
      await (await objectStore(bus)).putBlob({ name: key }, data);
    },
    async putStream(key, stream) {
      const info = await (await objectStore(bus)).put({ name: key }, stream);
      return { size: info.size };
    },
    async get(key) {
      return (await objectStore(bus)).getBlob(key);
    },
    async getStream(key) {
      const r = await (await objectStore(bus)).get(key);
      return r ? r.data : null;
    },
    async deleteDocument(documentId) {
      const os = await objectStore(bus);
      const prefix = blobKey(documentId) + '/';
      // The object store has no prefix listing; its list is one read of the metadata subjects.
      const all = await os.list();
      let n = 0;
      for (const info of all) {
        if (!info.deleted && info.name.startsWith(prefix)) {
          await os.delete(info.name);
          n++;
        }
      }
      return n;
    },
  };
}
