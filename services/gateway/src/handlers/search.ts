import {
  V3SearchRequest,
  V4SearchRequest,
  type FilterExpr,
  type V3SearchChunk,
  type V3SearchResponse,
  type V3SearchResult,
  type V4SearchResponse,
  type V4SearchResult,
} from '@memstream/contracts';
import { tokenize, type ChunkIndex, type SearchHit } from '@memstream/chunk-index';
import type { Embedder, Reranker } from '@memstream/embedder';
import { ValidationError } from '@memstream/kit';
import type { DocumentView, DocumentViews } from '@memstream/views';
import { readTags, type TagScope } from './scope.js';
import { searchMemoryHits, type MemoryPorts } from './memories.js';
import { documentIdCandidates } from './documents.js';

/** What search needs: the chunk index to rank, the view store for titles and timestamps, and the query embedder. */
export interface SearchPorts {
  index: Pick<ChunkIndex, 'search' | 'getDocumentChunks'>;
  views: Pick<DocumentViews, 'get' | 'list'>;
  /** Must be the model the embedder service indexes with, or dense search finds nothing (the index never mixes models). */
  embedder: Embedder;
  /** A configured cross-encoder (RERANKER_URL); without one `rerank: true` changes nothing. */
  reranker?: Reranker | undefined;
  /** Milliseconds, for `timing`; injectable so tests are deterministic. */
  clock?: () => number;
}

/** How many of the best candidates a reranker reads: cross-encoders cost a model call per pair. */
export const RERANK_DEPTH = 50;

/**
 * The index's hybrid score is already on the 0..1 scale the SDK documents for `score`,
 * `similarity`, `threshold` and `chunkThreshold`, and means the same for every query: about 1 for
 * a chunk holding the whole query, near 0 for an unrelated one (docs/search.md). This only
 * guards the bounds against rounding.
 */
export function normaliseScore(score: number): number {
  return Math.min(1, Math.max(0, score));
}

/** Documents a filepath may select before the search refuses and asks for a narrower one. */
export const MAX_FILEPATH_DOCUMENTS = 10_000;

/**
 * v3 groups chunks by document, so it asks the index for more chunks than documents wanted:
 * several of the best chunks often belong to one document. Bounded so a limit of 100 stays cheap.
 */
export function candidateDepth(limit: number): number {
  return Math.min(Math.max(limit * 10, 100), 1000);
}

interface Scope {
  containerTags?: string[];
  filter?: FilterExpr;
  documentIds?: string[];
}

function tagsOf(req: { containerTag?: string | undefined; containerTags?: string[] | undefined }): string[] | undefined {
  if (req.containerTag === undefined && req.containerTags === undefined) return undefined;
  return [...new Set([...(req.containerTag ? [req.containerTag] : []), ...(req.containerTags ?? [])])];
}

/**
 * The documents under a filepath, from the view store: the index holds no paths, and turning the
 * path into a document-id restriction keeps it a restriction before ranking (so `limit` hits are
 * still returned when that many match) rather than a filter applied afterwards.
 */
async function documentsUnder(ports: SearchPorts, filepath: string, containerTags: string[] | undefined): Promise<string[]> {
  const ids: string[] = [];
  const page = 500;
  for (let offset = 0; ; offset += page) {
    const { items } = await ports.views.list({ filepath, ...(containerTags ? { containerTags } : {}), sort: 'createdAt', order: 'asc', limit: page, offset });
    ids.push(...items.map((v) => v.id));
    if (ids.length > MAX_FILEPATH_DOCUMENTS) {
      throw new ValidationError('filepath selects too many documents', `filepath: matches more than ${MAX_FILEPATH_DOCUMENTS} documents; use a narrower path`);
    }
    if (items.length < page) return ids;
  }
}

function intersect(a: string[] | undefined, b: string[] | undefined): string[] | undefined {
  if (!a) return b;
  if (!b) return a;
  const keep = new Set(b);
  return a.filter((x) => keep.has(x));
}

