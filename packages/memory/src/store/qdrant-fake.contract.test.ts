import { FakeQdrant } from '@memstream/chunk-index/qdrant-fake';
import { contractEmbedder, describeMemoryStoreContract } from './contract.js';
import { QdrantMemoryStore } from './qdrant.js';

// The Qdrant memory store's own logic (conditional writes, lookups by payload, ordered scrolls,
// paging and post-filtering, fusion) against the in-memory model of the Qdrant API the chunk
// index's suite uses. The same suite runs against a real server in qdrant.contract.test.ts.
describeMemoryStoreContract('QdrantMemoryStore on an in-memory Qdrant model', async () => {
  const fake = new FakeQdrant();
  const store = await QdrantMemoryStore.fromClient(fake.asClient(), contractEmbedder, { collection: 'fake_mem' });
  let k = 0;
  return {
    store,
    fresh: () => QdrantMemoryStore.fromClient(fake.asClient(), contractEmbedder, { collection: `fake_mem_fresh${k++}` }),
    cleanup: async () => {
      await store.dropCollections();
      await store.close();
    },
  };
});
