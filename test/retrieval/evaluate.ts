/**
 * Retrieval quality of the embedded default index over the manual-page set: documents are chunked
 * with the chunker service's own `chunkText`, embedded, written through the ChunkIndex port, and
 * each query is searched in every mode. Scores are per document (a document's best chunk ranks
 * it): recall@10 (the relevant page is among the first 10 documents) and MRR@10.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { ChunkIndex, SearchQuery } from '../../packages/chunk-index/src/port.js';
import type { Fusion } from '../../packages/chunk-index/src/shared.js';
import { SqliteChunkIndex } from '../../packages/chunk-index/src/sqlite.js';
import type { Embedder } from '../../packages/embedder/src/port.js';
import { chunkText } from '../../services/chunker/src/handlers/chunk.js';
import { searchDocuments, searchMemories } from '../../services/gateway/src/handlers/search.js';
import { SqliteDocumentViews, type DocumentView } from '@memstream/views';
import type { RetrievalSet } from './manpages.js';

export const MODES = ['dense', 'keyword', 'hybrid'] as const;
export type Mode = (typeof MODES)[number];
/**
 * The endpoints' default search, through the gateway's own handlers over the same index: POST
 * /v3/search and POST /v4/search with nothing but `q` (v4 as it answers without a memory store:
 * chunk hits, one per chunk; with one, its default mode searches memories instead).
 */
export const ENDPOINTS = ['v3-default', 'v4-chunks'] as const;
export type Endpoint = (typeof ENDPOINTS)[number];
/** What every mode is measured against: textbook BM25 over the same chunks, in the same run. */
export const BASELINE = 'bm25' as const;
export const TAGS = ['tag-a', 'tag-b', 'tag-c', 'tag-d'];
const K = 10;
/** Chunks fetched per query before collapsing to documents. */
const DEPTH = 60;

export interface ModeScore {
  recallAt10: number;
  mrrAt10: number;
  /** Per-query latency through index.search, ms. */
  p50Ms: number;
  p95Ms: number;
}

export interface Evaluation {
  docs: number;
  chunks: number;
  queries: number;
  model: string;
  indexMs: number;
  scores: Record<Mode | typeof BASELINE, ModeScore> & Partial<Record<Endpoint, ModeScore>>;
  /** Hits that carried none of the query's container tags (must be 0). */
  tagLeaks: number;
  /** Tag-restricted queries whose relevant page (same tag) was found in the top 10, hybrid. */
  taggedRecallAt10: number;
  /** Hybrid search with each fusion asked for (`sweep`), on the same index and queries. */
  sweep: { fusion: Fusion; recallAt10: number; mrrAt10: number }[];
}

/**
 * Plain BM25 (k1 1.2, b 0.75, Lucene's idf) over the chunks, in memory: words as FTS5's
 * unicode61 cuts them, no stemming, every query word used. The baseline the issue measured
 * memstream against; kept deliberately textbook so an improvement over it means something.
 */
export class PlainBm25 {
  private readonly postings = new Map<string, { doc: number; tf: number }[]>();
  private readonly lengths: number[] = [];
  private readonly ids: { documentId: string; index: number }[] = [];

  add(documentId: string, index: number, text: string): void {
    const words = tokenizeWords(text);
    const doc = this.ids.length;
    this.ids.push({ documentId, index });
    this.lengths.push(words.length);
    const tf = new Map<string, number>();
    for (const w of words) tf.set(w, (tf.get(w) ?? 0) + 1);
    for (const [w, n] of tf) {
      let list = this.postings.get(w);
      if (!list) this.postings.set(w, (list = []));
      list.push({ doc, tf: n });
    }
  }

