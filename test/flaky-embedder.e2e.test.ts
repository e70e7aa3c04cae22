import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { SqliteChunkIndex } from '@memstream/chunk-index';
import { api, startTestStack, waitFor, type TestStack } from './support/stack.js';

const DIM = 32;
const FLAKY = 'FLAKY-EMBED-3f1e';
const REJECTED = 'REJECT-EMBED-9b2c';

/** A deterministic, non-zero vector for a text. */
function vectorOf(text: string): number[] {
  const h = createHash('sha256').update(text).digest();
  return Array.from({ length: DIM }, (_, i) => (h[i % h.length]! - 127.5) / 128 + (i === 0 ? 2 : 0));
}

/**
 * An OpenAI-compatible POST /v1/embeddings on loopback that misbehaves on purpose: a request with
 * the flaky marker fails three times (503, then 429 with Retry-After: 1, then a connection reset)
 * and then answers; one with the rejected marker gets a 400 while `rejecting` is on.
 */
function fakeEmbeddings() {
  // Attempts are counted per input, not in all: the memorizer embeds its memory statements through
  // the same endpoint, and a statement carrying the marker would otherwise share (and shift) the
  // chunk's count of failures.
  const state = { flakyAttempts: new Map<string, number>(), rejectedAttempts: 0, rejecting: true, requests: 0 };
  const server: Server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (d: string) => (body += d));
    req.on('end', () => {
      state.requests++;
      if (req.method !== 'POST' || req.url !== '/v1/embeddings') {
        res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: 'not found' } }));
        return;
      }
      const { input, model } = JSON.parse(body) as { input: string[]; model: string };
      if (model !== 'fake') {
        res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: `model ${model} not found` } }));
        return;
      }
      if (input.some((t) => t.includes(FLAKY))) {
        const key = input.join('\u0000');
        const n = (state.flakyAttempts.get(key) ?? 0) + 1;
        state.flakyAttempts.set(key, n);
        if (n === 1) return void res.writeHead(503, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: 'overloaded' } }));
        if (n === 2) return void res.writeHead(429, { 'content-type': 'application/json', 'retry-after': '1' }).end(JSON.stringify({ error: { message: 'rate limited' } }));
        if (n === 3) return void req.socket.destroy();
      }
      if (input.some((t) => t.includes(REJECTED))) {
        state.rejectedAttempts++;
        if (state.rejecting) {
          return void res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: 'this model cannot embed this input' } }));
        }
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end(
        JSON.stringify({ object: 'list', model, data: input.map((t, index) => ({ object: 'embedding', index, embedding: vectorOf(t) })), usage: { prompt_tokens: 0, total_tokens: 0 } }),
      );
    });
  });
  return { server, state };
}

/**
 * A remote embedding model that fails for a while: the document still ends done (the adapter
 * retries 503, 429 with Retry-After and connection resets), and a document that failed for good
 * is processed again when its client sends it again with the same customId.
 */
describe('a flaky OpenAI-compatible embeddings endpoint', () => {
  let stack: TestStack;
  let client: ReturnType<typeof api>;
  const fake = fakeEmbeddings();

  beforeAll(async () => {
    await new Promise<void>((r) => fake.server.listen(0, '127.0.0.1', () => r()));
    const port = (fake.server.address() as AddressInfo).port;
    const t0 = Date.now();
    stack = await startTestStack({
      env: { EMBEDDER: 'openai', EMBEDDING_BASE_URL: `http://127.0.0.1:${port}/v1`, EMBEDDING_MODEL: 'fake', EMBEDDING_DIM: String(DIM) },
    });
    client = api(stack);
    console.log(`[flaky] stack up in ${Date.now() - t0} ms`);
  });
  afterAll(async () => {
    const t0 = Date.now();
    await stack?.teardown();
    const t1 = Date.now();
    fake.server.closeAllConnections();
    await new Promise<void>((r) => fake.server.close(() => r()));
    console.log(`[flaky] teardown ${t1 - t0} ms, server close ${Date.now() - t1} ms`);
  });

  const waitStatus = (id: string, statuses: string[], ms = 45_000) =>
    waitFor(
      `${id} ${statuses.join(' or ')}`,
      async () => {
        const d = (await client.get(id)).body;
        return statuses.includes(d.status) ? d : undefined;
      },
      ms,
      100,
    );

  it('503, 429 with Retry-After: 1 and a connection reset, then it works: the document ends done', async () => {
    const t0 = Date.now();
    const { body } = await client.add(`# Flaky\n\nThe embedding service has a bad moment: ${FLAKY}.`, { containerTag: 'flaky' });
    const doc = await waitStatus(body.id, ['done', 'failed']);
    expect(doc.status).toBe('done');
    expect(doc.chunkCount).toBeGreaterThan(0);
    const index = SqliteChunkIndex.open(path.join(stack.dataDir, 'index.sqlite'));
    let attempts: number | undefined;
    try {
      const chunks = await index.getDocumentChunks(body.id);
      expect(chunks).toHaveLength(doc.chunkCount);
      expect(chunks[0]).toMatchObject({ model: `openai:fake:${DIM}` });
      // The embedder's call carried exactly this document's chunk texts: 3 failures, then the answer.
      attempts = fake.state.flakyAttempts.get(chunks.map((c) => c.text).join('\u0000'));
      expect(attempts, `attempts by input: ${JSON.stringify([...fake.state.flakyAttempts])}`).toBe(4);
    } finally {
      await index.close();
    }
    // The vectors came from the fake model: a search through it finds the document.
    const search = await client.call('POST', '/v3/search', { q: `bad moment ${FLAKY}`, containerTag: 'flaky' });
    expect(search.status).toBe(200);
    expect(search.body.results[0]?.documentId).toBe(body.id);
    console.log(`[flaky] embeddings endpoint failed 3 times (503, 429 Retry-After: 1, reset): ${attempts} attempts, document done in ${Date.now() - t0} ms`);
  }, 60_000);

  it('a document the model refused ends failed; sent again with the same customId once the model accepts it, it is done', async () => {
    const content = `# Refused\n\nThe model refuses this at first: ${REJECTED}.`;
    const first = await client.add(content, { containerTag: 'flaky', customId: 'refused-then-fixed' });
    const failed = await waitStatus(first.body.id, ['done', 'failed']);
    expect(failed.status).toBe('failed');
    expect(failed.error).toMatchObject({ stage: 'embedding', class: 'permanent' });
    expect(failed.reason).toMatch(/400.*cannot embed this input/);
    const attemptsWhileRefused = fake.state.rejectedAttempts;

    fake.state.rejecting = false;
    const t0 = Date.now();
    const again = await client.add(content, { containerTag: 'flaky', customId: 'refused-then-fixed' });
    expect(again.status).toBe(200);
    expect(again.body.id).toBe(first.body.id);
    const done = await waitStatus(first.body.id, ['done'], 30_000);
    // A new revision of the same document, not a new document.
    const timeline = (await client.call('GET', `/v3/documents/${first.body.id}/timeline`)).body.events as Array<{ type: string; revision: number }>;
    expect(timeline.filter((e) => e.type === 'document.submitted.v1').map((e) => e.revision)).toEqual([1, 2]);
    expect(done.error ?? null).toBeNull();
    expect(done.chunkCount).toBeGreaterThan(0);
    console.log(
      `[flaky] refused document: failed after ${attemptsWhileRefused} attempt(s) (400 is permanent), re-sent with the same customId: done in ${Date.now() - t0} ms after ${fake.state.rejectedAttempts - attemptsWhileRefused} more`,
    );
  }, 60_000);
});
