import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import Supermemory, { BadRequestError } from 'supermemory';
import type { SearchDocumentsResponse, SearchExecuteResponse, SearchMemoriesResponse } from 'supermemory/resources/search';
import { startTestStack, type TestStack } from './support/stack.js';
import { recordingClient, unique, waitForDoc, type Exchange } from './support/sdk.js';

/**
 * Search through the official `supermemory` SDK (pinned) against a real memstream: documents are
 * added over HTTP, travel the whole pipeline (extract, chunk, embed, index) as real processes,
 * and are then found with every search method the SDK has: search.documents and search.execute
 * (POST /v3/search), search.memories and search itself (POST /v4/search).
 */

/** Every field the SDK's SearchDocumentsResponse.Result names (content only with includeFullDocs). */
const V3_FIELDS = ['documentId', 'title', 'type', 'score', 'chunks', 'metadata', 'createdAt', 'updatedAt', 'summary'] as const;
const V3_CHUNK_FIELDS = ['content', 'isRelevant', 'score'] as const;
/** The fields SearchMemoriesResponse.Result requires, and the ones memstream always sends. */
const V4_FIELDS = ['id', 'similarity', 'metadata', 'updatedAt', 'filepath', 'documents'] as const;
const V4_DOCUMENT_FIELDS = ['id', 'createdAt', 'updatedAt', 'title', 'type', 'metadata'] as const;
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;

function expectV3Shape(out: SearchDocumentsResponse | SearchExecuteResponse): void {
  expect(Object.keys(out).sort()).toEqual(['results', 'timing', 'total']);
  expect(typeof out.timing).toBe('number');
  expect(out.total).toBe(out.results.length);
  for (const r of out.results) {
    for (const k of V3_FIELDS) expect(r, `field ${k}`).toHaveProperty(k);
    expect(r.createdAt).toMatch(ISO);
    expect(r.updatedAt).toMatch(ISO);
    expect(r.score).toBeGreaterThan(0);
    expect(r.score).toBeLessThanOrEqual(1);
    expect(r.chunks.length).toBeGreaterThan(0);
    for (const c of r.chunks) for (const k of V3_CHUNK_FIELDS) expect(c, `chunk field ${k}`).toHaveProperty(k);
  }
}

function expectV4Shape(out: SearchMemoriesResponse, text: 'memory' | 'chunk' | 'both'): void {
  expect(Object.keys(out).sort()).toEqual(['results', 'timing', 'total']);
  expect(typeof out.timing).toBe('number');
  expect(out.total).toBe(out.results.length);
  for (const r of out.results) {
    for (const k of V4_FIELDS) expect(r, `field ${k}`).toHaveProperty(k);
    expect(r.similarity).toBeGreaterThan(0);
    expect(r.similarity).toBeLessThanOrEqual(1);
    expect(r.updatedAt).toMatch(ISO);
    if (text !== 'chunk') expect(typeof r.memory).toBe('string');
    else expect(r).not.toHaveProperty('memory');
    if (text !== 'memory') expect(typeof r.chunk).toBe('string');
    else expect(r).not.toHaveProperty('chunk');
    expect(r.documents).toHaveLength(1);
    for (const k of V4_DOCUMENT_FIELDS) expect(r.documents![0], `document field ${k}`).toHaveProperty(k);
  }
}

/** The document a v4 hit came from. */
const docOf = (r: SearchMemoriesResponse.Result): string => r.documents![0]!.id;

