import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ZodError } from 'zod';
import { SqliteChunkIndex } from '@memstream/chunk-index';
import { V3SearchResponse, V4SearchResponse, type FilterInput, type Metadata } from '@memstream/contracts';
import { existsSync } from 'node:fs';
import { HashedEmbedder, HttpReranker, StaticEmbedder, installedSourceVersion, staticModelPath, type Embedder, type RerankApi } from '@memstream/embedder';
import { createServer } from 'node:http';
import { createLogger, documentIdForCustomId } from '@memstream/kit';
import { SqliteDocumentViews, type DocumentView } from '@memstream/views';
import { createApp } from '../app.js';
import { describeZodError } from '../http/errors.js';
import type { GatewayPorts } from './documents.js';
import { normaliseScore, searchDocuments, searchMemories, withLead, type SearchPorts } from './search.js';

/** Every field the SDK's SearchDocumentsResponse.Result names (content only with includeFullDocs). */
const V3_RESULT_FIELDS = ['chunks', 'createdAt', 'documentId', 'metadata', 'score', 'summary', 'title', 'type', 'updatedAt'];
const V3_CHUNK_FIELDS = ['content', 'isRelevant', 'score'];

interface DocSpec {
  id: string;
  tags: string[];
  chunks: string[];
  title?: string;
  metadata?: Metadata;
  filepath?: string;
  customId?: string;
}

function view(d: DocSpec, n: number): DocumentView {
  const at = new Date(Date.UTC(2025, 0, 1, 0, 0, n)).toISOString();
  return {
    id: d.id,
    customId: d.customId ?? null,
    revision: 1,
    status: 'done',
    title: d.title ?? null,
    type: 'text',
    content: d.chunks.join('\n\n'),
    summary: null,
    url: null,
    filepath: d.filepath ?? null,
    source: null,
    metadata: d.metadata ?? {},
    containerTags: d.tags,
    taskType: 'memory',
    contentHash: null,
    error: null,
    chunkCount: d.chunks.length,
    metadataVersion: 0,
    createdAt: at,
    updatedAt: at,
    version: 0,
  };
}

/** A real SQLite chunk index and view store, filled as the indexer and projection would. */
async function makeStore(embedder: Embedder = new HashedEmbedder()) {
  const dir = mkdtempSync(path.join(tmpdir(), 'search-unit-'));
  const index = SqliteChunkIndex.open(path.join(dir, 'index.sqlite'));
  const views = SqliteDocumentViews.open(':memory:');
  let n = 0;
  const add = async (d: DocSpec) => {
    const vectors = await embedder.embed(d.chunks);
    await index.replaceDocument({
      documentId: d.id,
      revision: 1,
      model: embedder.model,
      dim: embedder.dim,
      containerTags: d.tags,
      metadata: d.metadata ?? {},
      chunks: d.chunks.map((text, i) => ({ index: i, hash: createHash('sha256').update(text).digest('hex'), text, vector: vectors[i]! })),
    });
    expect(await views.put(view(d, n++), 0)).toBe(true);
  };
  const ports: SearchPorts = { index, views, embedder };
  const cleanup = async () => {
    await index.close();
    await views.close();
    rmSync(dir, { recursive: true, force: true });
  };
  return { index, views, embedder, add, ports, cleanup };
}

type Store = Awaited<ReturnType<typeof makeStore>>;

/** The ZodError a bad body raises, as the error middleware words it (the 400's details). */
async function rejection(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(ZodError);
    return describeZodError(err as ZodError);
  }
  throw new Error('expected the search to be refused');
}

