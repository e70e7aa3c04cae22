import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import Supermemory, { APIError, AuthenticationError, BadRequestError, NotFoundError, toFile } from 'supermemory';
import type { DocumentListParams } from 'supermemory/resources/documents';
import { api, startTestStack, waitFor, type TestStack } from './support/stack.js';
import { recordingClient, sleep, unique, waitForDoc, type Exchange } from './support/sdk.js';

/**
 * The official `supermemory` SDK (pinned) against a real memstream: a private nats-server and the
 * six services as processes. Every operation goes through the SDK's own methods, unchanged; only
 * what the SDK cannot say (redirects, auth headers, OpenAPI) is raw fetch.
 */

/** Every field the SDK's DocumentGetResponse names. */
const GET_FIELDS = [
  'id',
  'connectionId',
  'content',
  'createdAt',
  'customId',
  'filepath',
  'metadata',
  'ogImage',
  'raw',
  'source',
  'spatialPoint',
  'status',
  'summary',
  'taskType',
  'title',
  'type',
  'updatedAt',
  'containerTags',
  'url',
] as const;

/** Every field the SDK's DocumentListResponse.Memory names (content only with includeContent). */
const LIST_FIELDS = ['id', 'connectionId', 'createdAt', 'customId', 'filepath', 'metadata', 'status', 'summary', 'title', 'type', 'updatedAt', 'containerTags', 'url'] as const;

const PROCESSING_FIELDS = ['id', 'createdAt', 'customId', 'metadata', 'status', 'title', 'type', 'updatedAt', 'containerTags'] as const;

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;

type Filters = NonNullable<DocumentListParams['filters']>;

/** The SDK's rejection, checked: its class, its status, and its error body naming what is wrong. */
async function expectApiError(p: Promise<unknown>, cls: new (...args: never[]) => APIError, status: number, names?: RegExp): Promise<APIError> {
  let caught: unknown;
  try {
    await p;
  } catch (err) {
    caught = err;
  }
  expect(caught, 'the SDK call should have thrown').toBeInstanceOf(cls);
  const e = caught as APIError;
  expect(e.status).toBe(status);
  const body = e.error as { error?: unknown; details?: unknown };
  expect(typeof body.error).toBe('string');
  expect(String(body.error).length).toBeGreaterThan(0);
  if (names) expect(`${String(body.error)} ${String(body.details ?? '')}`).toMatch(names);
  return e;
}

