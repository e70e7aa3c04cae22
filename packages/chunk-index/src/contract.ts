import { createHash } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Filters, matchesFilter } from '@memstream/contracts';
import type { FilterExpr, FilterInput, Metadata } from '@memstream/contracts';
import type { ChunkIndex, ReplaceDocumentInput, SearchHit, SearchQuery, StoredChunk } from './port.js';

/** What an adapter's test file hands the contract suite for each test. */
export interface ContractHandle {
  index: ChunkIndex;
  /** Drop everything the index created. It may run after the suite already closed `index`. */
  cleanup: () => Promise<void>;
  /** Open a second index over the same storage (the suite closes the first one before). */
  reopen?: () => Promise<ChunkIndex>;
}

// ---------------------------------------------------------------------------------------------
// Deterministic fixtures

/** mulberry32: a small seeded PRNG, so every run builds the same fixtures. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A pseudo-random L2-normalised vector. */
function unitVector(rand: () => number, dim: number): Float32Array {
  const v = new Float32Array(dim);
  let norm = 0;
  for (let i = 0; i < dim; i++) {
    // Sum of uniforms: roughly Gaussian, so directions are spread over the sphere.
    const x = rand() + rand() + rand() - 1.5;
    v[i] = x;
    norm += x * x;
  }
  const n = Math.sqrt(norm);
  for (let i = 0; i < dim; i++) v[i] = v[i]! / n;
  return v;
}

/** A unit vector at cosine `cos` to basis vector 0, leaning towards basis vector `axis`. */
function vectorAtCosine(dim: number, cos: number, axis: number): Float32Array {
  const v = new Float32Array(dim);
  v[0] = cos;
  v[axis] = Math.sqrt(1 - cos * cos);
  return v;
}

function basis(dim: number, i: number): Float32Array {
  const v = new Float32Array(dim);
  v[i] = 1;
  return v;
}

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/** Score as every adapter is expected to: the dot product, accumulated in float64. */
function dotProduct(a: Float32Array, b: Float32Array): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i]! * b[i]!;
  return s;
}

interface DocSpec {
  id: string;
  revision?: number;
  model?: string;
  dim?: number;
  tags?: string[];
  metadata?: Metadata;
  texts: string[];
  vectors?: Float32Array[];
  /** Seed for vectors not given explicitly. */
  seed?: number;
}

function makeDoc(spec: DocSpec): ReplaceDocumentInput {
  const dim = spec.dim ?? 8;
  const rand = rng(spec.seed ?? hashSeed(spec.id));
  return {
    documentId: spec.id,
    revision: spec.revision ?? 1,
    model: spec.model ?? 'model-a',
    dim,
    containerTags: spec.tags ?? ['tag-default'],
    metadata: spec.metadata ?? {},
    chunks: spec.texts.map((text, index) => ({
      index,
      hash: sha256(text),
      text,
      vector: spec.vectors?.[index] ?? unitVector(rand, dim),
    })),
  };
}

function hashSeed(s: string): number {
  return Number.parseInt(sha256(s).slice(0, 8), 16);
}

function key(documentId: string, index: number): string {
  return `${documentId}#${index}`;
}

function hitKeys(hits: SearchHit[]): string[] {
  return hits.map((h) => key(h.documentId, h.index));
}

function docSet(hits: SearchHit[]): string[] {
  return [...new Set(hits.map((h) => h.documentId))].sort();
}

function storedChunks(doc: ReplaceDocumentInput): StoredChunk[] {
  return [...doc.chunks]
    .sort((a, b) => a.index - b.index)
    .map((c) => ({
      documentId: doc.documentId,
      revision: doc.revision,
      index: c.index,
      hash: c.hash,
      text: c.text,
      model: doc.model,
      dim: doc.dim,
      containerTags: doc.containerTags,
      metadata: doc.metadata,
    }));
}

/** The exact dense top-k over fixtures, as a brute-force reference. */
function bruteForce(docs: ReplaceDocumentInput[], q: Float32Array, model: string, limit: number) {
  const scored: { key: string; score: number }[] = [];
  for (const d of docs) {
    if (d.model !== model || d.dim !== q.length) continue;
    for (const c of d.chunks) scored.push({ key: key(d.documentId, c.index), score: dotProduct(q, c.vector) });
  }
  return scored.sort((a, b) => b.score - a.score).slice(0, limit);
}

function filterOf(input: FilterInput): FilterExpr {
  return Filters.parse(input);
}

const MODES = ['dense', 'keyword', 'hybrid'] as const;

// ---------------------------------------------------------------------------------------------
// The suite

/**
 * The one behavioural suite every ChunkIndex adapter must pass. `open` is called before each
 * test and must return an empty index; `cleanup` runs after each test.
 */
