/**
 * Retrieval quality of the embedded default index over the manual-page set: documents are chunked
 * with the chunker service's own `chunkText`, embedded, written through the ChunkIndex port, and
 * each query is searched in every mode. Scores are per document (a document's best chunk ranks
 * it): recall@10 (the relevant page is among the first 10 documents) and MRR@10.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { ChunkIndex, SearchHit, SearchQuery } from '../../packages/chunk-index/src/port.js';
import { SqliteChunkIndex } from '../../packages/chunk-index/src/sqlite.js';
import type { Embedder } from '../../packages/embedder/src/port.js';
import { chunkText } from '../../services/chunker/src/handlers/chunk.js';
import type { RetrievalSet } from './manpages.js';

export const MODES = ['dense', 'keyword', 'hybrid'] as const;
export type Mode = (typeof MODES)[number];
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
  scores: Record<Mode, ModeScore>;
  /** Hits that carried none of the query's container tags (must be 0). */
  tagLeaks: number;
  /** Tag-restricted queries whose relevant page (same tag) was found in the top 10, hybrid. */
  taggedRecallAt10: number;
}

function pct(sorted: number[], p: number): number {
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]! : 0;
}

/** Documents in the order of their best chunk. */
function rankDocuments(hits: SearchHit[]): string[] {
  const out: string[] = [];
  for (const h of hits) if (!out.includes(h.documentId)) out.push(h.documentId);
  return out;
}

export async function evaluate(set: RetrievalSet, embedder: Embedder, opts: { maxTokens?: number; index?: ChunkIndex } = {}): Promise<Evaluation> {
  const dir = opts.index ? null : mkdtempSync(path.join(tmpdir(), 'memstream-retrieval-'));
  const index = opts.index ?? SqliteChunkIndex.open(path.join(dir!, 'index.sqlite'));
  try {
    const tagOf = new Map<string, string>();
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
      chunks += cs.length;
    }
    const indexMs = performance.now() - t0;

    const qvecs = await embedder.embed(set.queries.map((q) => q.q));
    const scores = {} as Record<Mode, ModeScore>;
    for (const mode of MODES) {
      let found = 0;
      let rr = 0;
      const ms: number[] = [];
      for (const [i, q] of set.queries.entries()) {
        const query: SearchQuery = { mode, limit: DEPTH };
        if (mode !== 'keyword') Object.assign(query, { vector: qvecs[i]!, model: embedder.model });
        if (mode !== 'dense') query.text = q.q;
        const s = performance.now();
        const hits = await index.search(query);
        ms.push(performance.now() - s);
        const rank = rankDocuments(hits).slice(0, K).indexOf(q.relevant);
        if (rank >= 0) {
          found++;
          rr += 1 / (rank + 1);
        }
      }
      ms.sort((a, b) => a - b);
      scores[mode] = { recallAt10: found / set.queries.length, mrrAt10: rr / set.queries.length, p50Ms: pct(ms, 50), p95Ms: pct(ms, 95) };
    }

    // The same queries restricted to their page's tag: nothing from another tag may come back.
    let tagLeaks = 0;
    let taggedFound = 0;
    for (const [i, q] of set.queries.entries()) {
      const tag = tagOf.get(q.relevant)!;
      const hits = await index.search({ mode: 'hybrid', limit: DEPTH, vector: qvecs[i]!, model: embedder.model, text: q.q, containerTags: [tag] });
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
    };
  } finally {
    if (!opts.index) {
      await index.close();
      rmSync(dir!, { recursive: true, force: true });
    }
  }
}

export function formatEvaluation(e: Evaluation): string {
  const rows = MODES.map(
    (m) =>
      `  ${m.padEnd(8)} recall@10 ${e.scores[m].recallAt10.toFixed(3)}  MRR@10 ${e.scores[m].mrrAt10.toFixed(3)}  p50 ${e.scores[m].p50Ms.toFixed(1)} ms  p95 ${e.scores[m].p95Ms.toFixed(1)} ms`,
  );
  return [
    `retrieval: ${e.queries} queries over ${e.docs} manual pages (${e.chunks} chunks), ${e.model}, indexed in ${(e.indexMs / 1000).toFixed(1)} s`,
    ...rows,
    `  tag-restricted hybrid recall@10 ${e.taggedRecallAt10.toFixed(3)}, hits from another tag: ${e.tagLeaks}`,
  ].join('\n');
}
