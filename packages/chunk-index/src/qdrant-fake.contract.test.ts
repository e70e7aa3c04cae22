import { describeChunkIndexContract } from './contract.js';
import { FakeQdrant } from './qdrant-fake.js';
import { QdrantChunkIndex } from './qdrant.js';

// The Qdrant adapter's own logic (replace bookkeeping, stale records, paging and post-filtering,
// hybrid fusion parameters) against an in-memory model of the Qdrant API. The same suite runs
// against a real server in qdrant.contract.test.ts when QDRANT_URL is set.
describeChunkIndexContract('QdrantChunkIndex on an in-memory Qdrant model', async () => {
  const fake = new FakeQdrant();
  const index = await QdrantChunkIndex.fromClient(fake.asClient(), { collection: 'fake_test' });
  return {
    index,
    reopen: () => QdrantChunkIndex.fromClient(fake.asClient(), { collection: 'fake_test' }),
    cleanup: async () => {
      await index.dropCollections();
      await index.close();
    },
  };
});
