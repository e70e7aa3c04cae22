import { randomBytes } from 'node:crypto';
import { describe, it } from 'vitest';
import { describeChunkIndexContract } from './contract.js';
import { QdrantChunkIndex } from './qdrant.js';

const url = process.env.QDRANT_URL;

if (url) {
  const apiKey = process.env.QDRANT_API_KEY;
  describeChunkIndexContract('QdrantChunkIndex', async () => {
    // A unique prefix per test: collections of concurrent or earlier runs never interfere.
    const collection = `ci_${randomBytes(6).toString('hex')}`;
    const index = await QdrantChunkIndex.connect(url, { collection, apiKey });
    return {
      index,
      reopen: () => QdrantChunkIndex.connect(url, { collection, apiKey }),
      cleanup: async () => {
        await index.dropCollections();
        await index.close();
      },
    };
  });
} else {
  console.log('[chunk-index] Qdrant contract suite skipped: QDRANT_URL is not set (no Qdrant server can run on this machine)');
  describe.skip('ChunkIndex contract: QdrantChunkIndex', () => {
    it('runs against the Qdrant server at QDRANT_URL', () => {});
  });
}
