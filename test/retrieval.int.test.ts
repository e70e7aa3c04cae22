import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { HashedEmbedder } from '../packages/embedder/src/hashed.js';
import { StaticEmbedder, installedSourceVersion, staticModelPath } from '../packages/embedder/src/static-model.js';
import { evaluate, formatEvaluation } from './retrieval/evaluate.js';
import { loadRetrievalSet } from './retrieval/manpages.js';
import { generateConversations } from './retrieval/conversations.js';
import { evaluateConversations, formatConversationEvaluation } from './retrieval/evaluate-conversations.js';

// The retrieval test set (test/retrieval/manpages.ts) at a size the suite can afford; the bench
// (`node --import tsx bench/retrieval.ts`) runs it over a few thousand pages. The floors sit a
// little under what the hashed embedder measured (deterministic, and the floors were set with it;
// the default static model is exercised end to end by the SDK, search and MCP suites), so a change that makes retrieval worse fails
// here instead of going unnoticed.
describe('retrieval over real text: manual pages, their NAME lines as queries', () => {
  it('finds the page a description came from, in every mode, and never crosses a container tag', async () => {
    const set = loadRetrievalSet({ docs: 600, queries: 200 });
    expect(new Set(set.queries.map((q) => q.relevant)).size).toBe(200);
    const e = await evaluate(set, new HashedEmbedder());
    console.log(formatEvaluation(e));
    expect(e.tagLeaks).toBe(0);
    expect(e.scores.keyword.recallAt10).toBeGreaterThan(0.75);
    expect(e.scores.dense.recallAt10).toBeGreaterThan(0.55);
    expect(e.scores.hybrid.recallAt10).toBeGreaterThan(0.7);
    // Ranks mean something: the relevant page is usually near the top, not just anywhere in 10.
    expect(e.scores.keyword.mrrAt10).toBeGreaterThan(0.5);
    // The default search beats textbook BM25 over the same chunks, measured in the same run
    // (600 pages: +0.05 recall@10, +0.04 MRR@10 when this was written).
    expect(e.scores.hybrid.recallAt10).toBeGreaterThanOrEqual(e.scores.bm25.recallAt10 + 0.02);
    expect(e.scores.hybrid.mrrAt10).toBeGreaterThanOrEqual(e.scores.bm25.mrrAt10 + 0.02);
    // Restricting to the page's own tag removes competitors, so it can only help.
    expect(e.taggedRecallAt10).toBeGreaterThanOrEqual(e.scores.hybrid.recallAt10 - 0.02);
  }, 240_000);
});

// The conversations half of the acceptance, with the default model (static): hybrid search at the
// default threshold beats BM25 over the raw turns by +0.05 evidence recall at 1,000 tokens. The
// set is generated from a seed and the model is a fixed file, so the figures are the same on
// every run (0.760 against 0.695 when this was written); the hashed model fails it (0.250).
const staticFile = staticModelPath(installedSourceVersion());
describe('retrieval over generated conversations with the default (static) model', () => {
  if (!existsSync(staticFile)) console.log(`[retrieval] conversations test skipped: ${staticFile} is not built (./memstream builds it after installing dependencies)`);
  it.skipIf(!existsSync(staticFile))('hybrid search finds the evidence turn within 1,000 tokens more often than BM25 over turns, by 0.05', async () => {
    const c = await evaluateConversations(generateConversations({ count: 20, seed: 7 }), StaticEmbedder.load(staticFile));
    console.log(formatConversationEvaluation(c));
    expect(c.questions).toBe(200);
    expect(c.recall.hybrid[1000]).toBeGreaterThanOrEqual(c.recall['bm25-turns'][1000] + 0.05);
    expect(c.recall.dense[1000]).toBeGreaterThan(c.recall.hybrid[1000]);
  }, 240_000);
});