async function scopeOf(ports: SearchPorts, req: { containerTags?: string[] | undefined; filters?: FilterExpr | undefined; docId?: string | undefined; filepath?: string | undefined; tagScope?: TagScope }): Promise<Scope> {
  // A customId names a document of the caller's own customId namespace, as GET resolves it.
  let documentIds = req.docId !== undefined ? documentIdCandidates(req.docId, req.tagScope ?? null) : undefined;
  if (req.filepath !== undefined) documentIds = intersect(documentIds, await documentsUnder(ports, req.filepath, req.containerTags));
  return {
    // Passed to the index whenever a tag was given: it restricts before ranking, so a hit from
    // another tag can never be among the results.
    ...(req.containerTags ? { containerTags: req.containerTags } : {}),
    // Pushed down to the index, which evaluates it with matchesFilter's semantics.
    ...(req.filters ? { filter: req.filters } : {}),
    ...(documentIds ? { documentIds } : {}),
  };
}

/** Hybrid (keyword + dense, fused by weighted absolute scores) candidates for `q`, best first. */
async function retrieve(ports: SearchPorts, q: string, scope: Scope, limit: number, rerank = false): Promise<SearchHit[]> {
  // A query without a single word has nothing to match: keyword search finds nothing, and its
  // vector (the embedder's fixed vector for empty text) would rank chunks arbitrarily.
  if (tokenize(q).length === 0) return [];
  const [vector] = await ports.embedder.embed([q]);
  if (!vector) throw new Error('the embedder returned no vector for the query');
  // The model's own fusion weights when it has them (the static model does), else the index's default.
  // At least LEAD_DEPTH candidates, so that a document's lead chunk is usually among them.
  const candidates = await ports.index.search({ mode: 'hybrid', vector, model: ports.embedder.model, text: q, ...scope, limit: Math.max(limit, LEAD_DEPTH), ...(ports.embedder.fusion ? { fusion: ports.embedder.fusion } : {}) });
  const hits = withLead(candidates).slice(0, limit);
  return rerank && ports.reranker ? rerankHits(ports.reranker, q, hits) : hits;
}

/** How much of its document's lead chunk's score a chunk borrows (withLead). */
export const LEAD_WEIGHT = 0.2;
const LEAD_DEPTH = 50;

/**
 * A document's lead as a field: every chunk borrows LEAD_WEIGHT of the score of its document's
 * first chunk (its lead paragraph, its first heading's section) when that chunk is among the
 * candidates, as (score + w · lead) / (1 + w), so scores stay in 0..1 and 0 stays 0. Every chunk
 * of a document gains the same, so the order within a document (and within one conversation) is
 * unchanged; between documents, one whose opening is also about the query comes first. Chosen on
 * the manual pages of seed 7 and confirmed on seed 8 (docs/search.md).
 */
export function withLead(hits: SearchHit[], weight = LEAD_WEIGHT): SearchHit[] {
  const lead = new Map<string, number>();
  for (const h of hits) if (h.index === 0) lead.set(h.documentId, h.score);
  return hits
    .map((h) => ({ ...h, score: (h.score + weight * (lead.get(h.documentId) ?? 0)) / (1 + weight) }))
    .sort((a, b) => b.score - a.score || (a.documentId < b.documentId ? -1 : a.documentId > b.documentId ? 1 : 0) || a.index - b.index);
}

/**
 * The best RERANK_DEPTH hits scored again by the reranker (its 0..1 relevance becomes the score,
 * so thresholds apply to it), best first; the rest keep their order below them.
 */
async function rerankHits(reranker: Reranker, q: string, hits: SearchHit[]): Promise<SearchHit[]> {
  const head = hits.slice(0, RERANK_DEPTH);
  const scores = await reranker.rerank(q, head.map((h) => h.text));
  const reranked = head.map((h, i) => ({ ...h, score: scores[i] ?? 0 })).sort((a, b) => b.score - a.score);
  const floor = reranked.length ? Math.min(...reranked.map((h) => h.score)) : 0;
  // Below the reranked ones, and never above them: scaled under the lowest reranked score.
  return [...reranked, ...hits.slice(RERANK_DEPTH).map((h) => ({ ...h, score: Math.min(h.score, floor) }))];
}

/**
 * The current view of each document, fetched once. A hit whose document has no view was deleted
 * between the index read and now (the view exists from submission on), so it is dropped. When
 * tags were asked for, a document whose view no longer carries any of them is dropped too: its
 * tags were just changed and the index has not caught up, and isolation must not depend on it.
 */
async function viewsOf(ports: SearchPorts, documentIds: Iterable<string>, tags: string[] | undefined): Promise<Map<string, DocumentView>> {
  const ids = [...new Set(documentIds)];
  const views = await Promise.all(ids.map((id) => ports.views.get(id)));
  const out = new Map<string, DocumentView>();
  for (const v of views) {
    if (!v) continue;
    if (tags && !v.containerTags.some((t) => tags.includes(t))) continue;
    out.set(v.id, v);
  }
  return out;
}

