import { randomBytes } from 'node:crypto';
import { afterAll, describe, it } from 'vitest';
import { MongoClient } from 'mongodb';
import { mongoServer } from '@memstream/testing';
import { describeDocumentViewsContract } from './contract.js';
import { MongoDocumentViews } from './mongo.js';
import type { DocumentViews } from './port.js';

// MONGODB_URL, else a MongoDB container when Docker is reachable, else skipped with the reason.
const server = await mongoServer();

if ('url' in server) {
  const { url } = server;
  afterAll(() => server.stop(), 60_000);
  const run = `memstream_views_test_${process.pid}_${randomBytes(4).toString('hex')}`;
  let n = 0;
  describeDocumentViewsContract('MongoDocumentViews', async () => {
    // A database per store, so cases never see each other's documents and cleanup is one drop.
    const dbName = `${run}_${n++}`;
    const views = await MongoDocumentViews.connect(url, dbName);
    const opened: DocumentViews[] = [views];
    return {
      views,
      reopen: async () => {
        const another = await MongoDocumentViews.connect(url, dbName);
        opened.push(another);
        return another;
      },
      cleanup: async () => {
        for (const v of opened) await v.close();
        const admin = new MongoClient(url);
        try {
          await admin.db(dbName).dropDatabase();
        } finally {
          await admin.close();
        }
      },
    };
  });
} else {
  console.log(`[views] MongoDB contract suite skipped: ${server.skip}`);
  describe.skip('DocumentViews contract: MongoDocumentViews', () => {
    it('needs MONGODB_URL or a Docker engine', () => {});
  });
}
