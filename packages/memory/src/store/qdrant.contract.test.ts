import { randomBytes } from 'node:crypto';
import { afterAll, describe, it } from 'vitest';
import { qdrantServer } from '@memstream/testing';
import { contractEmbedder, describeMemoryStoreContract } from './contract.js';
import { QdrantMemoryStore } from './qdrant.js';

// QDRANT_URL, else a Qdrant container when Docker is reachable, else skipped with the reason.
const server = await qdrantServer();

if ('url' in server) {
  const { url } = server;
  afterAll(() => server.stop(), 60_000);
  const apiKey = server.from === 'environment' ? process.env.QDRANT_API_KEY : undefined;
  describeMemoryStoreContract('QdrantMemoryStore', async () => {
    // A unique prefix per store: collections of concurrent or earlier runs never interfere.
    const open = () => QdrantMemoryStore.connect(url, contractEmbedder, { collection: `mem_${randomBytes(6).toString('hex')}`, apiKey });
    const store = await open();
    const opened = [store];
    return {
      store,
      fresh: async () => {
        const s = await open();
        opened.push(s);
        return s;
      },
      cleanup: async () => {
        for (const s of opened) await s.dropCollections();
        await store.close();
      },
    };
  });
} else {
  console.log(`[memory] Qdrant memory store contract suite skipped: ${server.skip}`);
  describe.skip('MemoryStore contract: QdrantMemoryStore', () => {
    it('runs against QDRANT_URL or a Qdrant container', () => {});
  });
}