describe('search handlers over a real SQLite index, view store and hashed embedder', () => {
  let s: Store;

  beforeAll(async () => {
    s = await makeStore();
    await s.add({
      id: 'doc-quokka',
      tags: ['zoo'],
      title: 'Quokkas',
      metadata: { kind: 'animal', year: 2021, lang: 'en' },
      filepath: '/notes/animals/quokka.md',
      chunks: [
        'The quokka is a small marsupial that lives on Rottnest Island.',
        'Visitors arrive by ferry from Fremantle in the morning.',
        'Every quokka seems to smile for the cameras of tourists.',
        'The island also has salt lakes and pink water.',
      ],
    });
    await s.add({
      id: 'doc-wombat',
      tags: ['zoo'],
      title: 'Wombats',
      metadata: { kind: 'animal', year: 2019, lang: 'en' },
      filepath: '/notes/animals/wombat.md',
      chunks: ['A wombat digs long burrows with strong claws.', 'Wombat droppings are famously cube shaped.'],
    });
    await s.add({
      id: 'doc-teapot',
      tags: ['kitchen'],
      title: 'Teapots',
      metadata: { kind: 'object', year: 2020, lang: 'fr' },
      filepath: '/notes/kitchen/teapot.md',
      chunks: ['Warm the teapot before brewing oolong leaves.', 'A cast iron teapot keeps tea hot for an hour.'],
    });
    // A document with a customId: its id is derived from it, as the gateway derives it.
    await s.add({
      id: documentIdForCustomId('kettle-notes'),
      customId: 'kettle-notes',
      tags: ['kitchen'],
      title: 'Kettles',
      metadata: { kind: 'object', year: 2018, lang: 'de' },
      filepath: '/notes/kitchen/kettle.md',
      chunks: ['The kettle whistles when the water boils.'],
    });
  });
  afterAll(async () => {
    await s.cleanup();
  });

  describe('POST /v3/search', () => {
    it('finds the right document first, in exactly the SDK result shape', async () => {
      const out = await searchDocuments(s.ports, { q: 'quokka marsupial', containerTag: 'zoo' });
      expect(V3SearchResponse.parse(out)).toEqual(out);
      expect(out.results[0]?.documentId).toBe('doc-quokka');
      expect(out.total).toBe(out.results.length);
      expect(typeof out.timing).toBe('number');
      for (const r of out.results) {
        expect(Object.keys(r).sort()).toEqual(V3_RESULT_FIELDS);
        for (const c of r.chunks) expect(Object.keys(c).sort()).toEqual(V3_CHUNK_FIELDS);
        expect(r.summary).toBeNull();
        expect(r.score).toBeGreaterThan(0);
        expect(r.score).toBeLessThanOrEqual(1);
      }
      const top = out.results[0]!;
      expect(top).toMatchObject({ title: 'Quokkas', type: 'text', metadata: { kind: 'animal', year: 2021, lang: 'en' }, createdAt: expect.any(String), updatedAt: expect.any(String) });
    });

    it('groups chunks per document: each document once, its best chunk first, its score its best chunk', async () => {
      const out = await searchDocuments(s.ports, { q: 'quokka', containerTag: 'zoo', limit: 10 });
      const ids = out.results.map((r) => r.documentId);
      expect(new Set(ids).size).toBe(ids.length);
      const quokka = out.results.find((r) => r.documentId === 'doc-quokka')!;
      const contents = quokka.chunks.map((c) => c.content);
      const scores = quokka.chunks.map((c) => c.score);
      expect(scores).toEqual([...scores].sort((a, b) => b - a));
      expect(quokka.score).toBe(scores[0]);
      // Both chunks that hold the word are among them, and are relevant.
      expect(contents.some((c) => c.startsWith('The quokka'))).toBe(true);
      expect(contents.some((c) => c.startsWith('Every quokka'))).toBe(true);
      expect(quokka.chunks.every((c) => c.isRelevant)).toBe(true);
      // Results are ordered by score.
      const docScores = out.results.map((r) => r.score);
      expect(docScores).toEqual([...docScores].sort((a, b) => b - a));
    });

    it("puts a document's best chunk first, even when it comes late in the document", async () => {
      const out = await searchDocuments(s.ports, { q: 'salt lakes pink water', docId: 'doc-quokka', chunkThreshold: 0 });
      const chunks = out.results[0]!.chunks;
      expect(chunks[0]!.content).toBe('The island also has salt lakes and pink water.');
      expect(chunks[0]!.score).toBe(Math.max(...chunks.map((c) => c.score)));
      expect(chunks.length).toBeGreaterThan(1);
    });

    it('a query about nothing the store holds returns nothing at the default threshold', async () => {
      for (const q of ['quantum chromodynamics lattice gauge', 'mortgage refinancing interest rates']) {
        expect((await searchDocuments(s.ports, { q })).results, q).toEqual([]);
        expect((await searchMemories(s.ports, { q })).results, q).toEqual([]);
        // Not for lack of candidates: without a threshold the dense list still returns chunks.
        expect((await searchMemories(s.ports, { q, threshold: 0 })).results.length, q).toBeGreaterThan(0);
      }
    });

    it('a near-exact match scores near 1', async () => {
      const out = await searchMemories(s.ports, { q: 'A wombat digs long burrows with strong claws' });
      expect(out.results[0]!.memory).toBe('A wombat digs long burrows with strong claws.');
      expect(out.results[0]!.similarity).toBeGreaterThan(0.85);
    });

    it('limit counts documents', async () => {
      const out = await searchDocuments(s.ports, { q: 'quokka wombat teapot', limit: 2 });
      expect(out.results).toHaveLength(2);
    });

    it('chunkThreshold drops chunks below it, and documents left with none', async () => {
      const all = await searchDocuments(s.ports, { q: 'wombat burrows', chunkThreshold: 0 });
      // Every chunk of the store is a dense candidate, so without a threshold every document comes back.
      expect(all.results.map((r) => r.documentId).sort()).toEqual([documentIdForCustomId('kettle-notes'), 'doc-quokka', 'doc-teapot', 'doc-wombat'].sort());
      // A chunk sharing no word with the query scores at most the dense weight (0.1).
      const strict = await searchDocuments(s.ports, { q: 'wombat burrows', chunkThreshold: 0.31 });
      expect(strict.results.map((r) => r.documentId)).toEqual(['doc-wombat']);
      for (const c of strict.results.flatMap((r) => r.chunks)) {
        expect(c.score).toBeGreaterThanOrEqual(0.31);
        expect(c.content.toLowerCase()).toMatch(/wombat|burrows/);
      }
      const best = await searchDocuments(s.ports, { q: 'wombat burrows', chunkThreshold: 0.6 });
      expect(best.results.flatMap((r) => r.chunks).map((c) => c.content)).toEqual(['A wombat digs long burrows with strong claws.']);
    });

    it('keeps scores within 0..1', () => {
      expect(normaliseScore(1.0000001)).toBe(1);
      expect(normaliseScore(0.42)).toBe(0.42);
      expect(normaliseScore(-1e-9)).toBe(0);
    });

    it('docId restricts to one document, by id or by customId; an unknown one finds nothing', async () => {
      const byId = await searchDocuments(s.ports, { q: 'quokka teapot', docId: 'doc-teapot' });
      expect(byId.results.map((r) => r.documentId)).toEqual(['doc-teapot']);
      const byCustomId = await searchDocuments(s.ports, { q: 'teapot kettle', docId: 'kettle-notes' });
      expect(byCustomId.results.map((r) => r.documentId)).toEqual([documentIdForCustomId('kettle-notes')]);
      const unknown = await searchDocuments(s.ports, { q: 'quokka', docId: 'no-such-doc' });
      expect(unknown.results).toEqual([]);
    });

    it('filters are pushed down: a filtered search fills its limit even when better chunks fail the filter', async () => {
      const fr: FilterInput = { AND: [{ key: 'lang', value: 'fr' }] };
      const out = await searchDocuments(s.ports, { q: 'quokka quokka quokka', filters: fr, limit: 1, chunkThreshold: 0 });
      // The query names a document that fails the filter; the one that passes still comes back.
      expect(out.results.map((r) => r.documentId)).toEqual(['doc-teapot']);
      const numeric = await searchDocuments(s.ports, { q: 'animal', chunkThreshold: 0, filters: { AND: [{ key: 'year', value: '2020', filterType: 'numeric', numericOperator: '>' }] } });
      expect(numeric.results.map((r) => r.documentId)).toEqual(['doc-quokka']);
      const asString = await searchDocuments(s.ports, { q: 'animal', chunkThreshold: 0, filters: JSON.stringify({ OR: [{ key: 'kind', value: 'OBJECT', ignoreCase: true }] }) });
      expect(asString.results.map((r) => r.documentId).sort()).toEqual([documentIdForCustomId('kettle-notes'), 'doc-teapot'].sort());
    });

    it('filepath restricts to a path or everything under a prefix', async () => {
      const exact = await searchDocuments(s.ports, { q: 'quokka wombat', filepath: '/notes/animals/wombat.md' });
      expect(exact.results.map((r) => r.documentId)).toEqual(['doc-wombat']);
      const prefix = await searchDocuments(s.ports, { q: 'teapot quokka wombat', filepath: '/notes/animals/' });
      expect(prefix.results.map((r) => r.documentId).sort()).toEqual(['doc-quokka', 'doc-wombat']);
    });

    it('includeFullDocs adds content; includeSummary gives the (absent) summary', async () => {
      const plain = await searchDocuments(s.ports, { q: 'teapot', limit: 1 });
      expect(plain.results[0]).not.toHaveProperty('content');
      const full = await searchDocuments(s.ports, { q: 'teapot', limit: 1, includeFullDocs: true, includeSummary: true });
      expect(full.results[0]!.content).toBe('Warm the teapot before brewing oolong leaves.\n\nA cast iron teapot keeps tea hot for an hour.');
      expect(full.results[0]!.summary).toBeNull();
    });

    it('onlyMatchingChunks: false adds the neighbours of each match as context (isRelevant false)', async () => {
      const only = await searchDocuments(s.ports, { q: 'ferry Fremantle', docId: 'doc-quokka', chunkThreshold: 0.31 });
      expect(only.results[0]!.chunks.map((c) => c.content)).toEqual(['Visitors arrive by ferry from Fremantle in the morning.']);
      const ctx = await searchDocuments(s.ports, { q: 'ferry Fremantle', docId: 'doc-quokka', chunkThreshold: 0.31, onlyMatchingChunks: false });
      // The match first, then its neighbours in document order.
      expect(ctx.results[0]!.chunks).toEqual([
        { content: 'Visitors arrive by ferry from Fremantle in the morning.', isRelevant: true, score: only.results[0]!.chunks[0]!.score },
        { content: 'The quokka is a small marsupial that lives on Rottnest Island.', isRelevant: false, score: 0 },
        { content: 'Every quokka seems to smile for the cameras of tourists.', isRelevant: false, score: 0 },
      ]);
    });

    it('without a reranker, rerank, rewriteQuery, documentThreshold and categoriesFilter are accepted and change nothing', async () => {
      const clock = () => 0;
      const base = await searchDocuments({ ...s.ports, clock }, { q: 'quokka' });
      const more = await searchDocuments({ ...s.ports, clock }, { q: 'quokka', rerank: true, rewriteQuery: true, documentThreshold: 0.9, categoriesFilter: ['x'] });
      expect(more).toEqual(base);
    });

    it('rerank: true re-scores the candidates with the configured reranker (TEI and Cohere formats)', async () => {
      // A loopback reranker that finds the kettle most relevant, whatever the query says.
      const seen: unknown[] = [];
      const server = createServer((req, res) => {
        let body = '';
        req.on('data', (c: Buffer) => (body += c));
        req.on('end', () => {
          const b = JSON.parse(body) as { query: string; texts?: string[]; documents?: string[] };
          seen.push({ url: req.url, ...b });
          const texts = b.texts ?? b.documents ?? [];
          const scored = texts.map((t, index) => ({ index, s: t.includes('kettle') ? 0.97 : 0.05 }));
          res.setHeader('content-type', 'application/json');
          res.end(JSON.stringify(b.texts ? scored.map(({ index, s }) => ({ index, score: s })) : { results: scored.map(({ index, s }) => ({ index, relevance_score: s })) }));
        });
      });
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
      try {
        const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
        for (const api of ['tei', 'cohere'] as RerankApi[]) {
          const ports = { ...s.ports, reranker: new HttpReranker({ url, api, model: 'rr' }) };
          const plain = await searchDocuments(ports, { q: 'teapot oolong', chunkThreshold: 0 });
          expect(plain.results[0]!.documentId).toBe('doc-teapot');
          const reranked = await searchDocuments(ports, { q: 'teapot oolong', chunkThreshold: 0, rerank: true });
          expect(reranked.results[0]!.documentId).toBe(documentIdForCustomId('kettle-notes'));
          expect(reranked.results[0]!.score).toBeCloseTo(0.97, 6);
          const v4 = await searchMemories(ports, { q: 'teapot oolong', rerank: true, threshold: 0.5, searchMode: 'documents' });
          expect(v4.results.map((r) => r.chunk)).toEqual(['The kettle whistles when the water boils.']);
        }
        expect(seen.map((x) => (x as { url: string }).url)).toEqual(Array(4).fill('/rerank'));
      } finally {
        await new Promise<void>((r) => server.close(() => r()));
      }
    });

    it('a query without a word finds nothing', async () => {
      expect((await searchDocuments(s.ports, { q: '?!…' })).results).toEqual([]);
    });

    it('bad input is a ZodError naming the field', async () => {
      expect(await rejection(searchDocuments(s.ports, {}))).toMatch(/^q: /);
      expect(await rejection(searchDocuments(s.ports, { q: '   ' }))).toMatch(/q: q must not be empty/);
      expect(await rejection(searchDocuments(s.ports, { q: 'x', limit: 101 }))).toMatch(/limit: limit must be at most 100/);
      expect(await rejection(searchDocuments(s.ports, { q: 'x', limit: 0 }))).toMatch(/limit/);
      expect(await rejection(searchDocuments(s.ports, { q: 'x', chunkThreshold: 1.5 }))).toMatch(/chunkThreshold/);
      expect(await rejection(searchDocuments(s.ports, { q: 'x', containerTag: 'no spaces' }))).toMatch(/containerTag/);
      expect(await rejection(searchDocuments(s.ports, { q: 'x', containerTags: 'zoo' }))).toMatch(/containerTags/);
      expect(await rejection(searchDocuments(s.ports, { q: 'x', filters: { NOT: [] } }))).toMatch(/filters/);
      expect(await rejection(searchDocuments(s.ports, { q: 'x', docId: 'a/b' }))).toMatch(/docId/);
      // A misspelt field is refused rather than ignored: a dropped containerTag would search every tag.
      expect(await rejection(searchDocuments(s.ports, { q: 'x', containertag: 'zoo' }))).toMatch(/containertag/);
    });
  });

  describe('POST /v4/search', () => {
    it('hits carry memory and/or chunk by searchMode, with similarity, metadata and their document', async () => {
      const hybrid = await searchMemories(s.ports, { q: 'cast iron teapot', searchMode: 'hybrid' });
      expect(V4SearchResponse.parse(hybrid)).toEqual(hybrid);
      const top = hybrid.results[0]!;
      expect(top).toEqual({
        id: 'doc-teapot:1',
        memory: 'A cast iron teapot keeps tea hot for an hour.',
        chunk: 'A cast iron teapot keeps tea hot for an hour.',
        similarity: expect.any(Number),
        metadata: { kind: 'object', year: 2020, lang: 'fr' },
        updatedAt: expect.any(String),
        filepath: '/notes/kitchen/teapot.md',
        documents: [{ id: 'doc-teapot', title: 'Teapots', type: 'text', metadata: { kind: 'object', year: 2020, lang: 'fr' }, createdAt: expect.any(String), updatedAt: expect.any(String) }],
      });
      expect(top.similarity).toBeGreaterThan(0.7);
      expect(hybrid.total).toBe(hybrid.results.length);
      const sims = hybrid.results.map((r) => r.similarity);
      expect(sims).toEqual([...sims].sort((a, b) => b - a));

      const memories = await searchMemories(s.ports, { q: 'cast iron teapot', searchMode: 'memories' });
      expect(memories.results[0]).toHaveProperty('memory');
      expect(memories.results[0]).not.toHaveProperty('chunk');
      const documents = await searchMemories(s.ports, { q: 'cast iron teapot', searchMode: 'documents' });
      expect(documents.results[0]).toHaveProperty('chunk');
      expect(documents.results[0]).not.toHaveProperty('memory');
    });

    it('limit and threshold', async () => {
      expect((await searchMemories(s.ports, { q: 'quokka', limit: 3, threshold: 0 })).results).toHaveLength(3);
      const strict = await searchMemories(s.ports, { q: 'quokka', threshold: 0.31 });
      expect(strict.results.map((r) => r.id).sort()).toEqual(['doc-quokka:0', 'doc-quokka:2']);
      for (const r of strict.results) expect(r.similarity).toBeGreaterThanOrEqual(0.31);
    });

    it('include: chunks embeds the hit, summaries adds summary, relatedMemories an empty context', async () => {
      const out = await searchMemories(s.ports, { q: 'wombat claws', limit: 1, include: { chunks: true, summaries: true, relatedMemories: true, documents: true, forgottenMemories: false } });
      const r = out.results[0]!;
      expect(r.chunks).toEqual([{ content: 'A wombat digs long burrows with strong claws.', documentId: 'doc-wombat', position: 0, score: r.similarity }]);
      expect(r.documents![0]!.summary).toBeNull();
      expect(r.context).toEqual({ parents: [], children: [], related: [] });
    });

    it('filters are pushed down: the limit is filled by hits that pass, however many better ones fail', async () => {
      // 30 chunks that match the query far better than any French one, and fail the filter: a
      // filter applied after retrieval would see only them and answer empty.
      const decoys = Array.from({ length: 30 }, (_, i) => `decoy-${i}`);
      for (const id of decoys) await s.add({ id, tags: ['zoo'], metadata: { lang: 'en' }, chunks: ['quokka island quokka island'] });
      try {
        const fr: FilterInput = { AND: [{ key: 'lang', value: 'fr' }] };
        const v4 = await searchMemories(s.ports, { q: 'quokka island', limit: 2, filters: fr, threshold: 0 });
        expect(v4.results.map((r) => r.id).sort()).toEqual(['doc-teapot:0', 'doc-teapot:1']);
        const v3 = await searchDocuments(s.ports, { q: 'quokka island', limit: 1, filters: fr, chunkThreshold: 0 });
        expect(v3.results.map((r) => r.documentId)).toEqual(['doc-teapot']);
        // Unfiltered, the decoys are what comes first.
        const open = await searchMemories(s.ports, { q: 'quokka island', limit: 2 });
        expect(open.results.every((r) => r.id.startsWith('decoy-'))).toBe(true);
      } finally {
        for (const id of decoys) {
          await s.index.deleteDocument(id);
          await s.views.delete(id);
        }
      }
    });

    it('bad input is a ZodError naming the field', async () => {
      expect(await rejection(searchMemories(s.ports, { q: '' }))).toMatch(/^q: /);
      expect(await rejection(searchMemories(s.ports, { q: 'x', searchMode: 'all' }))).toMatch(/searchMode/);
      expect(await rejection(searchMemories(s.ports, { q: 'x', threshold: -0.1 }))).toMatch(/threshold/);
      expect(await rejection(searchMemories(s.ports, { q: 'x', include: { everything: true } }))).toMatch(/include/);
      expect(await rejection(searchMemories(s.ports, { q: 'x', containerTags: ['zoo'] }))).toMatch(/containerTags/);
    });
  });

  it('a document deleted since it was indexed is not returned', async () => {
    await s.add({ id: 'doc-gone', tags: ['zoo'], chunks: ['The platypus lays eggs.'] });
    expect((await searchMemories(s.ports, { q: 'platypus eggs', limit: 1 })).results[0]!.id).toBe('doc-gone:0');
    await s.views.delete('doc-gone');
    expect((await searchMemories(s.ports, { q: 'platypus eggs' })).results.map((r) => r.id)).not.toContain('doc-gone:0');
    expect((await searchDocuments(s.ports, { q: 'platypus eggs' })).results.map((r) => r.documentId)).not.toContain('doc-gone');
    await s.index.deleteDocument('doc-gone');
  });

  it('a document whose view has left the tag is not returned for it, even while the index still has the old tag', async () => {
    await s.add({ id: 'doc-moved', tags: ['zoo'], chunks: ['The echidna has spines.'] });
    const v = (await s.views.get('doc-moved'))!;
    expect(await s.views.put({ ...v, containerTags: ['kitchen'] }, v.version)).toBe(true);
    expect((await searchDocuments(s.ports, { q: 'echidna', containerTag: 'zoo' })).results.map((r) => r.documentId)).not.toContain('doc-moved');
    expect((await searchMemories(s.ports, { q: 'echidna', containerTag: 'zoo' })).results.map((r) => r.id)).not.toContain('doc-moved:0');
    await s.index.deleteDocument('doc-moved');
    await s.views.delete('doc-moved');
  });
});

