/**
 * Evidence recall on generated multi-session conversations (conversations.ts): each
 * conversation is chunked by the chunker's own `chunkText` (conversation units), embedded,
 * indexed under its own container tag, and each question is searched within that tag. A
 * question counts as answered within B tokens when its evidence turn lies within the first B
 * tokens (o200k_base) of the returned chunks, read in order — what an LLM given that budget of
 * retrieved text would see. The baseline is textbook BM25 over the raw turns of the same
 * conversation, in the same run.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { SearchQuery } from '../../packages/chunk-index/src/port.js';
import { DEFAULT_SEARCH_THRESHOLD } from '../../packages/contracts/src/search.js';
import type { Fusion } from '../../packages/chunk-index/src/shared.js';
import { SqliteChunkIndex } from '../../packages/chunk-index/src/sqlite.js';
import type { Embedder } from '../../packages/embedder/src/port.js';
import { chunkText, countTokens } from '../../services/chunker/src/handlers/chunk.js';
import { transcriptOf, type Conversation } from './conversations.js';
import { PlainBm25 } from './evaluate.js';

export const BUDGETS = [500, 1000, 2000] as const;
const DEPTH = 100;

export type ConversationMode = 'dense' | 'keyword' | 'hybrid' | 'bm25-turns';

export interface ConversationEvaluation {
  conversations: number;
  questions: number;
  chunks: number;
  model: string;
  /** Evidence recall by mode and token budget. */
  recall: Record<ConversationMode, Record<(typeof BUDGETS)[number], number>>;
  sweep: { fusion: Fusion; recall: Record<(typeof BUDGETS)[number], number> }[];
}

/** Whether `evidence` lies within the first `budget` tokens of `texts` read in order. */
function withinBudget(texts: string[], evidence: string, budget: number, tokens: (t: string) => number): boolean {
  let used = 0;
  for (const t of texts) {
    const at = t.indexOf(evidence);
    if (at >= 0) return used + tokens(t.slice(0, at + evidence.length)) <= budget;
    used += tokens(t);
    if (used >= budget) return false;
  }
  return false;
}

export async function evaluateConversations(convs: Conversation[], embedder: Embedder, opts: { sweep?: Fusion[]; fusion?: Fusion } = {}): Promise<ConversationEvaluation> {
  const dir = mkdtempSync(path.join(tmpdir(), 'memstream-conv-'));
  const index = SqliteChunkIndex.open(path.join(dir, 'index.sqlite'));
  const tokenCache = new Map<string, number>();
  const tokens = (t: string) => {
    let n = tokenCache.get(t);
    if (n === undefined) tokenCache.set(t, (n = countTokens(t)));
    return n;
  };
  try {
    let chunks = 0;
    const turnIndexes = new Map<string, PlainBm25>();
    for (const c of convs) {
      const cs = chunkText(transcriptOf(c), 'conversation');
      const vectors = await embedder.embed(cs.map((x) => x.text));
      await index.replaceDocument({
        documentId: c.id,
        revision: 1,
        model: embedder.model,
        dim: embedder.dim,
        containerTags: [c.id],
        metadata: {},
        chunks: cs.map((x, j) => ({ index: j, hash: x.hash, text: x.text, vector: vectors[j]! })),
      });
      chunks += cs.length;
      const bm25 = new PlainBm25();
      let n = 0;
      for (const s of c.sessions) for (const t of s.turns) bm25.add(c.id, n++, `${t.speaker}: ${t.text}`);
      turnIndexes.set(c.id, bm25);
    }

    const questions = convs.flatMap((c) => c.questions.map((q) => ({ c, q, evidence: c.sessions[q.evidence.session]!.turns[q.evidence.turn]!.text })));
    const qvecs = await embedder.embed(questions.map((x) => x.q.q));
    const score = async (mode: ConversationMode, fusion?: Fusion) => {
      const found = Object.fromEntries(BUDGETS.map((b) => [b, 0])) as Record<(typeof BUDGETS)[number], number>;
      for (const [i, { c, q, evidence }] of questions.entries()) {
        let texts: string[];
        if (mode === 'bm25-turns') {
          const turns = c.sessions.flatMap((s) => s.turns.map((t) => `${t.speaker}: ${t.text}`));
          texts = turnIndexes.get(c.id)!.search(q.q, DEPTH).map((h) => turns[h.index]!);
        } else {
          const query: SearchQuery = { mode, limit: DEPTH, containerTags: [c.id] };
          if (mode !== 'keyword') Object.assign(query, { vector: qvecs[i]!, model: embedder.model });
          if (mode !== 'dense') query.text = q.q;
          if (mode === 'hybrid' && fusion) query.fusion = fusion;
          // Hybrid as the endpoints answer it: hits under the default threshold are not returned.
          texts = (await index.search(query)).filter((h) => mode !== 'hybrid' || h.score >= DEFAULT_SEARCH_THRESHOLD).map((h) => h.text);
        }
        for (const b of BUDGETS) if (withinBudget(texts, evidence, b, tokens)) found[b]++;
      }
      for (const b of BUDGETS) found[b] /= questions.length;
      return found;
    };
    const recall = {} as ConversationEvaluation['recall'];
    for (const mode of ['dense', 'keyword', 'hybrid', 'bm25-turns'] as const) recall[mode] = await score(mode, mode === 'hybrid' ? (opts.fusion ?? embedder.fusion) : undefined);
    const sweep: ConversationEvaluation['sweep'] = [];
    for (const fusion of opts.sweep ?? []) sweep.push({ fusion, recall: await score('hybrid', fusion) });
    return { conversations: convs.length, questions: questions.length, chunks, model: embedder.model, recall, sweep };
  } finally {
    await index.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

export function formatConversationEvaluation(e: ConversationEvaluation): string {
  const row = (name: string, r: Record<(typeof BUDGETS)[number], number>) => `  ${name.padEnd(11)} ${BUDGETS.map((b) => `${b}: ${r[b].toFixed(3)}`).join('  ')}`;
  return [
    `conversations: ${e.questions} questions over ${e.conversations} generated multi-session dialogues (${e.chunks} chunks), ${e.model}; evidence recall within N returned tokens`,
    ...(['dense', 'keyword', 'hybrid', 'bm25-turns'] as const).map((m) => row(m, e.recall[m])),
    `  (bm25-turns: textbook BM25 over the raw turns of the same conversation — the baseline)`,
    ...e.sweep.map((w) => row(`w ${w.fusion.denseWeight} f ${w.fusion.denseFloor}`, w.recall)),
  ].join('\n');
}