describe('the official supermemory SDK against memstream', () => {
  let stack: TestStack;
  let client: Supermemory;
  let exchanges: Exchange[];
  let raw: ReturnType<typeof api>;

  beforeAll(async () => {
    stack = await startTestStack();
    ({ client, exchanges } = recordingClient(stack));
    raw = api(stack);
  });
  afterAll(async () => {
    await stack?.teardown();
  });

  it('add → {id, status: queued}; get names every field of DocumentGetResponse; reaches done', async () => {
    const tag = unique('sdk-add');
    const customId = unique('add');
    const metadata = { source: 'sdk-e2e', n: 3, flag: true, topics: ['alpha', 'beta'] };
    const added = await client.documents.add({
      content: '# Notes on memstream\n\nThe official SDK talks to memstream unchanged. The log is the truth.',
      containerTag: tag,
      customId,
      metadata,
      entityContext: 'Notes written by the SDK end-to-end suite.',
    });
    expect(Object.keys(added).sort()).toEqual(['id', 'status']);
    expect(added.status).toBe('queued');
    expect(added.id).toMatch(/^\S+$/);

    const first = await client.documents.get(added.id);
    for (const k of GET_FIELDS) expect(first, `field ${k}`).toHaveProperty(k);
    expect(first.content).toContain('The official SDK talks to memstream unchanged.');

    const doc = await waitForDoc(client, added.id, 'done', (d) => d.status === 'done');
    for (const k of GET_FIELDS) expect(doc, `field ${k}`).toHaveProperty(k);
    expect(doc).toMatchObject({
      id: added.id,
      customId,
      connectionId: null,
      ogImage: null,
      raw: null,
      spatialPoint: null,
      filepath: null,
      url: null,
      status: 'done',
      type: 'text',
      taskType: 'memory',
      title: 'Notes on memstream',
      containerTags: [tag],
      metadata,
    });
    expect(doc.content).toContain('The log is the truth.');
    expect(doc.createdAt).toMatch(ISO);
    expect(doc.updatedAt).toMatch(ISO);
    expect(doc.updatedAt >= doc.createdAt).toBe(true);
    expect((doc as unknown as { chunkCount: number }).chunkCount).toBeGreaterThan(0);

    // The same document by its customId.
    const byCustomId = await client.documents.get(customId);
    expect(byCustomId.id).toBe(added.id);
  });

  describe('customId semantics', () => {
    it('the same customId is the same document; unchanged content is not processed again', async () => {
      const tag = unique('sdk-cid');
      const customId = unique('cid');
      const content = 'A note that will be sent twice without any change at all.';
      const a = await client.documents.add({ content, customId, containerTag: tag, metadata: { v: 1 } });
      const done = await waitForDoc(client, a.id, 'done', (d) => d.status === 'done');
      const chunks = (done as unknown as { chunkCount: number }).chunkCount;

      const again = await client.documents.add({ content, customId, containerTag: tag, metadata: { v: 1 } });
      expect(again).toEqual({ id: a.id, status: 'done' });
      // Nothing is reprocessed: not now, and not a moment later either.
      for (const wait of [0, 400]) {
        await sleep(wait);
        const d = await client.documents.get(a.id);
        expect(d.status).toBe('done');
        expect(d.updatedAt).toBe(done.updatedAt);
        expect((d as unknown as { chunkCount: number }).chunkCount).toBe(chunks);
        expect(d.content).toBe(content);
      }
    });

    it('unchanged content with new metadata: updated in place, not processed again', async () => {
      const customId = unique('cid-meta');
      const content = 'A note whose metadata changes when it is sent again.';
      const a = await client.documents.add({ content, customId, metadata: { v: 1 } });
      const done = await waitForDoc(client, a.id, 'done', (d) => d.status === 'done');
      const again = await client.documents.add({ content, customId, metadata: { v: 2 } });
      expect(again).toEqual({ id: a.id, status: 'done' });
      const d = await client.documents.get(a.id);
      expect(d.metadata).toEqual({ v: 2 });
      expect(d.status).toBe('done');
      expect(d.content).toBe(content);
      expect((d as unknown as { chunkCount: number }).chunkCount).toBe((done as unknown as { chunkCount: number }).chunkCount);
    });

    it('new content for the same customId is processed again and reaches done with the new content', async () => {
      const customId = unique('cid-upd');
      const a = await client.documents.add({ content: 'The first version of a changing note.', customId });
      const first = await waitForDoc(client, a.id, 'done', (d) => d.status === 'done');
      const b = await client.documents.add({ content: 'The second, entirely rewritten version of the note.', customId });
      expect(b).toEqual({ id: a.id, status: 'queued' });
      const second = await waitForDoc(client, a.id, 'done with new content', (d) => d.status === 'done' && d.content === 'The second, entirely rewritten version of the note.');
      expect(second.updatedAt > first.updatedAt).toBe(true);
      expect(second.customId).toBe(customId);
      expect(second.createdAt).toBe(first.createdAt);
    });

    it('a conversation: only the new messages sent with the same customId are appended', async () => {
      const customId = unique('conv');
      const before = 'user: I like green tea in the morning.\nassistant: Noted, green tea in the morning.';
      const added = 'user: And I take coffee after lunch.\nassistant: Noted, coffee after lunch.';
      const a = await client.documents.add({ content: before, customId });
      await waitForDoc(client, a.id, 'done', (d) => d.status === 'done');
      const b = await client.documents.add({ content: added, customId });
      expect(b.id).toBe(a.id);
      expect(b.status).toBe('queued');
      const doc = await waitForDoc(client, a.id, 'done with both', (d) => d.status === 'done' && (d.content ?? '').includes('coffee after lunch'));
      const content = doc.content ?? '';
      expect(content).toContain(before);
      expect(content).toContain(added);
      expect(content.indexOf(before)).toBeLessThan(content.indexOf(added));

      // The same new messages again: nothing new, nothing doubled.
      const c = await client.documents.add({ content: added, customId });
      expect(c).toEqual({ id: a.id, status: 'done' });
      const after = await client.documents.get(a.id);
      expect(after.content).toBe(content);
      expect(after.updatedAt).toBe(doc.updatedAt);
    });

    it('a document that failed is processed again when re-sent unchanged', async () => {
      const customId = unique('cid-fail');
      const a = await client.documents.add({ content: '   ', customId });
      const failed = await waitForDoc(client, a.id, 'failed', (d) => d.status === 'failed');
      expect((failed as unknown as { reason: string }).reason).toBe('no extractable text');

      const b = await client.documents.add({ content: '   ', customId });
      expect(b.id).toBe(a.id);
      expect(b.status).toBe('queued');
      const again = await waitForDoc(client, a.id, 'failed again (a new attempt)', (d) => d.status === 'failed' && d.updatedAt > failed.updatedAt);
      expect((again as unknown as { reason: string }).reason).toBe('no extractable text');
      expect(again.createdAt).toBe(failed.createdAt);
    });
  });

  describe('update', () => {
    it('metadata only: updated in place, still done, content and chunks unchanged', async () => {
      const tag = unique('sdk-upd');
      const a = await client.documents.add({ content: 'A document whose metadata changes but whose text does not.', containerTag: tag, metadata: { stage: 'draft' } });
      const done = await waitForDoc(client, a.id, 'done', (d) => d.status === 'done');
      const chunks = (done as unknown as { chunkCount: number }).chunkCount;

      const upd = await client.documents.update(a.id, { metadata: { stage: 'final', reviewers: ['ann', 'bo'] } });
      expect(upd).toEqual({ id: a.id, status: 'done' });
      for (const wait of [0, 400]) {
        await sleep(wait);
        const d = await client.documents.get(a.id);
        expect(d.metadata).toEqual({ stage: 'final', reviewers: ['ann', 'bo'] });
        expect(d.status).toBe('done');
        expect(d.content).toBe(done.content);
        expect(d.containerTags).toEqual([tag]);
        expect((d as unknown as { chunkCount: number }).chunkCount).toBe(chunks);
      }
      // The list (the projected view) agrees.
      const listed = await waitFor('list shows new metadata', async () => {
        const l = await client.documents.list({ containerTags: [tag] });
        return l.memories[0]?.metadata && (l.memories[0].metadata as Record<string, unknown>).stage === 'final' ? l : undefined;
      });
      expect(listed.memories.map((m) => m.id)).toEqual([a.id]);
    });

    it('containerTag: the document moves to the new tag', async () => {
      const from = unique('sdk-move-from');
      const to = unique('sdk-move-to');
      const a = await client.documents.add({ content: 'A document that changes its container tag.', containerTag: from });
      await waitForDoc(client, a.id, 'done', (d) => d.status === 'done');
      expect(await client.documents.update(a.id, { containerTag: to })).toEqual({ id: a.id, status: 'done' });
      expect((await client.documents.get(a.id)).containerTags).toEqual([to]);
      const moved = await waitFor('list by the new tag', async () => {
        const l = await client.documents.list({ containerTags: [to] });
        return l.memories.length === 1 ? l : undefined;
      });
      expect(moved.memories[0]!.id).toBe(a.id);
      expect((await client.documents.list({ containerTags: [from] })).memories).toEqual([]);
    });

    it('content: processed again and done with the new content', async () => {
      const a = await client.documents.add({ content: 'The original text of an updated document.', metadata: { keep: 'me' } });
      await waitForDoc(client, a.id, 'done', (d) => d.status === 'done');
      const upd = await client.documents.update(a.id, { content: 'The replacement text of an updated document.' });
      expect(upd).toEqual({ id: a.id, status: 'queued' });
      const d = await waitForDoc(client, a.id, 'done with new content', (x) => x.status === 'done' && x.content === 'The replacement text of an updated document.');
      expect(d.metadata).toEqual({ keep: 'me' });
    });
  });

  describe('list', () => {
    const tag = unique('sdk-list');
    const ids: string[] = [];
    const metas: Array<Record<string, string | number | boolean | string[]>> = [
      { kind: 'note', n: 1, colors: ['red', 'blue'], label: 'Alpha Beta' },
      { kind: 'note', n: 5, colors: ['green'], label: 'gamma ray' },
      { kind: 'Task', n: 10, colors: ['RED'], label: 'ALPHA' },
      { kind: 'task', n: 20, colors: [], label: 'delta' },
      { n: 15, label: 'epsilon alpha' },
    ];
    const contentOf = (i: number) => `List document number ${i + 1}, for sorting and filtering.`;

    beforeAll(async () => {
      for (const [i, metadata] of metas.entries()) {
        const r = await client.documents.add({ content: contentOf(i), containerTag: tag, metadata });
        ids.push(r.id);
        await sleep(5); // distinct createdAt
      }
      for (const id of ids) await waitForDoc(client, id, 'done', (d) => d.status === 'done');
    });

    const listIds = async (filters: Filters | string, extra: Partial<DocumentListParams> = {}) => {
      const l = await client.documents.list({ containerTags: [tag], limit: 50, filters: filters as Filters, ...extra });
      return l.memories.map((m) => ids.indexOf(m.id) + 1).sort((a, b) => a - b);
    };

    it('pagination with limit/page as numbers and as numeric strings', async () => {
      const p1 = await client.documents.list({ containerTags: [tag], limit: 2, page: 1 });
      expect(p1.pagination).toEqual({ currentPage: 1, totalPages: 3, totalItems: 5, limit: 2 });
      expect(p1.memories).toHaveLength(2);
      const p2 = await client.documents.list({ containerTags: [tag], limit: '2', page: '2' });
      expect(p2.pagination).toEqual({ currentPage: 2, totalPages: 3, totalItems: 5, limit: 2 });
      expect(p2.memories).toHaveLength(2);
      const p3 = await client.documents.list({ containerTags: [tag], limit: 2, page: '3' });
      expect(p3.pagination).toEqual({ currentPage: 3, totalPages: 3, totalItems: 5, limit: 2 });
      expect(p3.memories).toHaveLength(1);
      const seen = [...p1.memories, ...p2.memories, ...p3.memories].map((m) => m.id);
      expect(new Set(seen).size).toBe(5);
      expect([...seen].sort()).toEqual([...ids].sort());
      const p4 = await client.documents.list({ containerTags: [tag], limit: 2, page: 4 });
      expect(p4.memories).toEqual([]);
      expect(p4.pagination).toEqual({ currentPage: 4, totalPages: 3, totalItems: 5, limit: 2 });

      // The same with raw strings on the wire.
      const r = await raw.call('POST', '/v3/documents/list', { containerTags: [tag], limit: '2', page: '2' });
      expect(r.status).toBe(200);
      expect(r.headers.get('content-type')).toMatch(/^application\/json/);
      expect(r.body.pagination).toEqual({ currentPage: 2, totalPages: 3, totalItems: 5, limit: 2 });
      expect(r.body.memories.map((m: { id: string }) => m.id)).toEqual(p2.memories.map((m) => m.id));

      // Default limit and page.
      const all = await client.documents.list({ containerTags: [tag] });
      expect(all.pagination).toEqual({ currentPage: 1, totalPages: 1, totalItems: 5, limit: 50 });
      for (const m of all.memories) {
        for (const k of LIST_FIELDS) expect(m, `field ${k}`).toHaveProperty(k);
        expect(m.containerTags).toEqual([tag]);
        expect(m.status).toBe('done');
        expect(m.connectionId).toBeNull();
      }
    });

    it('sort by createdAt and updatedAt, asc and desc, agrees with the timestamps', async () => {
      const asc = await client.documents.list({ containerTags: [tag], sort: 'createdAt', order: 'asc' });
      expect(asc.memories.map((m) => m.id)).toEqual(ids);
      const created = asc.memories.map((m) => m.createdAt);
      expect(created).toEqual([...created].sort());
      const desc = await client.documents.list({ containerTags: [tag], sort: 'createdAt', order: 'desc' });
      expect(desc.memories.map((m) => m.id)).toEqual([...ids].reverse());
      // The default is createdAt desc.
      const def = await client.documents.list({ containerTags: [tag] });
      expect(def.memories.map((m) => m.id)).toEqual([...ids].reverse());

      // Touch the oldest document: it becomes the most recently updated.
      await client.documents.update(ids[0]!, { metadata: { ...metas[0]!, touched: true } });
      const upDesc = await waitFor('oldest is now newest by updatedAt', async () => {
        const l = await client.documents.list({ containerTags: [tag], sort: 'updatedAt', order: 'desc' });
        return l.memories[0]?.id === ids[0] ? l : undefined;
      });
      const updated = upDesc.memories.map((m) => m.updatedAt);
      expect(updated).toEqual([...updated].sort().reverse());
      const upAsc = await client.documents.list({ containerTags: [tag], sort: 'updatedAt', order: 'asc' });
      expect(upAsc.memories.map((m) => m.id)).toEqual(upDesc.memories.map((m) => m.id).reverse());
      expect(upAsc.memories.at(-1)!.id).toBe(ids[0]);
      expect(upAsc.memories.map((m) => m.updatedAt)).toEqual([...updated].reverse());
      // createdAt order did not change.
      const asc2 = await client.documents.list({ containerTags: [tag], sort: 'createdAt', order: 'asc' });
      expect(asc2.memories.map((m) => m.id)).toEqual(ids);
    });

    it('filters: AND/OR nesting, negate, ignoreCase, string_contains, numeric, array_contains; object or JSON string', async () => {
      expect(await listIds({ AND: [{ key: 'kind', value: 'note' }] })).toEqual([1, 2]);
      expect(await listIds({ AND: [{ key: 'kind', value: 'TASK', ignoreCase: true }] })).toEqual([3, 4]);
      expect(await listIds({ AND: [{ key: 'kind', value: 'TASK', ignoreCase: 'true' }] })).toEqual([3, 4]);
      expect(await listIds({ AND: [{ key: 'kind', value: 'task' }] })).toEqual([4]);
      expect(await listIds({ AND: [{ key: 'kind', value: 'note', negate: true }] })).toEqual([3, 4, 5]);
      expect(await listIds({ OR: [{ key: 'kind', value: 'note' }, { key: 'kind', value: 'task' }] })).toEqual([1, 2, 4]);
      expect(await listIds({ AND: [{ key: 'n', value: '5', filterType: 'numeric', numericOperator: '>=' }] })).toEqual([2, 3, 4, 5]);
      expect(await listIds({ AND: [{ key: 'n', value: '10', filterType: 'numeric', numericOperator: '<' }] })).toEqual([1, 2]);
      expect(await listIds({ AND: [{ key: 'n', value: '10', filterType: 'numeric', numericOperator: '=' }] })).toEqual([3]);
      expect(await listIds({ AND: [{ key: 'n', value: '15', filterType: 'numeric', numericOperator: '>' }] })).toEqual([4]);
      expect(await listIds({ AND: [{ key: 'n', value: '5', filterType: 'numeric', numericOperator: '<=' }] })).toEqual([1, 2]);
      expect(await listIds({ AND: [{ key: 'label', value: 'alpha', filterType: 'string_contains' }] })).toEqual([5]);
      expect(await listIds({ AND: [{ key: 'label', value: 'alpha', filterType: 'string_contains', ignoreCase: true }] })).toEqual([1, 3, 5]);
      expect(await listIds({ AND: [{ key: 'label', value: 'alpha', filterType: 'string_contains', ignoreCase: true, negate: true }] })).toEqual([2, 4]);
      expect(await listIds({ AND: [{ key: 'colors', value: 'red', filterType: 'array_contains' }] })).toEqual([1]);
      expect(await listIds({ AND: [{ key: 'colors', value: 'red', filterType: 'array_contains', ignoreCase: true }] })).toEqual([1, 3]);
      expect(await listIds({ AND: [{ key: 'colors', value: 'green', filterType: 'array_contains' }, { key: 'kind', value: 'note' }] })).toEqual([2]);

      const nested: Filters = {
        OR: [
          { AND: [{ key: 'kind', value: 'note' }, { key: 'n', value: '3', filterType: 'numeric', numericOperator: '>' }] },
          { AND: [{ key: 'kind', value: 'task' }, { OR: [{ key: 'colors', value: 'x', filterType: 'array_contains' }, { key: 'n', value: '20', filterType: 'numeric' }] }] },
        ],
      };
      expect(await listIds(nested)).toEqual([2, 4]);
      expect(await listIds(JSON.stringify(nested))).toEqual([2, 4]);
      expect(await listIds(JSON.stringify({ AND: [{ key: 'kind', value: 'note', negate: 'true' }] }))).toEqual([3, 4, 5]);

      // With pagination: totals count the filtered set.
      const page = await client.documents.list({ containerTags: [tag], limit: 1, filters: { AND: [{ key: 'kind', value: 'note' }] } });
      expect(page.pagination).toEqual({ currentPage: 1, totalPages: 2, totalItems: 2, limit: 1 });
    });

    it('includeContent true gives content; false or absent omits it', async () => {
      const withContent = await client.documents.list({ containerTags: [tag], includeContent: true, sort: 'createdAt', order: 'asc' });
      expect(withContent.memories.map((m) => m.content)).toEqual(metas.map((_, i) => contentOf(i)));
      const without = await client.documents.list({ containerTags: [tag], includeContent: false });
      expect(without.memories).toHaveLength(5);
      for (const m of without.memories) expect(m).not.toHaveProperty('content');
      const absent = await client.documents.list({ containerTags: [tag] });
      for (const m of absent.memories) expect(m).not.toHaveProperty('content');
    });

    it('bad parameters: a 400 the SDK throws as BadRequestError, naming the parameter', async () => {
      await expectApiError(client.documents.list({ limit: 201 }), BadRequestError, 400, /limit/);
      await expectApiError(client.documents.list({ limit: '201' }), BadRequestError, 400, /limit/);
      await expectApiError(client.documents.list({ limit: 0 }), BadRequestError, 400, /limit/);
      await expectApiError(client.documents.list({ limit: 'ten' }), BadRequestError, 400, /limit/);
      await expectApiError(client.documents.list({ page: 0 }), BadRequestError, 400, /page/);
      await expectApiError(client.documents.list({ sort: 'bogus' as 'createdAt' }), BadRequestError, 400, /sort/);
      await expectApiError(client.documents.list({ order: 'sideways' as 'asc' }), BadRequestError, 400, /order/);
      await expectApiError(client.documents.list({ filters: '{not json' as unknown as Filters }), BadRequestError, 400, /filters/);
      await expectApiError(client.documents.list({ filters: { AND: [{ key: 'n', value: '1', filterType: 'fuzzy' as 'numeric' }] } }), BadRequestError, 400, /filters/);
      const limit200 = await client.documents.list({ limit: 200 });
      expect(limit200.pagination.limit).toBe(200);
    });
  });

  describe('batchAdd', () => {
    it('objects: one invalid item is reported while the others are added', async () => {
      const tag = unique('sdk-batch');
      const other = unique('sdk-batch-own');
      const customId = unique('b1');
      const res = await client.documents.batchAdd({
        containerTag: tag,
        metadata: { batch: true },
        documents: [
          { content: 'The first document of a batch.', customId, metadata: { i: 1 } },
          { content: 'The second document has a bad customId.', customId: 'bad id!' },
          { content: 'The third document of a batch, with its own tag.', containerTag: other },
        ],
      });
      expect(Object.keys(res).sort()).toEqual(['failed', 'results', 'success']);
      expect(res.success).toBe(2);
      expect(res.failed).toBe(1);
      expect(res.results).toHaveLength(3);
      expect(res.results[0]).toEqual({ id: expect.stringMatching(/\S/), status: 'queued' });
      expect(res.results[1]).toMatchObject({ id: '', status: 'error', error: expect.any(String) });
      expect(res.results[1]!.details).toMatch(/customId/);
      expect(res.results[2]).toEqual({ id: expect.stringMatching(/\S/), status: 'queued' });

      const d0 = await waitForDoc(client, res.results[0]!.id, 'done', (d) => d.status === 'done');
      expect(d0).toMatchObject({ customId, containerTags: [tag], metadata: { batch: true, i: 1 }, content: 'The first document of a batch.' });
      const d2 = await waitForDoc(client, res.results[2]!.id, 'done', (d) => d.status === 'done');
      expect(d2).toMatchObject({ containerTags: [other], metadata: { batch: true } });
    });

    it('plain strings, one of them empty', async () => {
      const tag = unique('sdk-batch-str');
      const res = await client.documents.batchAdd({ containerTag: tag, documents: ['A plain string document.', '', 'Another plain string document.'] });
      expect(res.success).toBe(2);
      expect(res.failed).toBe(1);
      expect(res.results.map((r) => r.status)).toEqual(['queued', 'error', 'queued']);
      expect(res.results[1]!.id).toBe('');
      expect(typeof res.results[1]!.error).toBe('string');
      for (const r of [res.results[0]!, res.results[2]!]) await waitForDoc(client, r.id, 'done', (d) => d.status === 'done');
      const l = await client.documents.list({ containerTags: [tag], includeContent: true, sort: 'createdAt', order: 'asc' });
      expect(l.memories.map((m) => m.content)).toEqual(['A plain string document.', 'Another plain string document.']);
    });

    it('items taken at once keep the order of the batch: a repeated customId ends as its last item, createdAt as given', async () => {
      const tag = unique('sdk-batch-order');
      const customId = unique('again');
      const text = (i: number) => `Batch item number ${i} of forty, in the order it was sent.`;
      const documents = Array.from({ length: 40 }, (_, i) => (i === 5 ? { content: 'The first version of a repeated customId.', customId } : i === 31 ? { content: 'The second version of a repeated customId.', customId } : { content: text(i) }));
      const res = await client.documents.batchAdd({ containerTag: tag, documents });
      expect(res).toMatchObject({ success: 40, failed: 0 });
      // The same document twice: the same id in both places, and its content the later item's.
      expect(res.results[31]!.id).toBe(res.results[5]!.id);
      for (const r of res.results) await waitForDoc(client, r.id, 'done', (d) => d.status === 'done');
      expect((await client.documents.get(customId)).content).toBe('The second version of a repeated customId.');
      const l = await client.documents.list({ containerTags: [tag], includeContent: true, sort: 'createdAt', order: 'asc', limit: 100 });
      expect(l.memories.map((m) => m.content)).toEqual(
        Array.from({ length: 40 }, (_, i) => (i === 5 ? 'The second version of a repeated customId.' : text(i))).filter((_, i) => i !== 31),
      );
    });
  });

  it('listProcessing: {documents, totalCount}, holding documents that are not done yet', async () => {
    const tag = unique('sdk-proc');
    // Without the entrance (and, as ./memstream up runs it, the other stages of its worker host),
    // documents stay queued and are certainly "processing"; the projection, in the other host, records them.
    await stack.stopService('extractor', 'SIGTERM');
    let restarted = false;
    try {
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) ids.push((await client.documents.add({ content: `A document held in processing, number ${i}.`, containerTag: tag, customId: unique('proc') })).id);
      for (const id of ids) await waitForDoc(client, id, 'queued', (d) => d.status === 'queued');
      const p = await client.documents.listProcessing();
      expect(Object.keys(p).sort()).toEqual(['documents', 'totalCount']);
      expect(p.totalCount).toBeGreaterThanOrEqual(3);
      expect(p.totalCount).toBeGreaterThanOrEqual(p.documents.length);
      for (const d of p.documents) {
        for (const k of PROCESSING_FIELDS) expect(d, `field ${k}`).toHaveProperty(k);
        expect(['queued', 'extracting', 'chunking', 'embedding', 'indexing']).toContain(d.status);
        expect(d.createdAt).toMatch(ISO);
      }
      const mine = p.documents.filter((d) => ids.includes(d.id));
      expect(mine.map((d) => d.id).sort()).toEqual([...ids].sort());
      for (const d of mine) expect(d).toMatchObject({ status: 'queued', containerTags: [tag], type: 'text' });

      await stack.start('extractor');
      restarted = true;
      for (const id of ids) await waitForDoc(client, id, 'done', (d) => d.status === 'done');
      const after = await client.documents.listProcessing();
      expect(after.documents.filter((d) => ids.includes(d.id))).toEqual([]);
    } finally {
      if (!restarted) await stack.start('extractor');
    }
  });

  describe('delete', () => {
    it('by id and by customId: GET is then a 404 NotFoundError', async () => {
      const a = await client.documents.add({ content: 'A document deleted by its id.' });
      await waitForDoc(client, a.id, 'done', (d) => d.status === 'done');
      // The SDK types it void; on a 204 it hands back null.
      expect(await client.documents.delete(a.id)).toBeFalsy();
      await expectApiError(client.documents.get(a.id), NotFoundError, 404);

      const customId = unique('del');
      const b = await client.documents.add({ content: 'A document deleted by its customId.', customId });
      await waitForDoc(client, b.id, 'done', (d) => d.status === 'done');
      await client.documents.delete(customId);
      await expectApiError(client.documents.get(b.id), NotFoundError, 404);
      await expectApiError(client.documents.get(customId), NotFoundError, 404);
      // Deleting again: 404.
      await expectApiError(client.documents.delete(customId), NotFoundError, 404);

      // The customId can be used again: a new document under the same id, with nothing of the old one.
      const c = await client.documents.add({ content: 'A new document under a customId that was deleted.', customId });
      expect(c).toEqual({ id: b.id, status: 'queued' });
      const d = await waitForDoc(client, c.id, 'done', (x) => x.status === 'done');
      expect(d.content).toBe('A new document under a customId that was deleted.');
      expect(d.customId).toBe(customId);
      expect(d.metadata).toEqual({});
    });

    it('a document still being processed can be deleted, and stays deleted', async () => {
      const tag = unique('sdk-del-busy');
      const a = await client.documents.add({ content: 'A document deleted while it is still queued.\n\n'.repeat(50), containerTag: tag });
      await client.documents.delete(a.id);
      await expectApiError(client.documents.get(a.id), NotFoundError, 404);
      await sleep(800);
      await expectApiError(client.documents.get(a.id), NotFoundError, 404);
      const l = await client.documents.list({ containerTags: [tag] });
      expect(l.memories).toEqual([]);
      expect(l.pagination.totalItems).toBe(0);
    });

    it('deleteBulk by ids: unknown ids are reported, deletedCount counts the real ones', async () => {
      const a = await client.documents.add({ content: 'Bulk delete target one.' });
      const b = await client.documents.add({ content: 'Bulk delete target two.' });
      for (const id of [a.id, b.id]) await waitForDoc(client, id, 'done', (d) => d.status === 'done');
      const res = await client.documents.deleteBulk({ ids: [a.id, 'unknownDocument123', b.id] });
      expect(res.deletedCount).toBe(2);
      expect(res.errors).toEqual([{ id: 'unknownDocument123', error: expect.any(String) }]);
      expect(typeof res.success).toBe('boolean');
      for (const id of [a.id, b.id]) await expectApiError(client.documents.get(id), NotFoundError, 404);
    });

    it('deleteBulk by containerTags: every document of the tag is gone', async () => {
      const tag = unique('sdk-bulk-tag');
      const keep = unique('sdk-bulk-keep');
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) ids.push((await client.documents.add({ content: `Tagged for bulk deletion, number ${i}.`, containerTag: tag })).id);
      const kept = await client.documents.add({ content: 'Not tagged for bulk deletion.', containerTag: keep });
      for (const id of [...ids, kept.id]) await waitForDoc(client, id, 'done', (d) => d.status === 'done');
      const res = await client.documents.deleteBulk({ containerTags: [tag] });
      expect(res).toMatchObject({ success: true, deletedCount: 3 });
      const l = await client.documents.list({ containerTags: [tag] });
      expect(l.memories).toEqual([]);
      expect(l.pagination.totalItems).toBe(0);
      for (const id of ids) await expectApiError(client.documents.get(id), NotFoundError, 404);
      expect((await client.documents.get(kept.id)).status).toBe('done');
    });
  });

  it('uploadFile: a small text file becomes a document with its text', async () => {
    const tag = unique('sdk-upload');
    const text = 'Uploaded through the SDK: memstream reads plain text files.\n';
    const file = await toFile(Buffer.from(text, 'utf8'), 'upload-note.txt', { type: 'text/plain' });
    const res = await client.documents.uploadFile({ file, containerTag: tag, metadata: JSON.stringify({ via: 'upload' }) });
    expect(Object.keys(res).sort()).toEqual(['id', 'status']);
    expect(typeof res.id).toBe('string');
    expect(typeof res.status).toBe('string');
    const doc = await waitForDoc(client, res.id, 'done', (d) => d.status === 'done');
    expect(doc.content).toContain('memstream reads plain text files.');
    expect(doc.containerTags).toEqual([tag]);
    expect(doc.metadata).toMatchObject({ via: 'upload' });
  });

  it('bad requests through the SDK: typed errors whose body names the problem', async () => {
    await expectApiError(client.documents.get('noSuchDocument123'), NotFoundError, 404);
    await expectApiError(client.documents.update('noSuchDocument123', { metadata: { a: 1 } }), NotFoundError, 404);
    await expectApiError(client.documents.delete('noSuchDocument123'), NotFoundError, 404);
    await expectApiError(client.documents.add({ content: '' }), BadRequestError, 400, /content/);
    await expectApiError(client.documents.add({ content: 'x', customId: 'has space' }), BadRequestError, 400, /customId/);
    await expectApiError(client.documents.add({ content: 'x', containerTag: 'bad tag!' }), BadRequestError, 400, /containerTag/);
    await expectApiError(client.documents.add({ content: 'x', metadata: { nested: { a: 1 } as unknown as string } }), BadRequestError, 400, /metadata/);
    await expectApiError(client.documents.batchAdd({ documents: [] }), BadRequestError, 400, /documents/);
    await expectApiError(client.documents.batchAdd({ documents: Array.from({ length: 101 }, (_, i) => `doc ${i}`) }), BadRequestError, 400, /documents/);
    await expectApiError(client.documents.deleteBulk({}), BadRequestError, 400, /ids|containerTags|filepath/);
    const customId = unique('cid-keep');
    const a = await client.documents.add({ content: 'A document that keeps its customId.', customId });
    await expectApiError(client.documents.update(a.id, { customId: unique('other') }), BadRequestError, 400, /customId/);
    await expectApiError(client.documents.update(a.id, { content: '' }), BadRequestError, 400, /content/);
  });

  describe('raw HTTP', () => {
    it('filters nested 1,000 levels deep: a 400 naming filters, not a 500', async () => {
      const body = `{"filters":${'{"AND":['.repeat(1000)}{"key":"k","value":"v"}${']}'.repeat(1000)}}`;
      const r = await raw.call('POST', '/v3/documents/list', body);
      expect(r.headers.get('content-type')).toMatch(/^application\/json/);
      expect(r.status, JSON.stringify(r.body)).toBe(400);
      expect(r.body.details).toMatch(/^filters/);
    });

    it('/v3/memories/* answers 308 to /v3/documents/*, and following it works with the same method and body', async () => {
      const tag = unique('sdk-redirect');
      const a = await client.documents.add({ content: 'A document reached through the old memories path.', containerTag: tag });
      await waitForDoc(client, a.id, 'done', (d) => d.status === 'done');
      const auth = { authorization: `Bearer ${stack.apiKey}`, 'content-type': 'application/json' };
      const body = JSON.stringify({ containerTags: [tag] });

      const manual = await fetch(`${stack.baseUrl}/v3/memories/list`, { method: 'POST', headers: auth, body, redirect: 'manual' });
      expect(manual.status).toBe(308);
      expect(manual.headers.get('location')).toBe('/v3/documents/list');
      const followedByHand = await fetch(new URL(manual.headers.get('location')!, stack.baseUrl), { method: 'POST', headers: auth, body });
      expect(followedByHand.status).toBe(200);
      expect(followedByHand.headers.get('content-type')).toMatch(/^application\/json/);
      expect(((await followedByHand.json()) as { memories: Array<{ id: string }> }).memories.map((m) => m.id)).toEqual([a.id]);

      const followed = await fetch(`${stack.baseUrl}/v3/memories/list`, { method: 'POST', headers: auth, body });
      expect(followed.status).toBe(200);
      expect(followed.url).toBe(`${stack.baseUrl}/v3/documents/list`);
      expect(((await followed.json()) as { memories: Array<{ id: string }> }).memories.map((m) => m.id)).toEqual([a.id]);

      const del = await fetch(`${stack.baseUrl}/v3/memories/${a.id}`, { method: 'DELETE', headers: auth, redirect: 'manual' });
      expect(del.status).toBe(308);
      expect(del.headers.get('location')).toBe(`/v3/documents/${a.id}`);
      const delFollowed = await fetch(`${stack.baseUrl}/v3/memories/${a.id}`, { method: 'DELETE', headers: auth });
      expect(delFollowed.status).toBe(204);
      await expectApiError(client.documents.get(a.id), NotFoundError, 404);
    });

    it('401 {error} without a key, with a wrong key, with a malformed header; the SDK throws AuthenticationError', async () => {
      const url = `${stack.baseUrl}/v3/documents/list`;
      const cases: Array<[string, Record<string, string>]> = [
        ['no header', {}],
        ['wrong key', { authorization: 'Bearer wrong-key-wrong-key' }],
        ['not Bearer', { authorization: `Basic ${stack.apiKey}` }],
        ['Bearer without a key', { authorization: 'Bearer' }],
        ['two tokens', { authorization: `Bearer ${stack.apiKey} extra` }],
        ['the key alone', { authorization: stack.apiKey }],
      ];
      for (const [name, headers] of cases) {
        const r = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: '{}' });
        expect(r.status, name).toBe(401);
        expect(r.headers.get('content-type'), name).toMatch(/^application\/json/);
        const b = (await r.json()) as { error: unknown; details?: unknown };
        expect(typeof b.error, name).toBe('string');
        expect(String(b.error).length, name).toBeGreaterThan(0);
      }
      const wrong = recordingClient(stack, { apiKey: 'wrong-key-wrong-key' }).client;
      await expectApiError(wrong.documents.list({}), AuthenticationError, 401);
      await expectApiError(wrong.documents.add({ content: 'never stored' }), AuthenticationError, 401);
    });

    it('GET /openapi.json describes every /v3/documents operation', async () => {
      const r = await fetch(`${stack.baseUrl}/openapi.json`, { headers: { authorization: `Bearer ${stack.apiKey}` } });
      expect(r.status).toBe(200);
      expect(r.headers.get('content-type')).toMatch(/^application\/json/);
      const doc = (await r.json()) as { openapi?: string; paths: Record<string, Record<string, unknown>> };
      expect(doc.openapi).toMatch(/^3\./);
      const want: Array<[string, string]> = [
        ['/v3/documents', 'post'],
        ['/v3/documents/{id}', 'get'],
        ['/v3/documents/{id}', 'patch'],
        ['/v3/documents/{id}', 'delete'],
        ['/v3/documents/list', 'post'],
        ['/v3/documents/batch', 'post'],
        ['/v3/documents/bulk', 'delete'],
        ['/v3/documents/processing', 'get'],
        ['/v3/documents/file', 'post'],
      ];
      for (const [p, m] of want) expect(doc.paths[p]?.[m], `${m.toUpperCase()} ${p}`).toBeDefined();
    });
  });

  // Last: every answer the SDK received in this file.
  it('every JSON answer the SDK received had content-type application/json', () => {
    expect(exchanges.length).toBeGreaterThan(50);
    const bad = exchanges.filter((x) => x.body !== '' && !/^application\/json/.test(x.contentType ?? ''));
    expect(bad.map((x) => `${x.method} ${x.url} → ${x.status} ${x.contentType}`)).toEqual([]);
    // The only answers without a body are DELETE's 204s.
    const empty = exchanges.filter((x) => x.body === '');
    for (const x of empty) expect(`${x.method} ${x.status}`).toBe('DELETE 204');
    const statuses = new Map<number, number>();
    for (const x of exchanges) statuses.set(x.status, (statuses.get(x.status) ?? 0) + 1);
    console.log(`[sdk] ${exchanges.length} SDK exchanges; statuses ${JSON.stringify(Object.fromEntries(statuses))}`);
  });
});