describe('container-tag isolation across three tags (property)', () => {
  const TAGS = ['tenant-a', 'tenant-b', 'tenant-c'] as const;
  const WORDS = ['harbour', 'lantern', 'glacier', 'violin', 'saffron', 'quartz', 'meadow', 'falcon', 'cobalt', 'orchard', 'ember', 'tundra'];
  let s: Store;
  const tagsOf = new Map<string, string[]>();

  beforeAll(async () => {
    s = await makeStore();
    // A fixed pseudo-random corpus: 36 documents, one to three chunks, mostly one tag, some two.
    let seed = 7;
    const rnd = (n: number) => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return seed % n;
    };
    for (let i = 0; i < 36; i++) {
      const tags = [TAGS[i % 3]!];
      if (i % 7 === 0) tags.push(TAGS[(i + 1) % 3]!);
      const chunks = Array.from({ length: 1 + rnd(3) }, () => Array.from({ length: 6 }, () => WORDS[rnd(WORDS.length)]).join(' ') + '.');
      const id = `iso-${i}`;
      tagsOf.set(id, tags);
      await s.add({ id, tags, chunks, metadata: { n: i, parity: i % 2 === 0 ? 'even' : 'odd' } });
    }
  });
  afterAll(async () => {
    await s.cleanup();
  });

  it('no search with tags returns a document without one of them; a tag with documents always answers', async () => {
    const tagSet = fc.subarray([...TAGS], { minLength: 1 });
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.constantFrom(...WORDS), { minLength: 1, maxLength: 4 }),
        tagSet,
        fc.boolean(),
        fc.integer({ min: 1, max: 40 }),
        fc.option(fc.constantFrom('even', 'odd'), { nil: undefined }),
        async (words, tags, single, limit, parity) => {
          const q = words.join(' ');
          const filters = parity ? { AND: [{ key: 'parity', value: parity }] } : undefined;
          const v3 = await searchDocuments(s.ports, { q, ...(single ? { containerTag: tags[0] } : { containerTags: tags }), limit, chunkThreshold: 0, ...(filters ? { filters } : {}) });
          const v4 = await searchMemories(s.ports, { q, containerTag: tags[0], limit, ...(filters ? { filters } : {}) });
          const asked3 = single ? [tags[0]!] : tags;
          for (const r of v3.results) {
            expect(tagsOf.get(r.documentId)!.some((t) => asked3.includes(t as (typeof TAGS)[number])), `${r.documentId} for ${asked3.join(',')}`).toBe(true);
            if (parity) expect(r.metadata?.parity).toBe(parity);
          }
          for (const r of v4.results) {
            const documentId = r.id.slice(0, r.id.lastIndexOf(':'));
            expect(tagsOf.get(documentId), `${r.id} for ${tags[0]}`).toContain(tags[0]);
            if (parity) expect(r.metadata?.parity).toBe(parity);
          }
          // Completeness: the hashed embedder gives every chunk in scope a dense rank, so a
          // scope with documents never answers empty without a threshold.
          const inScope = [...tagsOf].filter(([id, t]) => t.some((x) => asked3.includes(x as (typeof TAGS)[number])) && (!parity || (Number(id.slice(4)) % 2 === 0) === (parity === 'even')));
          expect(v3.results.length).toBe(Math.min(limit, inScope.length));
        },
      ),
      { numRuns: 150 },
    );
  });

  it('without a tag, search spans every tag', async () => {
    const out = await searchDocuments(s.ports, { q: 'harbour lantern', limit: 100, chunkThreshold: 0 });
    const seen = new Set(out.results.flatMap((r) => tagsOf.get(r.documentId)!));
    expect([...seen].sort()).toEqual([...TAGS]);
    expect(out.results).toHaveLength(36);
  });
});

