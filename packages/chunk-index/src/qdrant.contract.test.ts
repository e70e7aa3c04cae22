import { randomBytes } from 'node:crypto';
import { afterAll, describe, it } from 'vitest';
import { qdrantServer } from '@memstream/testing';
import { describeChunkIndexContract } from './contract.js';
import { QdrantChunkIndex } from './qdrant.js';

// QDRANT_URL, else a Qdrant container when Docker is reachable, else skipped with the reason.
const server = await qdrantServer();

if ('url' in server) {
  const { url } = server;
  afterAll(() => server.stop(), 60_000);
  const apiKey = server.from === 'environment' ? process.env.QDRANT_API_KEY : undefined;
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
  console.log(`[chunk-index] Qdrant contract suite skipped: ${server.skip}`);
  describe.skip('ChunkIndex contract: QdrantChunkIndex', () => {
    it('runs against QDRANT_URL or a Qdrant container', () => {});
  });
}
