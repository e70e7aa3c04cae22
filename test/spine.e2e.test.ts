import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, startTestStack, waitFor, type TestStack } from './support/stack.js';

/**
 * One document through the real thing: a private nats-server, and each service a process.
 * The stages are started one at a time, so each status is held (the next stage is not there
 * yet) and can be observed through GET, in order, rather than hoped for between polls.
 */
describe('spine: one document through JetStream and six services', () => {
  let stack: TestStack;
  let client: ReturnType<typeof api>;

  beforeAll(async () => {
    stack = await startTestStack({ services: ['projection', 'gateway'] });
    client = api(stack);
  });
  afterAll(async () => {
    await stack?.teardown();
  });

  it('observes queued → extracting → chunking → embedding → done through GET and the timeline', async () => {
    const add = await client.add('# Spine\n\nmemstream turns raw content into searchable memories.\n\nThe log is the truth.', {
      containerTag: 'spine',
      metadata: { source: 'e2e', n: 1 },
    });
    expect(add.status).toBe(200);
    expect(add.headers.get('content-type')).toMatch(/application\/json/);
    expect(Object.keys(add.body).sort()).toEqual(['id', 'status']);
    expect(add.body.status).toBe('queued');
    const id: string = add.body.id;

    // GET at once: never a 404, even before the projection has caught up.
    const first = await client.get(id);
    expect(first.status).toBe(200);
    expect(first.body.status).toBe('queued');

    const statusIs = (s: string) => async () => ((await client.get(id)).body.status === s ? true : undefined);
    // The stages start one at a time, so the document waits before each: once extracted it is
    // chunking (the chunker's input is there), once chunked embedding, and it stays embedding
    // until the indexer has it. The extractor announces extracting while it works (too quick to
    // catch by polling a short text: the timeline below has it).
    const seen: string[] = ['queued'];
    for (const [service, status] of [
      ['extractor', 'chunking'],
      ['chunker', 'embedding'],
      ['embedder', 'embedding'],
      ['indexer', 'done'],
    ] as const) {
      await stack.start(service);
      await waitFor(`status ${status}`, statusIs(status));
      if (seen.at(-1) !== status) seen.push(status);
    }
    expect(seen).toEqual(['queued', 'chunking', 'embedding', 'done']);
    const timeline = await client.call('GET', `/v3/documents/${id}/timeline`);
    expect((timeline.body.events as Array<{ status: string | null }>).map((e) => e.status).filter((x) => x !== null)).toEqual(['queued', 'extracting', 'chunking', 'embedding', 'done']);

    const doc = (await client.get(id)).body;
    expect(doc).toMatchObject({
      id,
      status: 'done',
      title: 'Spine',
      type: 'text',
      containerTags: ['spine'],
      metadata: { source: 'e2e', n: 1 },
      customId: null,
      connectionId: null,
      error: null,
    });
    expect(doc.content).toContain('searchable memories');
    expect(doc.chunkCount).toBeGreaterThan(0);
    for (const k of ['id', 'customId', 'connectionId', 'title', 'summary', 'type', 'status', 'content', 'metadata', 'containerTags', 'filepath', 'source', 'url', 'createdAt', 'updatedAt']) {
      expect(doc, `field ${k}`).toHaveProperty(k);
    }
  });

  it('GET /v3/documents/{id}/timeline shows where the time went', async () => {
    const id = (await client.add('# Timeline\n\nEvery stage leaves its mark in the log.')).body.id as string;
    await waitFor('done', async () => ((await client.get(id)).body.status === 'done' ? true : undefined));
    const t = await client.call('GET', `/v3/documents/${id}/timeline`);
    expect(t.status).toBe(200);
    expect(t.body.id).toBe(id);
    const types = (t.body.events as Array<{ type: string }>).map((e) => e.type);
    // Only the entrance announces its start; a later stage's input sets its status.
    expect(types).toEqual(['document.submitted.v1', 'document.stage-started.v1', 'document.extracted.v1', 'document.chunked.v1', 'document.embedded.v1', 'document.indexed.v1']);
    const statuses = (t.body.events as Array<{ status: string | null }>).map((e) => e.status).filter((s) => s !== null);
    expect(statuses).toEqual(['queued', 'extracting', 'chunking', 'embedding', 'done']);
    for (const e of t.body.events.slice(1)) expect(e.sincePreviousMs).toBeGreaterThanOrEqual(0);
    expect((await client.call('GET', '/v3/documents/nope-nope/timeline')).status).toBe(404);
  });

  it('re-ingesting a 100-chunk document after a one-paragraph edit embeds at most 3 chunks', async () => {
    const topics = ['harbour', 'glacier', 'orchard', 'foundry', 'observatory', 'archive', 'vineyard', 'lighthouse', 'quarry', 'monastery'];
    const para = (i: number) =>
      `Section ${i} of the ${topics[i % topics.length]} report records ${i * 7} visitors, ${i * 3} repairs and ${i % 5} storms. ` +
      `The ${topics[(i * 3) % topics.length]} keeper noted that shift ${i} ended with the ${topics[(i * 7) % topics.length]} ledger balanced and the doors locked at ${(i % 12) + 1} o'clock.`;
    const paragraphs = Array.from({ length: 520 }, (_, i) => para(i));
    const body = (ps: string[]) => ps.map((p, i) => (i % 20 === 0 ? `## Part ${i / 20}\n\n${p}` : p)).join('\n\n');
    const first = await client.add(body(paragraphs), { customId: 'incremental-100' });
    const id = first.body.id as string;
    const doneWith = async (pred: (d: any) => boolean) =>
      waitFor('done', async () => {
        const d = (await client.get(id)).body;
        return d.status === 'done' && pred(d) ? d : undefined;
      }, 60_000, 100);
    const v1 = await doneWith(() => true);
    const edited = [...paragraphs];
    edited[260] = 'This one paragraph was rewritten entirely: the walrus auditor found the cormorant accounts in perfect order.';
    await client.add(body(edited), { customId: 'incremental-100' });
    const v2 = await doneWith((d) => d.content.includes('walrus auditor'));
    const embedded = ((await client.call('GET', `/v3/documents/${id}/timeline`)).body.events as Array<{ type: string; revision: number; detail: { chunks: number; computed: number } }>).filter(
      (e) => e.type === 'document.embedded.v1',
    );
    const [r1, r2] = [embedded.find((e) => e.revision === 1)!, embedded.find((e) => e.revision === 2)!];
    console.log(`[spine] incremental: revision 1 embedded ${r1.detail.computed} of ${r1.detail.chunks} chunks; after a one-paragraph edit, revision 2 embedded ${r2.detail.computed} of ${r2.detail.chunks}`);
    expect(v1.chunkCount).toBeGreaterThanOrEqual(100);
    expect(r1.detail.computed).toBe(r1.detail.chunks);
    expect(r2.detail.computed).toBeGreaterThanOrEqual(1);
    expect(r2.detail.computed).toBeLessThanOrEqual(3);
    expect(v2.chunkCount).toBe(r2.detail.chunks);
  }, 120_000);

  it('with every service up, a new document is done within 2 seconds', async () => {
    const t0 = Date.now();
    const add = await client.add('A short note about event sourcing and projections.');
    const id = add.body.id as string;
    await waitFor('done', async () => ((await client.get(id)).body.status === 'done' ? true : undefined), 2_000, 10);
    const ms = Date.now() - t0;
    console.log(`[spine] add → done in ${ms} ms`);
    expect(ms).toBeLessThan(2_000);
  });

  it('a document with no text ends failed with a reason, never done with zero chunks', async () => {
    const id = (await client.add(' \n\t ')).body.id as string;
    const doc = await waitFor('failed', async () => {
      const d = (await client.get(id)).body;
      return d.status === 'failed' ? d : undefined;
    });
    expect(doc.error).toEqual({ stage: 'extracting', reason: 'no extractable text', class: 'permanent' });
    expect(doc.reason).toBe('no extractable text');
  });

  it('the same customId gives the same id, and a new revision reaches done', async () => {
    const a = await client.add('first version of the note', { customId: 'note-1' });
    const b = await client.add('second version of the note', { customId: 'note-1' });
    expect(b.body.id).toBe(a.body.id);
    const doc = await waitFor('second revision done', async () => {
      const d = (await client.get(a.body.id)).body;
      return d.status === 'done' && d.content === 'second version of the note' ? d : undefined;
    });
    expect(doc.customId).toBe('note-1');
  });

  it('bad input gets a clear 4xx with { error, details }', async () => {
    const cases: Array<[string, unknown, number, RegExp]> = [
      ['no content', {}, 400, /content/],
      ['content not a string', { content: 42 }, 400, /content/],
      ['customId with a space', { content: 'x', customId: 'has space' }, 400, /customId/],
      ['customId too long', { content: 'x', customId: 'a'.repeat(101) }, 400, /customId/],
      ['nested metadata', { content: 'x', metadata: { a: { b: 1 } } }, 400, /metadata/],
      ['entityContext too long', { content: 'x', entityContext: 'e'.repeat(1501) }, 400, /entityContext/],
      ['broken JSON', '{"content": ', 400, /JSON/],
    ];
    for (const [name, body, status, details] of cases) {
      const r = await client.call('POST', '/v3/documents', body);
      expect(r.status, name).toBe(status);
      expect(typeof r.body.error, name).toBe('string');
      expect(`${r.body.error} ${r.body.details}`, name).toMatch(details);
    }
    const noKey = await fetch(`${stack.baseUrl}/v3/documents/x`);
    expect(noKey.status).toBe(401);
    expect(await noKey.json()).toMatchObject({ error: 'Unauthorized' });
    const wrongKey = await fetch(`${stack.baseUrl}/v3/documents/x`, { headers: { authorization: 'Bearer nope-nope-nope' } });
    expect(wrongKey.status).toBe(401);
    const missing = await client.get('doesNotExist123');
    expect(missing.status).toBe(404);
    expect(missing.body.error).toBeTypeOf('string');
  });
});