/**
 * POST /v3/search: documents, best first, each with its matching chunks.
 *
 * Retrieval is hybrid (keyword + dense), restricted in the index by tags, filters, docId and
 * filepath. Chunks scoring below `chunkThreshold` (0..1) are dropped; the rest are grouped by
 * document, whose score is its best chunk's; `limit` counts documents. Within a document the
 * matching chunks come best first (then, with onlyMatchingChunks false, their neighbours).
 * `rerank: true` re-scores the best candidates with the configured reranker (RERANKER_URL) and is
 * a no-op without one; `rewriteQuery` is accepted and changes nothing (no model for it).
 */
export async function searchDocuments(ports: SearchPorts, body: unknown, tagScope: TagScope = null): Promise<V3SearchResponse> {
  const clock = ports.clock ?? (() => performance.now());
  const started = clock();
  const req = V3SearchRequest.parse(body);
  // A scoped key searches its own tags when it names none; naming another tag is 403.
  const tags = readTags(tagScope, tagsOf(req));
  const scope = await scopeOf(ports, { containerTags: tags, filters: req.filters, docId: req.docId, filepath: req.filepath, tagScope });
  const hits = await retrieve(ports, req.q, scope, candidateDepth(req.limit), req.rerank);

  // Hits come best first, so a document's first hit is its best and the map's order is the ranking.
  const groups = new Map<string, SearchHit[]>();
  for (const h of hits) {
    if (normaliseScore(h.score) < req.chunkThreshold) continue;
    const g = groups.get(h.documentId);
    if (g) g.push(h);
    else groups.set(h.documentId, [h]);
  }
  // A few spare documents, in case some were deleted or moved since the index was read.
  const wanted = [...groups.keys()].slice(0, req.limit + 10);
  const views = await viewsOf(ports, wanted, tags);

  const results: V3SearchResult[] = [];
  for (const documentId of wanted) {
    if (results.length >= req.limit) break;
    const view = views.get(documentId);
    if (!view) continue;
    const matched = groups.get(documentId)!;
    const chunks = req.onlyMatchingChunks ? matchingChunks(matched) : await withContext(ports, documentId, matched);
    results.push({
      documentId,
      title: view.title,
      type: view.type,
      score: normaliseScore(matched[0]!.score),
      chunks,
      metadata: view.metadata,
      createdAt: view.createdAt,
      updatedAt: view.updatedAt,
      // memstream has no summariser: a summary is sent only when asked for, and is the view's (null today).
      summary: req.includeSummary ? view.summary : null,
      ...(req.includeFullDocs ? { content: view.content } : {}),
    });
  }
  return { results, timing: Math.round(clock() - started), total: results.length };
}

/** The matching chunks of one document, best first (hits arrive best first from the index). */
function matchingChunks(matched: SearchHit[]): V3SearchChunk[] {
  return matched.map((h) => ({ content: h.text, isRelevant: true, score: normaliseScore(h.score) }));
}

/**
 * The matching chunks, best first, then the chunk before and after each of them that did not
 * match, in document order, as context for an LLM (isRelevant false, score 0). This reads the
 * document's chunks from the index, so it costs one read per result document.
 */
async function withContext(ports: SearchPorts, documentId: string, matched: SearchHit[]): Promise<V3SearchChunk[]> {
  const all = await ports.index.getDocumentChunks(documentId);
  const matchedIdx = new Set(matched.map((h) => h.index));
  const positions = new Map(all.map((c, i) => [c.index, i]));
  const context = new Set<number>();
  for (const h of matched) {
    const at = positions.get(h.index);
    // The document was re-indexed between the search and this read: keep the match as it was found.
    if (at === undefined) continue;
    for (const i of [at - 1, at + 1]) if (i >= 0 && i < all.length && !matchedIdx.has(all[i]!.index)) context.add(i);
  }
  const neighbours = [...context].sort((a, b) => a - b).map((i) => ({ content: all[i]!.text, isRelevant: false, score: 0 }));
  return [...matchingChunks(matched), ...neighbours];
}