  search(q: string, limit: number): { documentId: string; index: number; score: number }[] {
    const n = this.ids.length;
    const avg = this.lengths.reduce((a, b) => a + b, 0) / Math.max(1, n);
    const scores = new Map<number, number>();
    for (const w of new Set(tokenizeWords(q))) {
      const list = this.postings.get(w);
      if (!list) continue;
      const idf = Math.log(1 + (n - list.length + 0.5) / (list.length + 0.5));
      for (const { doc, tf } of list) {
        const s = (idf * tf * 2.2) / (tf + 1.2 * (0.25 + (0.75 * this.lengths[doc]!) / avg));
        scores.set(doc, (scores.get(doc) ?? 0) + s);
      }
    }
    return [...scores]
      .sort((a, b) => b[1] - a[1] || a[0] - b[0])
      .slice(0, limit)
      .map(([doc, score]) => ({ ...this.ids[doc]!, score }));
  }
}

function tokenizeWords(text: string): string[] {
  return text.toLowerCase().match(/[\p{L}\p{N}\p{M}]+/gu) ?? [];
}

function pct(sorted: number[], p: number): number {
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]! : 0;
}

/** Documents in the order of their best chunk. */
function rankDocuments(hits: { documentId: string }[]): string[] {
  const out: string[] = [];
  for (const h of hits) if (!out.includes(h.documentId)) out.push(h.documentId);
  return out;
}

export async function evaluate(
  set: RetrievalSet,
  embedder: Embedder,
  opts: { maxTokens?: number; index?: ChunkIndex; sweep?: Fusion[]; fusion?: Fusion; endpoints?: boolean } = {},
): Promise<Evaluation> {
  // Hybrid as the endpoints ask for it: the model's own fusion when it has one.
  const fusion = opts.fusion ?? embedder.fusion;
  const dir = opts.index ? null : mkdtempSync(path.join(tmpdir(), 'memstream-retrieval-'));
  const index = opts.index ?? SqliteChunkIndex.open(path.join(dir!, 'index.sqlite'));
  try {
    const tagOf = new Map<string, string>();
    const bm25 = new PlainBm25();
    let chunks = 0;
    const t0 = performance.now();
    for (const [i, d] of set.docs.entries()) {
      const cs = chunkText(d.text, 'plain', { maxTokens: opts.maxTokens ?? 512 });
      const vectors = await embedder.embed(cs.map((c) => c.text));
      const tag = TAGS[i % TAGS.length]!;
      tagOf.set(d.id, tag);
      await index.replaceDocument({
        documentId: d.id,
        revision: 1,
        model: embedder.model,
        dim: embedder.dim,
        containerTags: [tag],
        metadata: {},
        chunks: cs.map((c, j) => ({ index: j, hash: c.hash, text: c.text, vector: vectors[j]! })),
      });
      cs.forEach((c, j) => bm25.add(d.id, j, c.text));
      chunks += cs.length;
    }
    const indexMs = performance.now() - t0;

    const qvecs = await embedder.embed(set.queries.map((q) => q.q));
    /** recall@10, MRR@10 and latency of one way of searching, over every query of the set. */
    const scoreQueries = async (search: (q: (typeof set.queries)[number], i: number) => { documentId: string }[] | Promise<{ documentId: string }[]>): Promise<ModeScore> => {
      let found = 0;
      let rr = 0;
      const ms: number[] = [];
      for (const [i, q] of set.queries.entries()) {
        const s = performance.now();
        const hits = await search(q, i);
        ms.push(performance.now() - s);
        const rank = rankDocuments(hits).slice(0, K).indexOf(q.relevant);
        if (rank >= 0) {
          found++;
          rr += 1 / (rank + 1);
        }
      }
      ms.sort((a, b) => a - b);
      return { recallAt10: found / set.queries.length, mrrAt10: rr / set.queries.length, p50Ms: pct(ms, 50), p95Ms: pct(ms, 95) };
    };
    const scores = {} as Evaluation['scores'];
    scores[BASELINE] = await scoreQueries((q) => bm25.search(q.q, DEPTH));
    for (const mode of MODES) {
      scores[mode] = await scoreQueries((q, i) => {
        const query: SearchQuery = { mode, limit: DEPTH };
        if (mode !== 'keyword') Object.assign(query, { vector: qvecs[i]!, model: embedder.model });
        if (mode !== 'dense') query.text = q.q;
        if (mode === 'hybrid' && fusion) query.fusion = fusion;
        return index.search(query);
      });
    }

    if (opts.endpoints) {
      const views = SqliteDocumentViews.open(':memory:');
      try {
        for (const d of set.docs) await views.put(viewOf(d.id, tagOf.get(d.id)!), 0);
        const ports = { index, views, embedder };
        scores['v3-default'] = await scoreQueries(async (q) => (await searchDocuments(ports, { q: q.q, limit: K })).results);
        // v4 answers chunks, several of them often from one document: asked for as many as the
        // index modes are (DEPTH), then ranked by document like them.
        scores['v4-chunks'] = await scoreQueries(async (q) => (await searchMemories(ports, { q: q.q, limit: DEPTH })).results.map((r) => ({ documentId: r.documents?.[0]?.id ?? r.id })));
      } finally {
        await views.close();
      }
    }

    const sweep: Evaluation['sweep'] = [];
    for (const fusion of opts.sweep ?? []) {
      const { recallAt10, mrrAt10 } = await scoreQueries((q, i) => index.search({ mode: 'hybrid', limit: DEPTH, vector: qvecs[i]!, model: embedder.model, text: q.q, fusion }));
      sweep.push({ fusion, recallAt10, mrrAt10 });
    }

    // The same queries restricted to their page's tag: nothing from another tag may come back.
    let tagLeaks = 0;
    let taggedFound = 0;
    for (const [i, q] of set.queries.entries()) {
      const tag = tagOf.get(q.relevant)!;
      const hits = await index.search({ mode: 'hybrid', limit: DEPTH, vector: qvecs[i]!, model: embedder.model, text: q.q, containerTags: [tag], ...(fusion ? { fusion } : {}) });
      tagLeaks += hits.filter((h) => !h.containerTags.includes(tag)).length;
      if (rankDocuments(hits).slice(0, K).includes(q.relevant)) taggedFound++;
    }
    return {
      docs: set.docs.length,
      chunks,
      queries: set.queries.length,
      model: embedder.model,
      indexMs,
      scores,
      tagLeaks,
      taggedRecallAt10: taggedFound / set.queries.length,
      sweep,
    };
  } finally {
    if (!opts.index) {
      await index.close();
      rmSync(dir!, { recursive: true, force: true });
    }
  }
}

