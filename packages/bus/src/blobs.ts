import { storageReplicas } from '@memstream/kit';
import { Objm, type ObjectStore } from '@nats-io/obj';
import { StorageType } from '@nats-io/jetstream';
import { BLOB_BUCKET } from '@memstream/contracts';
import type { Bus } from './connect.js';

/**
 * Blobs in the NATS Object Store: claim-checked event data keyed under doc/<documentId>/; uploads
 * under uploads/<id>, each owned by a document through a pointer at doc/<documentId>/uploads/<id>.
 */
export interface BlobStore {
  put(key: string, data: Uint8Array): Promise<void>;
  putStream(key: string, stream: ReadableStream<Uint8Array>): Promise<{ size: number }>;
  get(key: string): Promise<Uint8Array | null>;
  getStream(key: string): Promise<ReadableStream<Uint8Array> | null>;
  /** Remove one blob; false when there was none. */
  delete(key: string): Promise<boolean>;
  /** Remove every blob of a document, and the uploads its `doc/<id>/uploads/` pointers name. */
  deleteDocument(documentId: string): Promise<number>;
}

const stores = new WeakMap<Bus, Promise<ObjectStore>>();

function objectStore(bus: Bus, replicas = storageReplicas()): Promise<ObjectStore> {
  let p = stores.get(bus);
  if (!p) {
    p = new Objm(bus.js).create(BLOB_BUCKET, { storage: StorageType.File, replicas });
    stores.set(bus, p);
    p.catch(() => stores.delete(bus));
  }
  return p;
}

/** Where uploads are stored: outside doc/<id>/, because an upload is stored before its document id is known. */
export const UPLOADS_PREFIX = 'uploads/';

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
    async delete(key) {
      const os = await objectStore(bus);
      const info = await os.info(key);
      if (!info || info.deleted) return false;
      await os.delete(key);
      return true;
    },
    async deleteDocument(documentId) {
      const os = await objectStore(bus);
      const prefix = blobKey(documentId) + '/';
      const uploads = blobKey(documentId, 'uploads') + '/';
      // The object store has no prefix listing; its list is one read of the metadata subjects.
      const all = await os.list();
      let n = 0;
      for (const info of all) {
        if (info.deleted || !info.name.startsWith(prefix)) continue;
        if (info.name.startsWith(uploads)) {
          // A pointer: its content is the key of an upload this document owns. The upload goes
          // first, so a failure part-way leaves the pointer and a retried delete still finds it.
          const target = new TextDecoder().decode((await os.getBlob(info.name)) ?? new Uint8Array());
          // Only ever an upload: a damaged pointer must not take another document's blob with it.
          if (target.startsWith(UPLOADS_PREFIX)) {
            const t = await os.info(target);
            if (t && !t.deleted) {
              await os.delete(target);
              n++;
            }
          }
        }
        await os.delete(info.name);
        n++;
      }
      return n;
    },
  };
}