/**
 * POST /v4/search.
 *
 * `searchMode: memories` (the default) searches the memory store (memory hits, `memory` field);
 * `documents` searches chunks (chunk hits, `chunk` field, id `<documentId>:<index>`); `hybrid`
 * does both and merges them (see mergeHybrid). Without a memory store (tests of the chunk path
 * only) every mode searches chunks and the mode picks the field, as before memories existed.
 * `similarity` is the hybrid score (0..1, comparable across queries); `threshold` drops
 * hits below it.
 * `rerank: true` re-scores chunk hits with the configured reranker (a no-op without one);
 * `rewriteQuery` and `aggregate` are accepted but change nothing: no model for them is configured.
 */
export async function searchMemories(ports: SearchPorts, body: unknown, tagScope: TagScope = null, memories?: MemoryPorts): Promise<V4SearchResponse> {
  const clock = ports.clock ?? (() => performance.now());
  const started = clock();
  const req = V4SearchRequest.parse(body);
  const tags = readTags(tagScope, req.containerTag !== undefined ? [req.containerTag] : undefined, 'containerTag');
  if (memories && req.searchMode !== 'documents') {
    const include = req.include ?? {};
    const memoryHits = await searchMemoryHits(memories, { tags, text: req.q, filter: req.filters, limit: req.limit, threshold: req.threshold, include });
    if (req.searchMode === 'memories') return { results: memoryHits, timing: Math.round(clock() - started), total: memoryHits.length };
    const chunkHits = await searchChunks(ports, req, tags, 'chunk');
    const results = mergeHybrid(memoryHits, chunkHits, req.limit);
    return { results, timing: Math.round(clock() - started), total: results.length };
  }
  const results = await searchChunks(ports, req, tags, memories ? 'chunk' : req.searchMode === 'documents' ? 'chunk' : req.searchMode === 'memories' ? 'memory' : 'both');
  return { results, timing: Math.round(clock() - started), total: results.length };
}

/**
 * Hybrid: memory and chunk hits in one list, best first, where neither kind crowds the other
 * out: each kind is guaranteed up to half the slots (when it has that many hits), and the slots
 * left go to the best remaining hits of either kind.
 */
export function mergeHybrid(memories: V4SearchResult[], chunks: V4SearchResult[], limit: number): V4SearchResult[] {
  const m = Math.min(memories.length, Math.ceil(limit / 2));
  const c = Math.min(chunks.length, limit - m);
  const taken = [...memories.slice(0, m), ...chunks.slice(0, c)];
  const rest = [...memories.slice(m), ...chunks.slice(c)].sort((a, b) => b.similarity - a.similarity);
  return [...taken, ...rest.slice(0, Math.max(0, limit - taken.length))].sort((a, b) => b.similarity - a.similarity);
}

/** Chunk hits for /v4/search; `field` says which field carries the text. */
async function searchChunks(ports: SearchPorts, req: V4SearchRequest, tags: string[] | undefined, field: 'memory' | 'chunk' | 'both'): Promise<V4SearchResult[]> {
  const scope = await scopeOf(ports, { containerTags: tags, filters: req.filters, filepath: req.filepath });
  // A few spare hits, in case some documents were deleted or moved since the index was read.
  const hits = (await retrieve(ports, req.q, scope, req.limit + 10, req.rerank)).filter((h) => normaliseScore(h.score) >= req.threshold);
  const views = await viewsOf(ports, hits.map((h) => h.documentId), tags);
  const include = req.include ?? {};

  const results: V4SearchResult[] = [];
  for (const h of hits) {
    if (results.length >= req.limit) break;
    const view = views.get(h.documentId);
    if (!view) continue;
    const similarity = normaliseScore(h.score);
    results.push({
      id: `${h.documentId}:${h.index}`,
      ...(field !== 'chunk' ? { memory: h.text } : {}),
      ...(field !== 'memory' ? { chunk: h.text } : {}),
      similarity,
      metadata: view.metadata,
      updatedAt: view.updatedAt,
      filepath: view.filepath,
      documents: [
        {
          id: view.id,
          createdAt: view.createdAt,
          updatedAt: view.updatedAt,
          ...(view.title !== null ? { title: view.title } : {}),
          type: view.type,
          metadata: view.metadata,
          ...(include.summaries ? { summary: view.summary } : {}),
        },
      ],
      ...(include.chunks ? { chunks: [{ content: h.text, documentId: h.documentId, position: h.index, score: similarity }] } : {}),
      // A chunk has no versions or links: asked for, its context is empty.
      ...(include.relatedMemories ? { context: { parents: [], children: [], related: [] } } : {}),
    });
  }
  return results;
}