/** A finished document's view, as the projection would hold it (the handlers read titles and tags from it). */
function viewOf(id: string, tag: string): DocumentView {
  const at = new Date(0).toISOString();
  return {
    id, customId: null, revision: 1, status: 'done', title: id, type: 'text', content: '', summary: null, url: null, filepath: null, source: null,
    metadata: {}, containerTags: [tag], taskType: 'memory', contentHash: null, error: null, chunkCount: 0, metadataVersion: 0, createdAt: at, updatedAt: at, version: 0,
  };
}

export function formatEvaluation(e: Evaluation): string {
  const rows = [...MODES, ...ENDPOINTS.filter((m) => e.scores[m]), BASELINE].map(
    (m) =>
      `  ${m.padEnd(10)} recall@10 ${e.scores[m]!.recallAt10.toFixed(3)}  MRR@10 ${e.scores[m]!.mrrAt10.toFixed(3)}  p50 ${e.scores[m]!.p50Ms.toFixed(1)} ms  p95 ${e.scores[m]!.p95Ms.toFixed(1)} ms`,
  );
  return [
    `retrieval: ${e.queries} queries over ${e.docs} manual pages (${e.chunks} chunks), ${e.model}, indexed in ${(e.indexMs / 1000).toFixed(1)} s`,
    ...rows,
    `  (bm25: textbook BM25 over the same chunks in this run, no stemming — the baseline)`,
    ...e.sweep.map((w) => `  hybrid with dense weight ${w.fusion.denseWeight}, floor ${w.fusion.denseFloor}: recall@10 ${w.recallAt10.toFixed(3)}  MRR@10 ${w.mrrAt10.toFixed(3)}`),
    `  tag-restricted hybrid recall@10 ${e.taggedRecallAt10.toFixed(3)}, hits from another tag: ${e.tagLeaks}`,
  ].join('\n');
}