export function describeChunkIndexContract(name: string, open: () => Promise<ContractHandle>): void {
  describe(`ChunkIndex contract: ${name}`, () => {
    let h: ContractHandle;
    let index: ChunkIndex;

    beforeEach(async () => {
      h = await open();
      index = h.index;
    });
    afterEach(async () => {
      await h.cleanup();
    });

    async function putAll(docs: ReplaceDocumentInput[]): Promise<void> {
      for (const d of docs) {
        const r = await index.replaceDocument(d);
        expect(r.stale).toBe(false);
      }
    }

    /** A search in every mode with the same restrictions; `text` must occur in every fixture chunk. */
    async function searchAllModes(base: Omit<SearchQuery, 'mode'>): Promise<Record<(typeof MODES)[number], SearchHit[]>> {
      const out = {} as Record<(typeof MODES)[number], SearchHit[]>;
      for (const mode of MODES) out[mode] = await index.search({ ...base, mode });
      return out;
    }

    it('replaceDocuments: several documents at once, each as replaceDocument would, one result per input', async () => {
      await index.replaceDocument(makeDoc({ id: 'many-1', revision: 2, texts: ['kept one'] }));
      const res = await index.replaceDocuments([
        makeDoc({ id: 'many-1', revision: 1, texts: ['older'] }),
        makeDoc({ id: 'many-2', texts: ['two a', 'two b'] }),
        makeDoc({ id: 'many-3', texts: ['three'] }),
      ]);
      expect(res).toEqual([
        { upserted: 0, removed: 0, stale: true },
        { upserted: 2, removed: 0, stale: false },
        { upserted: 1, removed: 0, stale: false },
      ]);
      expect((await index.getDocumentChunks('many-1')).map((c) => c.text)).toEqual(['kept one']);
      expect((await index.getDocumentChunks('many-2')).map((c) => c.text)).toEqual(['two a', 'two b']);
      expect(await index.replaceDocuments([])).toEqual([]);
    });

    it('round-trips a replaced document through getDocumentChunks, in index order', async () => {
      const doc = makeDoc({
        id: 'doc-roundtrip',
        revision: 3,
        dim: 8,
        tags: ['space-1', 'space-2'],
        metadata: { source: 'web', stars: 4, labels: ['a', 'b'], draft: false },
        texts: ['alpha one', 'beta two', 'gamma three', 'delta four'],
      });
      // Hand the chunks over out of order: the index must return them sorted by index.
      const shuffled = { ...doc, chunks: [doc.chunks[2]!, doc.chunks[0]!, doc.chunks[3]!, doc.chunks[1]!] };
      expect(await index.replaceDocument(shuffled)).toEqual({ upserted: 4, removed: 0, stale: false });
      expect(await index.getDocumentChunks('doc-roundtrip')).toEqual(storedChunks(doc));
      expect(await index.getDocumentChunks('no-such-document')).toEqual([]);
    });

    it('replacing keeps unchanged chunks, upserts new ones and removes the rest, with exact counts', async () => {
      const first = makeDoc({ id: 'doc-r', revision: 1, texts: ['zero text', 'one text', 'two text', 'three text'], seed: 11 });
      expect(await index.replaceDocument(first)).toEqual({ upserted: 4, removed: 0, stale: false });
      // The same content again: nothing to do.
      expect(await index.replaceDocument({ ...first, revision: 2 })).toEqual({ upserted: 0, removed: 0, stale: false });

      const changedVector = unitVector(rng(99), 8);
      const second: ReplaceDocumentInput = {
        ...first,
        revision: 3,
        containerTags: ['tag-new'],
        metadata: { v: 3 },
        chunks: [
          first.chunks[0]!, // unchanged
          { index: 1, hash: sha256('one text changed'), text: 'one text changed', vector: changedVector }, // changed
          first.chunks[2]!, // unchanged
          { index: 4, hash: sha256('four text'), text: 'four text', vector: unitVector(rng(100), 8) }, // new
          // index 3 dropped
        ],
      };
      expect(await index.replaceDocument(second)).toEqual({ upserted: 2, removed: 2, stale: false });
      const stored = await index.getDocumentChunks('doc-r');
      expect(stored).toEqual(storedChunks(second));
      expect(await index.stats()).toEqual({ documents: 1, chunks: 4 });

      // The changed chunk is searchable under its new vector and text, the dropped one is gone.
      const dense = await index.search({ mode: 'dense', vector: changedVector, model: 'model-a', limit: 1 });
      expect(hitKeys(dense)).toEqual(['doc-r#1']);
      expect(dense[0]!.text).toBe('one text changed');
      expect(dense[0]!.score).toBeCloseTo(1, 5);
      expect(await index.search({ mode: 'keyword', text: 'three', limit: 10 })).toEqual([]);
      expect(hitKeys(await index.search({ mode: 'keyword', text: 'changed', limit: 10 }))).toEqual(['doc-r#1']);
      // Unchanged chunks carry the new revision, tags and metadata.
      const kept = await index.search({ mode: 'keyword', text: 'zero', containerTags: ['tag-new'], limit: 10 });
      expect(hitKeys(kept)).toEqual(['doc-r#0']);
      expect(kept[0]!.metadata).toEqual({ v: 3 });
      expect(await index.search({ mode: 'keyword', text: 'zero', containerTags: ['tag-default'], limit: 10 })).toEqual([]);

      // A model change re-embeds everything: no vector of the old model survives.
      const third: ReplaceDocumentInput = { ...second, revision: 4, model: 'model-b' };
      expect(await index.replaceDocument(third)).toEqual({ upserted: 4, removed: 4, stale: false });
      expect((await index.getDocumentChunks('doc-r')).map((c) => c.model)).toEqual(['model-b', 'model-b', 'model-b', 'model-b']);
      expect(await index.search({ mode: 'dense', vector: changedVector, model: 'model-a', limit: 5 })).toEqual([]);
      expect(hitKeys(await index.search({ mode: 'dense', vector: changedVector, model: 'model-b', limit: 1 }))).toEqual(['doc-r#1']);
    });

    it('refuses a stale revision and changes nothing; an equal revision is applied', async () => {
      const current = makeDoc({ id: 'doc-s', revision: 5, tags: ['t-live'], metadata: { state: 'live' }, texts: ['live words here'] });
      await index.replaceDocument(current);
      const older = makeDoc({ id: 'doc-s', revision: 4, tags: ['t-old'], metadata: { state: 'old' }, texts: ['old words', 'more old words'] });
      expect(await index.replaceDocument(older)).toEqual({ upserted: 0, removed: 0, stale: true });
      expect(await index.getDocumentChunks('doc-s')).toEqual(storedChunks(current));
      expect(await index.stats()).toEqual({ documents: 1, chunks: 1 });
      expect(await index.search({ mode: 'keyword', text: 'old', limit: 10 })).toEqual([]);
      expect(await index.search({ mode: 'keyword', text: 'live', containerTags: ['t-old'], limit: 10 })).toEqual([]);

      const same = makeDoc({ id: 'doc-s', revision: 5, tags: ['t-live'], metadata: { state: 'again' }, texts: ['live words here', 'extra words'] });
      expect(await index.replaceDocument(same)).toEqual({ upserted: 1, removed: 0, stale: false });
      expect((await index.getDocumentChunks('doc-s')).map((c) => c.metadata)).toEqual([{ state: 'again' }, { state: 'again' }]);
    });

    it('deleteDocument removes every chunk and returns how many', async () => {
      await putAll([
        makeDoc({ id: 'doc-d1', texts: ['first keep', 'second keep'] }),
        makeDoc({ id: 'doc-d2', texts: ['gone one', 'gone two', 'gone three'] }),
      ]);
      expect(await index.deleteDocument('doc-d2')).toBe(3);
      expect(await index.getDocumentChunks('doc-d2')).toEqual([]);
      expect(await index.stats()).toEqual({ documents: 1, chunks: 2 });
      expect(await index.search({ mode: 'keyword', text: 'gone', limit: 10 })).toEqual([]);
      const dense = await index.search({ mode: 'dense', vector: unitVector(rng(1), 8), model: 'model-a', limit: 10 });
      expect(docSet(dense)).toEqual(['doc-d1']);
      expect(await index.deleteDocument('doc-d2')).toBe(0);
      expect(await index.deleteDocument('never-existed')).toBe(0);
      // A deleted document can be written again from scratch.
      expect(await index.replaceDocument(makeDoc({ id: 'doc-d2', texts: ['back again'] }))).toEqual({ upserted: 1, removed: 0, stale: false });
    });

    it('updateDocumentMeta changes tags and metadata in place, visible to search filters', async () => {
      const doc = makeDoc({ id: 'doc-u', revision: 7, tags: ['old-tag'], metadata: { color: 'red', n: 1 }, texts: ['paint words', 'more paint'] });
      const other = makeDoc({ id: 'doc-other', tags: ['old-tag'], metadata: { color: 'blue' }, texts: ['paint elsewhere'] });
      await putAll([doc, other]);
      const q = doc.chunks[0]!.vector;
      const before = await index.search({ mode: 'dense', vector: q, model: 'model-a', limit: 1 });

      // A tag-restricted dense search before the change (an adapter may remember which rows a tag
      // selects) must not answer from that memory after it.
      expect(await index.search({ mode: 'dense', vector: q, model: 'model-a', containerTags: ['old-tag'], limit: 10 }).then(docSet)).toEqual(['doc-other', 'doc-u']);
      await index.updateDocumentMeta('doc-u', { containerTags: ['new-tag', 'second-tag'] });
      expect(await index.search({ mode: 'dense', vector: q, model: 'model-a', containerTags: ['old-tag'], limit: 10 }).then(docSet)).toEqual(['doc-other']);
      expect(await index.search({ mode: 'dense', vector: q, model: 'model-a', containerTags: ['new-tag'], limit: 10 }).then(docSet)).toEqual(['doc-u']);
      expect(await index.search({ mode: 'keyword', text: 'paint', containerTags: ['new-tag'], limit: 10 }).then(docSet)).toEqual(['doc-u']);
      expect(await index.search({ mode: 'keyword', text: 'paint', containerTags: ['old-tag'], limit: 10 }).then(docSet)).toEqual(['doc-other']);

      await index.updateDocumentMeta('doc-u', { metadata: { color: 'green', n: 2 } });
      const green = filterOf({ AND: [{ key: 'color', value: 'green' }] });
      const red = filterOf({ AND: [{ key: 'color', value: 'red' }] });
      for (const mode of MODES) {
        const base = { mode, vector: q, model: 'model-a', text: 'paint', limit: 10 } as const;
        expect(docSet(await index.search({ ...base, filter: green }))).toEqual(['doc-u']);
        expect(await index.search({ ...base, filter: red })).toEqual([]);
      }
      // Tags were not touched by the metadata patch, and nothing was re-embedded.
      const stored = await index.getDocumentChunks('doc-u');
      expect(stored.map((c) => [c.revision, c.containerTags, c.metadata])).toEqual([
        [7, ['new-tag', 'second-tag'], { color: 'green', n: 2 }],
        [7, ['new-tag', 'second-tag'], { color: 'green', n: 2 }],
      ]);
      const after = await index.search({ mode: 'dense', vector: q, model: 'model-a', limit: 1 });
      expect(hitKeys(after)).toEqual(hitKeys(before));
      expect(after[0]!.score).toBeCloseTo(before[0]!.score, 6);
      expect(after[0]!.containerTags).toEqual(['new-tag', 'second-tag']);
      expect(after[0]!.metadata).toEqual({ color: 'green', n: 2 });
      // Unknown documents are ignored.
      await index.updateDocumentMeta('no-such-doc', { metadata: { x: 1 } });
      expect(await index.stats()).toEqual({ documents: 2, chunks: 3 });
    });

    it('dense search returns the exact top-k by cosine, matching a brute-force scan', async () => {
      const rand = rng(4242);
      const dim = 24;
      const docs: ReplaceDocumentInput[] = [];
      for (let d = 0; d < 120; d++) {
        docs.push(
          makeDoc({
            id: `dense-${d}`,
            dim,
            tags: [`t${d % 3}`],
            texts: [0, 1, 2].map((i) => `dense doc ${d} chunk ${i}`),
            vectors: [0, 1, 2].map(() => unitVector(rand, dim)),
          }),
        );
      }
      await putAll(docs);
      const queries = [0, 1, 2, 3, 4, 5].map(() => unitVector(rand, dim));
      // A query equal to a stored vector must find that chunk first, at cosine 1.
      queries.push(docs[37]!.chunks[1]!.vector);
      for (const [qi, q] of queries.entries()) {
        for (const limit of [1, 7, 25]) {
          const hits = await index.search({ mode: 'dense', vector: q, model: 'model-a', limit });
          const expected = bruteForce(docs, q, 'model-a', limit);
          expect(hitKeys(hits), `query ${qi} limit ${limit}`).toEqual(expected.map((e) => e.key));
          hits.forEach((hit, i) => expect(Math.abs(hit.score - expected[i]!.score)).toBeLessThan(1e-5));
          for (const hit of hits) {
            const doc = docs.find((d) => d.documentId === hit.documentId)!;
            expect(hit.text).toBe(doc.chunks[hit.index]!.text);
            expect(hit.containerTags).toEqual(doc.containerTags);
            expect(hit.metadata).toEqual(doc.metadata);
          }
        }
      }
      expect(hitKeys(await index.search({ mode: 'dense', vector: docs[37]!.chunks[1]!.vector, model: 'model-a', limit: 1 }))).toEqual([
        'dense-37#1',
      ]);
      // Restricted to one tag, the top-k is the brute force over that tag's documents only.
      const q = queries[0]!;
      const hits = await index.search({ mode: 'dense', vector: q, model: 'model-a', containerTags: ['t1'], limit: 10 });
      const expected = bruteForce(docs.filter((d) => d.containerTags.includes('t1')), q, 'model-a', 10);
      expect(hitKeys(hits)).toEqual(expected.map((e) => e.key));
    });

    it('dense search after deletions and replacements returns the exact top-k of the live chunks, with and without a tag filter', async () => {
      // An approximate index keeps deleted points in its graph and marks them: none may come back,
      // a replaced chunk must be found by its new vector only, and a tag filter must still fill
      // the limit from the tag's own chunks.
      const rand = rng(777);
      const dim = 16;
      const live = new Map<string, ReplaceDocumentInput>();
      for (let d = 0; d < 90; d++) {
        const doc = makeDoc({
          id: `churn-${d}`,
          dim,
          tags: [`t${d % 3}`],
          texts: [0, 1, 2].map((i) => `churn doc ${d} chunk ${i}`),
          vectors: [0, 1, 2].map(() => unitVector(rand, dim)),
        });
        await index.replaceDocument(doc);
        live.set(doc.documentId, doc);
      }
      const query = unitVector(rand, dim);
      // Warm whatever the adapter keeps in memory, so the changes below are applied to it.
      await index.search({ mode: 'dense', vector: query, model: 'model-a', limit: 10 });
      const nearest = bruteForce([...live.values()], query, 'model-a', 12);
      // Delete the documents of the six nearest chunks, and give the next ones new vectors.
      const gone = [...new Set(nearest.slice(0, 6).map((e) => e.key.split('#')[0]!))];
      for (const id of gone) {
        expect(await index.deleteDocument(id)).toBe(3);
        live.delete(id);
      }
      for (const id of [...new Set(nearest.slice(6).map((e) => e.key.split('#')[0]!))].filter((x) => live.has(x))) {
        const old = live.get(id)!;
        const doc = makeDoc({
          id,
          revision: 2,
          dim,
          tags: old.containerTags,
          texts: [0, 1, 2].map((i) => `churn doc ${id} chunk ${i} again`),
          vectors: [0, 1, 2].map(() => unitVector(rand, dim)),
        });
        await index.replaceDocument(doc);
        live.set(id, doc);
      }
      // And the query itself as a new chunk: it must come first at cosine 1.
      const exactDoc = makeDoc({ id: 'churn-query', dim, tags: ['t1'], texts: ['the query itself'], vectors: [query] });
      await index.replaceDocument(exactDoc);
      live.set(exactDoc.documentId, exactDoc);
      for (const tags of [undefined, ['t1'], ['t0', 't2']]) {
        const hits = await index.search({ mode: 'dense', vector: query, model: 'model-a', limit: 10, ...(tags ? { containerTags: tags } : {}) });
        const pool = [...live.values()].filter((d) => !tags || d.containerTags.some((t) => tags.includes(t)));
        const expected = bruteForce(pool, query, 'model-a', 10);
        expect(hitKeys(hits), JSON.stringify(tags)).toEqual(expected.map((e) => e.key));
        hits.forEach((hit, i) => expect(Math.abs(hit.score - expected[i]!.score)).toBeLessThan(1e-5));
        for (const id of gone) expect(hits.some((h) => h.documentId === id)).toBe(false);
      }
    });

    it('never returns chunks of another model', async () => {
      const dim = 16;
      const rand = rng(77);
      const a = [0, 1, 2, 3].map((i) => makeDoc({ id: `ma-${i}`, model: 'model-a', dim, texts: [`shared words a${i}`], vectors: [unitVector(rand, dim)] }));
      const b = [0, 1, 2, 3].map((i) => makeDoc({ id: `mb-${i}`, model: 'model-b', dim, texts: [`shared words b${i}`], vectors: [unitVector(rand, dim)] }));
      const c = [0, 1].map((i) => makeDoc({ id: `mc-${i}`, model: 'model-c', dim: 8, texts: [`shared words c${i}`], vectors: [unitVector(rand, 8)] }));
      await putAll([...a, ...b, ...c]);
      // A model-B vector asked as model A: only model-A chunks may come back, even though the
      // model-B chunk is a perfect match.
      const bVector = b[2]!.chunks[0]!.vector;
      for (const mode of MODES) {
        const hits = await index.search({ mode, vector: bVector, model: 'model-a', text: 'shared words', limit: 50 });
        expect(docSet(hits), mode).toEqual(['ma-0', 'ma-1', 'ma-2', 'ma-3']);
        const bHits = await index.search({ mode, vector: bVector, model: 'model-b', text: 'shared words', limit: 50 });
        expect(docSet(bHits), mode).toEqual(['mb-0', 'mb-1', 'mb-2', 'mb-3']);
      }
      expect(hitKeys(await index.search({ mode: 'dense', vector: bVector, model: 'model-b', limit: 1 }))).toEqual(['mb-2#0']);
      expect(await index.search({ mode: 'dense', vector: bVector, model: 'model-unknown', limit: 10 })).toEqual([]);
      // Model A has no 8-dimensional vectors; model C's must not answer for it.
      expect(await index.search({ mode: 'dense', vector: c[0]!.chunks[0]!.vector, model: 'model-a', limit: 10 })).toEqual([]);
      expect(docSet(await index.search({ mode: 'keyword', text: 'shared', model: 'model-c', limit: 50 }))).toEqual(['mc-0', 'mc-1']);
      // Without a model, keyword search covers every model.
      expect(await index.search({ mode: 'keyword', text: 'shared', limit: 50 }).then((x) => x.length)).toBe(10);
      await expect(index.search({ mode: 'dense', vector: bVector, limit: 5 })).rejects.toThrow();
    });

    it('keyword search finds a rare word and survives hostile query text', async () => {
      const words = ['river', 'stone', 'market', 'window', 'garden', 'letter', 'signal', 'copper'];
      const rand = rng(5);
      const docs: ReplaceDocumentInput[] = [];
      for (let d = 0; d < 30; d++) {
        const texts = [0, 1].map(() => Array.from({ length: 8 }, () => words[Math.floor(rand() * words.length)]!).join(' '));
        docs.push(makeDoc({ id: `kw-${d}`, texts }));
      }
      docs.push(makeDoc({ id: 'kw-rare', texts: ['river stone market', 'the xylophone rested by the window'] }));
      await putAll(docs);

      for (const text of ['xylophone', 'Xylophone!!', 'XYLOPHONE?', '"xylophone', 'xylophone"', '(xylophone)', 'xylophone*', 'text:xylophone']) {
        const hits = await index.search({ mode: 'keyword', text, limit: 10 });
        expect(hitKeys(hits), text).toEqual(['kw-rare#1']);
        expect(hits[0]!.score).toBeGreaterThan(0);
        expect(hits[0]!.score).toBeLessThanOrEqual(1);
        expect(hits[0]!.text).toBe('the xylophone rested by the window');
      }
      // A query of several words ranks the chunk holding the rare one first.
      const mixed = await index.search({ mode: 'keyword', text: 'window xylophone', limit: 5 });
      expect(hitKeys(mixed)[0]).toBe('kw-rare#1');
      for (let i = 1; i < mixed.length; i++) expect(mixed[i - 1]!.score).toBeGreaterThanOrEqual(mixed[i]!.score);

      const hostile = [
        ...['"', '""', '"""', '*', '**', 'NEAR(', 'NEAR(a b', 'NEAR', 'AND OR', 'AND', 'OR NOT', 'NOT'],
        ...['', '   ', '\t\n', '(', ')', ':', '^', '-', '+', "'", '\\', '{', '}', '[', ']', '\u0000', '😀', '.'],
      ];
      for (const text of hostile) {
        for (const mode of ['keyword', 'hybrid'] as const) {
          const hits = await index.search({ mode, text, vector: unitVector(rng(1), 8), model: 'model-a', limit: 5 });
          expect(Array.isArray(hits), `${mode} ${JSON.stringify(text)}`).toBe(true);
          if (mode === 'keyword' && !/[\p{L}\p{N}]/u.test(text)) expect(hits, JSON.stringify(text)).toEqual([]);
        }
      }
      // Operator words are plain words: "and" appears nowhere in the fixtures, "river" does.
      expect(docSet(await index.search({ mode: 'keyword', text: 'NEAR(river AND OR', limit: 100 })).length).toBeGreaterThan(1);
    });

    it('hybrid search fuses the keyword score with the rescaled cosine, by the given weights', async () => {
      const dim = 8;
      // Dense order against basis vector 0 is A > B > C > D > E > F; only F holds the keyword.
      const cosines = [0.95, 0.85, 0.75, 0.65, 0.55, 0.45];
      const names = ['A', 'B', 'C', 'D', 'E', 'F'];
      const docs = names.map((n, i) =>
        makeDoc({
          id: `fuse-${n}`,
          dim,
          tags: ['fusion'],
          texts: [i === 5 ? `plain filler zanzibar ${n}` : `plain filler ${n}`],
          vectors: [vectorAtCosine(dim, cosines[i]!, i + 1)],
        }),
      );
      // Noise outside the tag that would otherwise rank first in both lists.
      const noise = makeDoc({ id: 'fuse-noise', dim, tags: ['elsewhere'], texts: ['zanzibar zanzibar'], vectors: [basis(dim, 0)] });
      await putAll([...docs, noise]);
      const base = { vector: basis(dim, 0), model: 'model-a', text: 'zanzibar', containerTags: ['fusion'] };
      const fusion = { denseWeight: 0.3, denseFloor: 0.2 };
      const dense = await index.search({ ...base, mode: 'dense', limit: 50 });
      const keyword = await index.search({ ...base, mode: 'keyword', limit: 50 });
      expect(docSet(keyword)).toEqual(['fuse-F']);
      const expected = (kw: SearchHit[]) =>
        dense
          .map((d) => {
            const k = kw.find((h) => h.documentId === d.documentId)?.score ?? 0;
            return { key: `${d.documentId}#${d.index}`, score: 0.7 * k + 0.3 * Math.max(0, (d.score - 0.2) / 0.8) };
          })
          .sort((a, b) => b.score - a.score);
      const hybrid = await index.search({ ...base, mode: 'hybrid', limit: 6, fusion });
      const want = expected(keyword);
      expect(hitKeys(hybrid)).toEqual(want.map((w) => w.key));
      hybrid.forEach((hit, i) => expect(Math.abs(hit.score - want[i]!.score)).toBeLessThan(1e-6));
      // The keyword match outranks chunks that are only closer in vector space.
      expect(hitKeys(hybrid)[0]).toBe('fuse-F#0');
      expect(await index.search({ ...base, mode: 'hybrid', limit: 2, fusion }).then(hitKeys)).toEqual(want.slice(0, 2).map((w) => w.key));
      // All dense: the dense order.
      const denseOnly = await index.search({ ...base, mode: 'hybrid', limit: 6, fusion: { denseWeight: 1, denseFloor: 0 } });
      expect(hitKeys(denseOnly)).toEqual(hitKeys(dense).slice(0, 6));
      // Without fusion given, the defaults: scores stay within 0..1.
      for (const h of await index.search({ ...base, mode: 'hybrid', limit: 6 })) expect(h.score).toBeGreaterThanOrEqual(0), expect(h.score).toBeLessThanOrEqual(1);
    });

    it('keyword search matches word forms (stems) and scores on an absolute 0..1 scale', async () => {
      const dim = 4;
      await putAll([
        makeDoc({ id: 'kw-full', dim, texts: ['Listing the directories of a file system'] }),
        makeDoc({ id: 'kw-part', dim, texts: ['a system of pulleys and ropes'] }),
        makeDoc({ id: 'kw-none', dim, texts: ['nothing to see here at all'] }),
      ]);
      const hits = await index.search({ mode: 'keyword', text: 'list directory', limit: 10 });
      expect(docSet(hits)).toEqual(['kw-full']);
      // Every query word, once, in a short chunk: about the best BM25 the query can get (SQLite
      // divides by that best; Qdrant, which does not expose its idf, maps BM25 through x/(1+x)).
      expect(hits[0]!.score).toBeGreaterThan(0.6);
      expect(hits[0]!.score).toBeLessThanOrEqual(1);
      const partial = await index.search({ mode: 'keyword', text: 'file system directories', limit: 10 });
      expect(partial.map((h) => h.documentId)).toEqual(['kw-full', 'kw-part']);
      // One of three words, and the commonest of them: well below the chunk that has all three.
      expect(partial[1]!.score).toBeLessThan(partial[0]!.score * 0.7);
    });

    it('container-tag isolation holds in every mode (property-style)', async () => {
      const rand = rng(2024);
      const pool = ['t0', 't1', 't2', 't3', 't4', 't5', 't6', 't7'];
      const vocab = ['alpha', 'bravo', 'charlie', 'delta', 'echo', 'foxtrot', 'golf', 'hotel', 'india', 'juliet'];
      const pick = <T>(xs: T[], n: number): T[] => {
        const copy = [...xs];
        const out: T[] = [];
        while (out.length < n && copy.length) out.push(copy.splice(Math.floor(rand() * copy.length), 1)[0]!);
        return out;
      };
      const docs: ReplaceDocumentInput[] = [];
      for (let d = 0; d < 60; d++) {
        const texts = [0, 1].map(() => `shared ${pick(vocab, 4).join(' ')}`);
        docs.push(makeDoc({ id: `iso-${d}`, dim: 16, tags: pick(pool, Math.floor(rand() * 4)), texts, seed: d + 1 }));
      }
      await putAll(docs);
      const tagsOf = new Map(docs.map((d) => [d.documentId, d.containerTags]));
      for (let i = 0; i < 45; i++) {
        const requested = pick(pool, 1 + Math.floor(rand() * 3));
        const mode = MODES[i % 3]!;
        const limit = 1 + Math.floor(rand() * 40);
        const hits = await index.search({
          mode,
          vector: unitVector(rand, 16),
          model: 'model-a',
          text: pick(vocab, 2).join(' '),
          containerTags: requested,
          limit,
        });
        expect(hits.length).toBeLessThanOrEqual(limit);
        for (const hit of hits) {
          const label = `${mode} ${requested.join(',')} → ${hit.documentId}`;
          expect(tagsOf.get(hit.documentId)!.some((t) => requested.includes(t)), label).toBe(true);
          expect(hit.containerTags.some((t) => requested.includes(t)), label).toBe(true);
        }
        // With a word every chunk holds and a large limit, each mode returns exactly the chunks
        // of the documents carrying a requested tag.
        const all = await index.search({ mode, vector: unitVector(rand, 16), model: 'model-a', text: 'shared', containerTags: requested, limit: 1000 });
        const expected = docs
          .filter((d) => d.containerTags.some((t) => requested.includes(t)))
          .flatMap((d) => d.chunks.map((c) => key(d.documentId, c.index)))
          .sort();
        expect(hitKeys(all).sort(), `${mode} ${requested.join(',')}`).toEqual(expected);
      }
      // An empty tag list means "any of no tags": nothing.
      for (const mode of MODES) {
        expect(await index.search({ mode, vector: unitVector(rand, 16), model: 'model-a', text: 'shared', containerTags: [], limit: 10 })).toEqual([]);
      }
    });

    it('metadata filters select exactly the documents matchesFilter selects, in every mode', async () => {
      const fixtures: Record<string, Metadata> = {
        f1: { category: 'News', year: 2021, score: '7.5', tags: ['a', 'B'], flag: true, title: 'Hello World' },
        f2: { category: 'news', year: '2019', tags: ['b'], flag: 'false', title: 'hello there' },
        f3: { category: 'sports', year: 2023, score: 9, tags: [], title: 'World Cup', 'a.b"c': 'x' },
        f4: { year: ' 2020 ', score: 'n/a', tags: ['A', 'c'], flag: false },
        f5: {},
        f6: { category: 'NEWS', year: 2022.5, score: '0x10', title: 'Nested World News', tags: ['news'] },
        f7: { category: ['news', 'tech'], year: '', title: 'TECH' },
        f8: { category: 'ÉCOLE', year: -3, title: 'Ünïcode ÉCOLE' },
      };
      const docs = Object.entries(fixtures).map(([id, metadata]) =>
        makeDoc({ id, metadata, tags: [id === 'f8' ? 'other' : 'main', 'all'], texts: [`common filler ${id}`] }),
      );
      await putAll(docs);
      const cases: { name: string; filter: FilterInput; tags?: string[] }[] = [
        { name: 'equality', filter: { AND: [{ key: 'category', value: 'news' }] } },
        { name: 'equality ignoreCase', filter: { AND: [{ key: 'category', value: 'news', ignoreCase: true }] } },
        { name: 'negated equality matches missing keys', filter: { AND: [{ key: 'category', value: 'news', negate: true }] } },
        { name: 'numeric >', filter: { AND: [{ key: 'year', value: '2020', filterType: 'numeric', numericOperator: '>' }] } },
        { name: 'numeric >= on padded numeric strings', filter: { AND: [{ key: 'year', value: 2020, filterType: 'numeric', numericOperator: '>=' }] } },
        { name: 'numeric = on a numeric string', filter: { AND: [{ key: 'year', value: '2019', filterType: 'numeric', numericOperator: '=' }] } },
        { name: 'numeric < mixed', filter: { AND: [{ key: 'score', value: 8, filterType: 'numeric', numericOperator: '<' }] } },
        { name: 'numeric >= hex string', filter: { AND: [{ key: 'score', value: 16, filterType: 'numeric', numericOperator: '>=' }] } },
        { name: 'numeric = fractional', filter: { AND: [{ key: 'year', value: '2022.5', filterType: 'numeric' }] } },
        { name: 'numeric <= negative', filter: { AND: [{ key: 'year', value: 0, filterType: 'numeric', numericOperator: '<=' }] } },
        { name: 'numeric with a non-numeric target', filter: { AND: [{ key: 'year', value: 'abc', filterType: 'numeric', numericOperator: '>' }] } },
        { name: 'negated numeric', filter: { AND: [{ key: 'year', value: 2020, filterType: 'numeric', numericOperator: '>', negate: true }] } },
        { name: 'array_contains', filter: { AND: [{ key: 'tags', value: 'b', filterType: 'array_contains' }] } },
        { name: 'array_contains ignoreCase', filter: { AND: [{ key: 'tags', value: 'b', filterType: 'array_contains', ignoreCase: true }] } },
        { name: 'array_contains on a scalar never matches', filter: { AND: [{ key: 'title', value: 'TECH', filterType: 'array_contains' }] } },
        { name: 'equality against an array value', filter: { AND: [{ key: 'category', value: 'tech' }] } },
        { name: 'string_contains', filter: { AND: [{ key: 'title', value: 'World', filterType: 'string_contains' }] } },
        { name: 'string_contains ignoreCase', filter: { AND: [{ key: 'title', value: 'world', filterType: 'string_contains', ignoreCase: true }] } },
        { name: 'negated string_contains', filter: { AND: [{ key: 'title', value: 'World', filterType: 'string_contains', negate: true }] } },
        { name: 'string_contains empty needle', filter: { AND: [{ key: 'title', value: '', filterType: 'string_contains' }] } },
        { name: 'string_contains on a number never matches', filter: { AND: [{ key: 'year', value: '20', filterType: 'string_contains' }] } },
        { name: 'boolean equality', filter: { AND: [{ key: 'flag', value: true }] } },
        { name: 'boolean-like string', filter: { AND: [{ key: 'flag', value: 'false' }] } },
        { name: 'number equality via its string form', filter: { AND: [{ key: 'year', value: '2021' }] } },
        { name: 'unicode ignoreCase', filter: { AND: [{ key: 'category', value: 'école', ignoreCase: true }] } },
        { name: 'unicode string_contains ignoreCase', filter: { AND: [{ key: 'title', value: 'ünïcode é', filterType: 'string_contains', ignoreCase: true }] } },
        { name: 'key with dots and quotes', filter: { AND: [{ key: 'a.b"c', value: 'x' }] } },
        {
          name: 'nested and/or',
          filter: {
            AND: [
              { OR: [{ key: 'category', value: 'news', ignoreCase: true }, { key: 'category', value: 'sports' }] },
              { key: 'year', value: 2020, filterType: 'numeric', numericOperator: '>' },
            ],
          },
        },
        {
          name: 'or of and with negation',
          filter: {
            OR: [
              { AND: [{ key: 'tags', value: 'a', filterType: 'array_contains', ignoreCase: true }, { key: 'flag', value: true, negate: true }] },
              { key: 'title', value: 'tech', filterType: 'string_contains', ignoreCase: true },
            ],
          },
        },
        { name: 'empty OR matches nothing', filter: { OR: [] } },
        { name: 'empty AND matches everything', filter: { AND: [] } },
        { name: 'filter combined with tags', filter: { AND: [{ key: 'year', value: -10, filterType: 'numeric', numericOperator: '>' }] }, tags: ['other'] },
      ];
      expect(cases.length).toBeGreaterThanOrEqual(15);
      for (const c of cases) {
        const filter = filterOf(c.filter);
        const expected = docs
          .filter((d) => matchesFilter(d.metadata, filter) && (!c.tags || d.containerTags.some((t) => c.tags!.includes(t))))
          .map((d) => d.documentId)
          .sort();
        const got = await searchAllModes({ vector: unitVector(rng(3), 8), model: 'model-a', text: 'common', filter, containerTags: c.tags, limit: 100 });
        for (const mode of MODES) expect(docSet(got[mode]), `${c.name} (${mode})`).toEqual(expected);
      }
    });

    it('restricts to the given documentIds', async () => {
      const docs = Array.from({ length: 10 }, (_, i) => makeDoc({ id: `ids-${i}`, texts: [`common piece ${i}`, `common part ${i}`] }));
      await putAll(docs);
      const got = await searchAllModes({
        vector: unitVector(rng(8), 8),
        model: 'model-a',
        text: 'common',
        documentIds: ['ids-2', 'ids-5', 'not-there'],
        limit: 100,
      });
      for (const mode of MODES) {
        expect(hitKeys(got[mode]).sort(), mode).toEqual(['ids-2#0', 'ids-2#1', 'ids-5#0', 'ids-5#1']);
      }
      const one = await index.search({
        mode: 'dense',
        vector: unitVector(rng(8), 8),
        model: 'model-a',
        documentIds: ['ids-7'],
        containerTags: ['tag-default'],
        limit: 1,
      });
      expect(docSet(one)).toEqual(['ids-7']);
      for (const mode of MODES) {
        expect(await index.search({ mode, vector: unitVector(rng(8), 8), model: 'model-a', text: 'common', documentIds: [], limit: 10 })).toEqual([]);
      }
    });

    it('stats counts documents and chunks', async () => {
      expect(await index.stats()).toEqual({ documents: 0, chunks: 0 });
      await putAll([
        makeDoc({ id: 'st-1', texts: ['a one', 'a two'] }),
        makeDoc({ id: 'st-2', texts: ['b one', 'b two', 'b three'] }),
        makeDoc({ id: 'st-3', model: 'model-b', dim: 4, texts: ['c one'] }),
      ]);
      expect(await index.stats()).toEqual({ documents: 3, chunks: 6 });
      await index.replaceDocument(makeDoc({ id: 'st-2', revision: 2, texts: ['b one'] }));
      expect(await index.stats()).toEqual({ documents: 3, chunks: 4 });
      await index.deleteDocument('st-1');
      expect(await index.stats()).toEqual({ documents: 2, chunks: 2 });
      // A document with no chunks still counts as a document.
      await index.replaceDocument(makeDoc({ id: 'st-4', texts: [] }));
      expect(await index.stats()).toEqual({ documents: 3, chunks: 2 });
      await index.ping();
    });

    it('validates input: dimension mismatches and queries without a model are refused', async () => {
      const doc = makeDoc({ id: 'bad', dim: 8, texts: ['x'] });
      await expect(index.replaceDocument({ ...doc, dim: 9 })).rejects.toThrow();
      await expect(index.replaceDocument({ ...doc, chunks: [doc.chunks[0]!, doc.chunks[0]!] })).rejects.toThrow();
      expect(await index.stats()).toEqual({ documents: 0, chunks: 0 });
      await index.replaceDocument(doc);
      await expect(index.search({ mode: 'hybrid', text: 'x', model: 'model-a', limit: 3 })).rejects.toThrow();
      await expect(index.search({ mode: 'keyword', limit: 3 })).rejects.toThrow();
      expect(await index.search({ mode: 'dense', vector: doc.chunks[0]!.vector, model: 'model-a', limit: 0 })).toEqual([]);
    });

    it('persists across reopen', async (ctx) => {
      if (!h.reopen) {
        ctx.skip();
        return;
      }
      const docs = Array.from({ length: 5 }, (_, i) =>
        makeDoc({ id: `p-${i}`, revision: i + 1, tags: [`pt${i % 2}`], metadata: { i }, texts: [`durable text ${i}`, `second durable ${i}`] }),
      );
      await putAll(docs);
      const q = docs[3]!.chunks[1]!.vector;
      const before = await index.search({ mode: 'dense', vector: q, model: 'model-a', limit: 4 });
      await index.close();
      const again = await h.reopen();
      try {
        expect(await again.stats()).toEqual({ documents: 5, chunks: 10 });
        for (const d of docs) expect(await again.getDocumentChunks(d.documentId)).toEqual(storedChunks(d));
        const after = await again.search({ mode: 'dense', vector: q, model: 'model-a', limit: 4 });
        expect(hitKeys(after)).toEqual(hitKeys(before));
        expect(hitKeys(after)[0]).toBe('p-3#1');
        expect(docSet(await again.search({ mode: 'keyword', text: 'durable', containerTags: ['pt1'], limit: 20 }))).toEqual(['p-1', 'p-3']);
        // Revisions survived too: an older one is still refused.
        expect((await again.replaceDocument({ ...docs[4]!, revision: 1 })).stale).toBe(true);
      } finally {
        await again.close();
      }
    });
  });
}