describe('search through the official SDK against memstream', () => {
  let stack: TestStack;
  let client: Supermemory;
  let exchanges: Exchange[];
  const tagA = unique('search-a');
  const tagB = unique('search-b');
  /** Document ids by name; the A and B sets, to check isolation. */
  const tagC = unique('search-conv');
  const ids: Record<'lighthouseA' | 'sourdoughA' | 'lighthouseB' | 'glacierB' | 'conversationC', string> = { lighthouseA: '', sourdoughA: '', lighthouseB: '', glacierB: '', conversationC: '' };
  const inA = () => new Set([ids.lighthouseA, ids.sourdoughA]);
  const inB = () => new Set([ids.lighthouseB, ids.glacierB]);

  beforeAll(async () => {
    stack = await startTestStack();
    ({ client, exchanges } = recordingClient(stack));
    const add = async (content: string, containerTag: string, metadata: Record<string, string | number | boolean | string[]>, filepath?: string) => {
      const { id } = await client.documents.add({ content, containerTag, metadata, ...(filepath ? { filepath } : {}) });
      return id;
    };
    ids.lighthouseA = await add(
      '# The keeper\'s log\n\nThe lighthouse keeper polished the brass lens every night before the storm.\n\nGulls circled the lantern room at dawn.',
      tagA,
      { topic: 'sea', year: 2024, crew: ['keeper', 'cook'] },
      '/logs/keeper.md',
    );
    ids.sourdoughA = await add('# Sourdough\n\nFeed the sourdough starter with rye flour and lukewarm water twice a day.', tagA, { topic: 'bread', year: 2020 });
    // The same distinctive word as lighthouseA, in the other tag: isolation must hold even for a perfect match.
    ids.lighthouseB = await add('# Cliffs\n\nThe lighthouse on the northern cliff was automated decades ago; no keeper polishes its brass lens now.', tagB, { topic: 'sea', year: 2023 });
    ids.glacierB = await add('# Ice\n\nThe glacier retreats a few metres up the valley every summer.', tagB, { topic: 'ice', year: 2022 });
    // A short transcript of two dated sessions: all of it would fit in one 500-token chunk, so
    // single-turn hits show the conversation units at work, not a size limit.
    ids.conversationC = await add(
      [
        'Session 1 · 2024-03-02',
        'user: Morning! We finally adopted a puppy from the shelter on Saturday.',
        'assistant: Congratulations! What breed is it?',
        'user: A beagle. We named the beagle Biscuit, after the cookie.',
        'assistant: Biscuit is a lovely name for a beagle.',
        '',
        'Session 2 · 2024-03-09',
        'user: Can you suggest a weekend hike near the coast?',
        'assistant: The cliff path north of the harbour takes about three hours.',
      ].join('\n'),
      tagC,
      { topic: 'chat' },
    );
    await Promise.all(Object.values(ids).map((id) => waitForDoc(client, id, 'done', (d) => d.status === 'done', 30_000)));
  });
  afterAll(async () => {
    await stack?.teardown();
  });

  describe('POST /v3/search: search.documents and search.execute', () => {
    it('search.documents finds the right document first, never one of another tag, in the SDK shape', async () => {
      const out = await client.search.documents({ q: 'lighthouse keeper brass lens', containerTag: tagA });
      expectV3Shape(out);
      expect(out.results[0]!.documentId).toBe(ids.lighthouseA);
      for (const r of out.results) expect(inB().has(r.documentId), r.documentId).toBe(false);
      const top = out.results[0]!;
      expect(top).toMatchObject({ title: "The keeper's log", type: 'text', metadata: { topic: 'sea', year: 2024, crew: ['keeper', 'cook'] }, summary: null });
      expect(top).not.toHaveProperty('content');
      expect(top.chunks.some((c) => c.isRelevant && c.content.includes('brass lens'))).toBe(true);
    });

    it('search.execute with containerTags finds the other tag\'s document, and none of the first tag', async () => {
      const out = await client.search.execute({ q: 'lighthouse keeper brass lens', containerTags: [tagB] });
      expectV3Shape(out);
      expect(out.results[0]!.documentId).toBe(ids.lighthouseB);
      for (const r of out.results) expect(inA().has(r.documentId), r.documentId).toBe(false);
    });

    it('without a tag, both tags are searched', async () => {
      const out = await client.search.documents({ q: 'lighthouse keeper brass lens', limit: 100 });
      const found = out.results.map((r) => r.documentId);
      expect(found).toContain(ids.lighthouseA);
      expect(found).toContain(ids.lighthouseB);
    });

    it('honours filters, docId, chunkThreshold, includeFullDocs and includeSummary', async () => {
      // The filter leaves only a document without the query's words: found at threshold 0, as a dense candidate.
      const bread = await client.search.documents({ q: 'lighthouse keeper', containerTag: tagA, chunkThreshold: 0, filters: { AND: [{ key: 'topic', value: 'bread' }] } });
      expect(bread.results.map((r) => r.documentId)).toEqual([ids.sourdoughA]);
      const recent = await client.search.execute({
        q: 'lighthouse glacier sourdough',
        containerTags: [tagA, tagB],
        chunkThreshold: 0,
        filters: { OR: [{ key: 'year', value: '2023', filterType: 'numeric', numericOperator: '>=' }] },
      });
      expect(recent.results.map((r) => r.documentId).sort()).toEqual([ids.lighthouseA, ids.lighthouseB].sort());
      const within = await client.search.documents({ q: 'lighthouse', docId: ids.sourdoughA, chunkThreshold: 0 });
      expect(within.results.map((r) => r.documentId)).toEqual([ids.sourdoughA]);
      // Above 0.5 a chunk must hold the query's words, not only be near it in vector space.
      const strict = await client.search.documents({ q: 'glacier valley', chunkThreshold: 0.51 });
      expect(strict.results.map((r) => r.documentId)).toEqual([ids.glacierB]);
      const full = await client.search.documents({ q: 'sourdough rye', containerTag: tagA, limit: 1, includeFullDocs: true, includeSummary: true });
      expect(full.results[0]!.content).toContain('Feed the sourdough starter with rye flour');
      expect(full.results[0]!.summary).toBeNull();
    });
  });

  describe('POST /v4/search: search.memories and search()', () => {
    it('search.memories in documents mode finds the right chunk first, never one of another tag', async () => {
      const out = await client.search.memories({ q: 'sourdough starter rye flour', containerTag: tagA, searchMode: 'documents' });
      expectV4Shape(out, 'chunk');
      expect(docOf(out.results[0]!)).toBe(ids.sourdoughA);
      expect(out.results[0]!.chunk).toContain('sourdough starter');
      for (const r of out.results) expect(inB().has(docOf(r)), docOf(r)).toBe(false);
    });

    it('search() in the other tag, by searchMode: memories gives memory hits, documents gives chunk', async () => {
      // Memory hits (docs/memory.md) are memories, not chunks: their ids are mem_…, and their
      // source documents come only with include.documents. Memories of tag A never appear.
      const memories = await client.search({ q: 'glacier retreats valley', containerTag: tagB, searchMode: 'memories', include: { documents: true } });
      for (const r of memories.results) {
        expect(r.id).toMatch(/^mem_/);
        expect(typeof r.memory).toBe('string');
        expect(r).not.toHaveProperty('chunk');
        for (const d of r.documents ?? []) expect(inA().has(d.id), d.id).toBe(false);
      }
      const documents = await client.search({ q: 'lighthouse keeper brass lens', containerTag: tagB, searchMode: 'documents' });
      expectV4Shape(documents, 'chunk');
      expect(docOf(documents.results[0]!)).toBe(ids.lighthouseB);
      for (const r of documents.results) expect(inA().has(docOf(r)), docOf(r)).toBe(false);
    });

    it('honours filters, threshold, limit and include', async () => {
      // In a four-document store 'lighthouse' is in half of them, where BM25's idf is 0: threshold 0.
      const sea = await client.search({ q: 'lighthouse sourdough', searchMode: 'documents', containerTag: tagA, threshold: 0, filters: { AND: [{ key: 'crew', value: 'cook', filterType: 'array_contains' }] } });
      expect(new Set(sea.results.map(docOf))).toEqual(new Set([ids.lighthouseA]));
      const strict = await client.search.memories({ q: 'gulls lantern', searchMode: 'documents', threshold: 0.51 });
      expect(strict.results.length).toBeGreaterThan(0);
      for (const r of strict.results) {
        expect(r.similarity).toBeGreaterThanOrEqual(0.51);
        expect(docOf(r)).toBe(ids.lighthouseA);
      }
      expect((await client.search({ q: 'the', searchMode: 'documents', limit: 1 })).results).toHaveLength(1);
      const underLogs = await client.search({ q: 'lighthouse glacier sourdough', searchMode: 'documents', filepath: '/logs/', threshold: 0 });
      expect(new Set(underLogs.results.map(docOf))).toEqual(new Set([ids.lighthouseA]));
      expect(underLogs.results[0]!.filepath).toBe('/logs/keeper.md');
      const withChunks = await client.search({ q: 'glacier', searchMode: 'documents', containerTag: tagB, limit: 1, include: { chunks: true, summaries: true } });
      const hit = withChunks.results[0]!;
      expect(hit.chunks).toEqual([{ content: hit.chunk, documentId: ids.glacierB, position: expect.any(Number), score: hit.similarity }]);
      expect(hit.documents![0]!.summary).toBeNull();
      // Accepted, and with no model behind them they change nothing.
      const plain = await client.search({ q: 'glacier', searchMode: 'documents', containerTag: tagB });
      const knobs = await client.search({ q: 'glacier', searchMode: 'documents', containerTag: tagB, rerank: true, rewriteQuery: true, aggregate: true });
      expect(knobs.results).toEqual(plain.results);
    });
  });

  it('/v4/search over a conversation returns single turns: one speaker, with its session date', async () => {
    const out = await client.search({ q: 'what did we name the beagle', containerTag: tagC, searchMode: 'documents' });
    expectV4Shape(out, 'chunk');
    expect(out.results.length).toBeGreaterThan(1);
    const top = out.results[0]!;
    expect(docOf(top)).toBe(ids.conversationC);
    expect(top.chunk).toBe('[2024-03-02] user: A beagle. We named the beagle Biscuit, after the cookie.');
    for (const r of out.results) {
      // Every hit is one turn of one speaker, prefixed with its own session's date.
      expect(r.chunk, r.chunk).toMatch(/^\[2024-03-0[29]\] (user|assistant): [^\n]+$/);
      expect(r.chunk!.match(/\b(user|assistant): /g), r.chunk).toHaveLength(1);
    }
    const hike = await client.search({ q: 'weekend hike near the coast', containerTag: tagC, searchMode: 'documents', limit: 1 });
    expect(hike.results[0]!.chunk).toBe('[2024-03-09] user: Can you suggest a weekend hike near the coast?');
  });

  it('bad input: a 400 the SDK throws as BadRequestError, naming the field', async () => {
    const cases: Array<[() => Promise<unknown>, RegExp]> = [
      [() => client.search.documents({ q: '' }), /\bq\b/],
      [() => client.search.execute({ q: 'x', limit: 1000 }), /limit/],
      [() => client.search.documents({ q: 'x', chunkThreshold: 2 }), /chunkThreshold/],
      [() => client.search({ q: 'x', threshold: -1 }), /threshold/],
      [() => client.search.memories({ q: 'x', searchMode: 'everything' as 'hybrid' }), /searchMode/],
      [() => client.search({ q: 'x', containerTag: 'not a tag' }), /containerTag/],
    ];
    // Each request starts only when it is awaited: built up front, a rejection that arrived before its turn
    // would count as unhandled (it failed CI once, when the gateway answered faster than the loop).
    for (const [request, names] of cases) {
      const err = await request().then(
        () => null,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(BadRequestError);
      const body = (err as BadRequestError).error as { error?: string; details?: string };
      expect(`${body.error} ${body.details}`).toMatch(names);
    }
  });

  it('GET /openapi.json describes both search operations', async () => {
    const r = await fetch(`${stack.baseUrl}/openapi.json`, { headers: { authorization: `Bearer ${stack.apiKey}` } });
    const doc = (await r.json()) as { paths: Record<string, Record<string, unknown>> };
    expect(doc.paths['/v3/search']?.post).toBeDefined();
    expect(doc.paths['/v4/search']?.post).toBeDefined();
  });

  it('every search answer the SDK received was JSON', () => {
    const searches = exchanges.filter((x) => /\/v[34]\/search$/.test(x.url));
    expect(searches.length).toBeGreaterThan(10);
    for (const x of searches) expect(x.contentType, `${x.method} ${x.url} → ${x.status}`).toMatch(/^application\/json/);
  });
});
