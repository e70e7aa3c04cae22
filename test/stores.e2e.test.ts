import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mongoServer, natsServer, qdrantServer } from '@memstream/testing';
import { api, startTestStack, waitFor, type TestStack } from './support/stack.js';

/**
 * The whole pipeline on the real external stores: the document view in MongoDB, the chunk index
 * in Qdrant, and (when a Docker engine is there) the broker in the upstream NATS image instead of
 * Debian's nats-server. Each comes from MONGODB_URL / QDRANT_URL / NATS_TEST_URL when set, else
 * from a testcontainers container; without either, the suite says why in one line and is skipped.
 */
const [mongo, qdrant, nats] = await Promise.all([mongoServer(), qdrantServer(), natsServer()]);
const missing = [mongo, qdrant].flatMap((s) => ('skip' in s ? [s.skip] : []));

if (missing.length === 0 && 'url' in mongo && 'url' in qdrant) {
  describe(`the pipeline on MongoDB (${mongo.from}), Qdrant (${qdrant.from}) and NATS (${'url' in nats ? nats.from : 'nats-server binary'})`, () => {
    let stack: TestStack;
    let client: ReturnType<typeof api>;
    const tag = `stores-${Date.now().toString(36)}`;

    beforeAll(async () => {
      stack = await startTestStack({
        env: { MONGODB_URL: mongo.url, QDRANT_URL: qdrant.url, ...('url' in nats ? { NATS_URL: nats.url } : {}) },
      });
      client = api(stack);
    }, 120_000);
    afterAll(async () => {
      await stack?.teardown();
      await Promise.all([mongo, qdrant, nats].map((s) => ('url' in s ? s.stop() : undefined)));
    }, 60_000);

    it('adds, processes, finds and deletes documents', async () => {
      const contents = ['The lighthouse keeper logs every passing ship.', 'Sourdough needs a starter fed twice a day.', 'A glacier moves a few metres a year.'];
      const ids: string[] = [];
      for (const content of contents) {
        const r = await client.add(content, { containerTag: tag });
        expect(r.status).toBe(200);
        ids.push(r.body.id);
      }
      for (const id of ids) await waitFor(`${id} done`, async () => ((await client.get(id)).body?.status === 'done' ? true : undefined), 60_000, 200);

      const found = await client.call('POST', '/v3/search', { q: 'sourdough starter', containerTag: tag, limit: 3 });
      expect(found.status).toBe(200);
      expect(found.body.results[0]?.documentId).toBe(ids[1]);

      expect((await client.call('DELETE', `/v3/documents/${ids[0]}`)).status).toBe(204);
      const list = await client.call('POST', '/v3/documents/list', { containerTags: [tag] });
      expect(list.status).toBe(200);
      expect(new Set((list.body.memories as Array<{ id: string }>).map((m) => m.id))).toEqual(new Set(ids.slice(1)));
    }, 120_000);
  });
} else {
  console.log(`[stores] the MongoDB + Qdrant e2e suite skipped: ${missing.join('; ')}`);
  describe.skip('the pipeline on MongoDB and Qdrant', () => {
    it('needs MONGODB_URL and QDRANT_URL, or a Docker engine', () => {});
  });
  await Promise.all([mongo, qdrant, nats].map((s) => ('url' in s ? s.stop() : undefined)));
}