/** A port every method of which fails: proof that search does not touch it. */
function refusing<T extends object>(name: string): T {
  return new Proxy({} as T, {
    get: (_t, prop) =>
      async () => {
        throw new Error(`search must not use ${name}.${String(prop)}`);
      },
  });
}

describe('the routes: POST /v3/search and /v4/search through the app', () => {
  let s: Store;
  let server: Server;
  let base: string;
  const API_KEY = 'ms_test_search_key_0123';

  beforeAll(async () => {
    s = await makeStore();
    await s.add({ id: 'doc-route', tags: ['r'], title: 'Route', chunks: ['The heron stands still in the shallows.'] });
    // Search reads only its own ports; the document ports are there because the app requires them.
    const ports: GatewayPorts = {
      views: s.views,
      events: refusing('events'),
      index: s.index,
      blobs: refusing('blobs'),
      tagContexts: refusing('tagContexts'),
      now: () => new Date(),
    };
    const app = createApp({ ports, apiKey: API_KEY, log: createLogger('test', { level: 'silent' }), search: s.ports });
    server = await new Promise<Server>((resolve) => {
      const srv = app.listen(0, '127.0.0.1', () => resolve(srv));
    });
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise<void>((r) => server.close(() => r()));
    await s.cleanup();
  });

  const post = async (p: string, body: unknown) => {
    const res = await fetch(base + p, { method: 'POST', headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };

  it('answer 200 with the result shapes', async () => {
    const v3 = await post('/v3/search', { q: 'heron', containerTag: 'r' });
    expect(v3.status).toBe(200);
    expect(V3SearchResponse.parse(v3.body).results[0]!.documentId).toBe('doc-route');
    const v4 = await post('/v4/search', { q: 'heron', containerTag: 'r' });
    expect(v4.status).toBe(200);
    expect(V4SearchResponse.parse(v4.body).results[0]!.id).toBe('doc-route:0');
  });

  it('bad input is a 400 {error, details} naming the field', async () => {
    const r = await post('/v3/search', { q: 'heron', limit: 'many' });
    expect(r.status).toBe(400);
    expect(r.body).toEqual({ error: 'Invalid request', details: expect.stringMatching(/^limit: /) });
    const r4 = await post('/v4/search', { containerTag: 'r' });
    expect(r4.status).toBe(400);
    expect(r4.body.details).toMatch(/^q: /);
  });

  it('never a 5xx: arbitrary values in every field are a 200 or a 400 {error, details}', async () => {
    const fields = ['q', 'containerTag', 'containerTags', 'filters', 'limit', 'chunkThreshold', 'threshold', 'docId', 'filepath', 'onlyMatchingChunks', 'includeFullDocs', 'searchMode', 'include', 'rerank'];
    const body = fc.oneof(
      fc.jsonValue(),
      fc.dictionary(fc.constantFrom(...fields), fc.jsonValue(), { maxKeys: 5 }).map((o) => ({ q: 'heron', ...o })),
    );
    await fc.assert(
      fc.asyncProperty(fc.constantFrom('/v3/search', '/v4/search'), body, async (route, b) => {
        const r = await post(route, b);
        expect([200, 400], JSON.stringify(b)).toContain(r.status);
        if (r.status === 400) expect(typeof r.body.details).toBe('string');
      }),
      { numRuns: 300 },
    );
  });

  it('need the API key', async () => {
    const res = await fetch(base + '/v4/search', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"q":"heron"}' });
    expect(res.status).toBe(401);
  });
});

// The static model (EMBEDDER=static) with its own fusion weights (StaticEmbedder.fusion): scores
// must keep their meaning with a larger dense weight and a lower floor. Skipped, with the reason,
// where the model is not built (./memstream builds it after installing the dependencies).
const staticFile = staticModelPath(installedSourceVersion());
if (!existsSync(staticFile)) console.log(`[static model] search tests with the static model skipped: ${staticFile} is not built`);
describe.skipIf(!existsSync(staticFile))('search with the static model and its fusion weights', () => {
  let s: Store;
  beforeAll(async () => {
    s = await makeStore(StaticEmbedder.load(staticFile));
    await s.add({ id: 'doc-quokka', tags: ['zoo'], chunks: ['The quokka is a small marsupial that lives on Rottnest Island.', 'Visitors arrive by ferry from Fremantle in the morning.', 'The island also has salt lakes and pink water.'] });
    await s.add({ id: 'doc-wombat', tags: ['zoo'], chunks: ['A wombat digs long burrows with strong claws.', 'Wombat droppings are famously cube shaped.'] });
    await s.add({ id: 'doc-teapot', tags: ['kitchen'], chunks: ['Warm the teapot before brewing oolong leaves.', 'A cast iron teapot keeps tea hot for an hour.', 'The kettle whistles when the water boils.'] });
  });
  afterAll(async () => {
    await s.cleanup();
  });

  it('a query about nothing the store holds returns nothing at the default threshold, on both endpoints', async () => {
    // The last one reaches cosine ~0.29 with a chunk here, the highest of the unrelated queries tried.
    for (const q of ['quantum chromodynamics lattice gauge', 'mortgage refinancing interest rates', 'python list comprehension syntax', 'how to fix a flat bicycle tyre']) {
      expect((await searchDocuments(s.ports, { q })).results, q).toEqual([]);
      expect((await searchMemories(s.ports, { q })).results, q).toEqual([]);
    }
  });

  it('a near-exact match scores near 1, and a document\'s best chunk comes first', async () => {
    const exact = await searchMemories(s.ports, { q: 'A wombat digs long burrows with strong claws' });
    expect(exact.results[0]!.memory).toBe('A wombat digs long burrows with strong claws.');
    expect(exact.results[0]!.similarity).toBeGreaterThan(0.85);
    const out = await searchDocuments(s.ports, { q: 'salt lakes pink water', docId: 'doc-quokka', chunkThreshold: 0 });
    expect(out.results[0]!.chunks[0]!.content).toBe('The island also has salt lakes and pink water.');
  });

  it('finds a chunk by meaning alone', async () => {
    // No word in common with any chunk: only the dense side can find the teapot document.
    const out = await searchMemories(s.ports, { q: 'espresso cappuccino latte', threshold: 0 });
    expect(out.results[0]?.id.startsWith('doc-teapot:')).toBe(true);
  });
});

describe("a document's lead as a field (withLead)", () => {
  const hit = (documentId: string, index: number, score: number) => ({ documentId, index, score, text: '', containerTags: [], metadata: {} });

  it('lifts a document whose first chunk also matches above one with an equal chunk alone, keeps each document\'s own order and 0..1', () => {
    const out = withLead([hit('alone', 3, 0.8), hit('led', 2, 0.78), hit('led', 0, 0.5), hit('led', 5, 0.1), hit('none', 1, 0)]);
    expect(out.map((h) => `${h.documentId}:${h.index}`)).toEqual(['led:2', 'alone:3', 'led:0', 'led:5', 'none:1']);
    for (const h of out) expect(h.score).toBeGreaterThanOrEqual(0), expect(h.score).toBeLessThanOrEqual(1);
    expect(out.at(-1)!.score).toBe(0);
    expect(withLead([hit('a', 0, 1)])[0]!.score).toBe(1);
  });
});
