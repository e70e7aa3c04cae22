import type { Metadata } from '@memstream/contracts';
import type { SearchHit, SearchQuery } from './port.js';

import { MAX_QUERY_TERMS, queryTerms, tokenize } from './analyse.js';

export { MAX_QUERY_TERMS, queryTerms, tokenize };

/**
 * The reciprocal-rank-fusion constant. Chunk search no longer uses RRF (see Fusion); kept for the
 * memory store, which fuses its own two lists that way.
 */
export const RRF_K = 60;

/** How many candidates each side of a hybrid search contributes before fusion. */
export function hybridDepth(limit: number): number {
  return Math.max(limit * 4, 50);
}

/**
 * How hybrid search weighs its two lists. Each list's score is first put on an absolute 0..1
 * scale (keyword: BM25 over the query's best possible BM25, see the adapters; dense: cosine
 * rescaled from `denseFloor` — the cosine an unrelated text typically gets from the model — to
 * 1), then fused as (1 − denseWeight)·keyword + denseWeight·dense. Absolute scales rather than
 * per-query min-max keep the fused score comparable across queries, so a threshold means the
 * same thing for every query, and a query with nothing related scores near 0.
 */
export interface Fusion {
  denseWeight: number;
  denseFloor: number;
}

/**
 * The default weights, chosen on the manual-page set and checked on the generated conversations
 * (docs/search.md has the sweep). Dense is the minor partner: the offline models are far weaker
 * than BM25 alone and help as a tie-breaker and for chunks keyword search cannot find at all.
 * The floor is above the cosine unrelated texts get from both offline models (≤ 0.3 measured),
 * so an unrelated chunk's dense part is exactly 0.
 */
export const DEFAULT_FUSION: Fusion = { denseWeight: 0.1, denseFloor: 0.3 };

/** A cosine on the fusion's 0..1 dense scale: `floor` and below is 0, 1 stays 1. */
export function denseScale(cosine: number, floor: number): number {
  if (!(cosine > floor)) return 0;
  return Math.min(1, (cosine - floor) / (1 - floor));
}

/**
 * Fuse keyword scores (already 0..1) and cosines by id: a candidate missing from one list
 * scores 0 there (the adapters fill in the cosine of keyword candidates when they can). Best
 * first; ties by id.
 */
export function fuseScores<K extends number | string>(
  keyword: Map<K, number>,
  cosines: Map<K, number>,
  fusion: Fusion,
  limit: number,
): { id: K; score: number }[] {
  const ids = new Set([...keyword.keys(), ...cosines.keys()]);
  const out: { id: K; score: number }[] = [];
  for (const id of ids) {
    const k = keyword.get(id) ?? 0;
    const c = cosines.get(id);
    const d = c === undefined ? 0 : denseScale(c, fusion.denseFloor);
    out.push({ id, score: (1 - fusion.denseWeight) * k + fusion.denseWeight * d });
  }
  return out.sort((a, b) => b.score - a.score || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)).slice(0, Math.max(0, limit));
}

/**
 * A raw keyword score (BM25 in SQLite, sparse dot product in Qdrant; both > 0, larger is better)
 * mapped into (0, 1): x / (1 + x). It is monotone and needs no knowledge of the other hits, so a
 * hit's score does not change with the limit or with which other chunks matched.
 */
export function normaliseKeywordScore(raw: number): number {
  return raw > 0 ? raw / (1 + raw) : 0;
}

/**
 * The filterable facets of one metadata value, computed in JS with exactly the conversions
 * `matchesFilter` uses (`String(v)` for equality, `Number(v)` for numeric strings), so an adapter
 * that compares against these facets reproduces the reference semantics without re-implementing
 * JS number formatting or parsing in SQL or in Qdrant.
 */
export interface MetaFacet {
  key: string;
  kind: 'string' | 'number' | 'boolean' | 'array' | 'other';
  /** `String(v)` for a scalar, `String(x)` of every element for an array. */
  values: string[];
  /** The number a `numeric` condition compares: the value itself or a numeric string's Number(); null when NaN. */
  num: number | null;
}

/** The facets of every non-null key of a metadata record (null/undefined values never match). */
export function metadataFacets(metadata: Metadata | Record<string, unknown>): MetaFacet[] {
  const out: MetaFacet[] = [];
  for (const [key, v] of Object.entries(metadata)) {
    if (v === undefined || v === null) continue;
    if (Array.isArray(v)) {
      out.push({ key, kind: 'array', values: v.map((x) => String(x)), num: null });
    } else if (typeof v === 'string') {
      const n = v.trim() !== '' ? Number(v) : Number.NaN;
      out.push({ key, kind: 'string', values: [v], num: Number.isNaN(n) ? null : n });
    } else if (typeof v === 'number') {
      out.push({ key, kind: 'number', values: [String(v)], num: Number.isNaN(v) ? null : v });
    } else if (typeof v === 'boolean') {
      out.push({ key, kind: 'boolean', values: [String(v)], num: null });
    } else {
      out.push({ key, kind: 'other', values: [String(v)], num: null });
    }
  }
  return out;
}

/** A fixed-capacity min-heap keeping the `k` largest scores seen (ids are numbers, e.g. rowids). */
export class TopK {
  private readonly scores: Float64Array;
  private readonly ids: Float64Array;
  private size = 0;

  constructor(private readonly k: number) {
    this.scores = new Float64Array(Math.max(k, 1));
    this.ids = new Float64Array(Math.max(k, 1));
  }

  /** The smallest score that would still enter the heap (−∞ while it is not full). */
  get threshold(): number {
    return this.size < this.k ? Number.NEGATIVE_INFINITY : (this.scores[0] ?? Number.NEGATIVE_INFINITY);
  }

  push(score: number, id: number): void {
    if (this.k <= 0) return;
    if (this.size < this.k) {
      let i = this.size++;
      // Sift up.
      while (i > 0) {
        const p = (i - 1) >> 1;
        if (!this.less(score, id, this.scores[p]!, this.ids[p]!)) break;
        this.scores[i] = this.scores[p]!;
        this.ids[i] = this.ids[p]!;
        i = p;
      }
      this.scores[i] = score;
      this.ids[i] = id;
      return;
    }
    if (!this.less(this.scores[0]!, this.ids[0]!, score, id)) return;
    // Replace the root and sift down.
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= this.size) break;
      const r = l + 1;
      let c = l;
      if (r < this.size && this.less(this.scores[r]!, this.ids[r]!, this.scores[l]!, this.ids[l]!)) c = r;
      if (!this.less(this.scores[c]!, this.ids[c]!, score, id)) break;
      this.scores[i] = this.scores[c]!;
      this.ids[i] = this.ids[c]!;
      i = c;
    }
    this.scores[i] = score;
    this.ids[i] = id;
  }

  /** Entries best first: higher score, then (for a deterministic order among ties) lower id. */
  sorted(): { id: number; score: number }[] {
    const out: { id: number; score: number }[] = [];
    for (let i = 0; i < this.size; i++) out.push({ id: this.ids[i]!, score: this.scores[i]! });
    return out.sort((a, b) => b.score - a.score || a.id - b.id);
  }

  /** Heap order: a is "worse" than b when its score is lower, or equal with a higher id. */
  private less(sa: number, ia: number, sb: number, ib: number): boolean {
    return sa < sb || (sa === sb && ia > ib);
  }
}

/**
 * Dot product of `q` with the `q.length` floats of `data` starting at `base`, accumulated in
 * float64. A plain module-level function with four accumulators: V8 inlines it into the scan
 * loop, which runs about twice as fast as a closure over the same arithmetic.
 */
export function dotAt(data: Float32Array, base: number, q: Float32Array): number {
  const n = q.length;
  let s0 = 0;
  let s1 = 0;
  let s2 = 0;
  let s3 = 0;
  let i = 0;
  for (; i + 3 < n; i += 4) {
    s0 += q[i]! * data[base + i]!;
    s1 += q[i + 1]! * data[base + i + 1]!;
    s2 += q[i + 2]! * data[base + i + 2]!;
    s3 += q[i + 3]! * data[base + i + 3]!;
  }
  for (; i < n; i++) s0 += q[i]! * data[base + i]!;
  return s0 + s1 + s2 + s3;
}

/**
 * fuseScores over two ranked hit lists of the same search (keyword hits scored 0..1, dense hits
 * scored by cosine), for adapters that get hits rather than row ids back from their store.
 */
export function fuseHitLists(keyword: SearchHit[], dense: SearchHit[], fusion: Fusion, limit: number): SearchHit[] {
  const byKey = new Map<string, SearchHit>();
  const k = new Map<string, number>();
  const d = new Map<string, number>();
  for (const h of keyword) {
    const key = chunkKey(h.documentId, h.index);
    byKey.set(key, h);
    k.set(key, h.score);
  }
  for (const h of dense) {
    const key = chunkKey(h.documentId, h.index);
    if (!byKey.has(key)) byKey.set(key, h);
    d.set(key, h.score);
  }
  return fuseScores(k, d, fusion, Number.POSITIVE_INFINITY)
    .map(({ id, score }) => ({ ...byKey.get(id)!, score }))
    .sort(compareHits)
    .slice(0, Math.max(0, limit));
}

/** Best first: higher score, then document id, then chunk index. */
export function compareHits(a: SearchHit, b: SearchHit): number {
  return b.score - a.score || (a.documentId < b.documentId ? -1 : a.documentId > b.documentId ? 1 : 0) || a.index - b.index;
}

/** A map key for one chunk. */
export function chunkKey(documentId: string, index: number): string {
  return `${index}\u0000${documentId}`;
}

/** What every adapter checks before searching; throws on a query the port calls malformed. */
export function validateQuery(q: SearchQuery): void {
  if (q.mode !== 'dense' && q.mode !== 'keyword' && q.mode !== 'hybrid') {
    throw new Error(`unknown search mode: ${String(q.mode)}`);
  }
  if (q.mode !== 'keyword') {
    // A vector without its model could be scored against another model's vectors of the same
    // dimension, which yields meaningless similarities: refuse rather than guess.
    if (!(q.vector instanceof Float32Array) || q.vector.length === 0) throw new Error(`${q.mode} search needs a vector`);
    if (!q.model) throw new Error(`${q.mode} search needs the model that made the vector`);
  }
  if (q.mode !== 'dense' && typeof q.text !== 'string') throw new Error(`${q.mode} search needs text`);
  if (!Number.isFinite(q.limit)) throw new Error('search limit must be a finite number');
}

/** Checks a document before it is written: vectors match `dim`, chunk indexes are unique. */
export function validateReplace(input: {
  documentId: string;
  revision: number;
  model: string;
  dim: number;
  chunks: { index: number; vector: Float32Array }[];
}): void {
  if (!input.documentId) throw new Error('documentId must not be empty');
  if (!Number.isFinite(input.revision)) throw new Error('revision must be a finite number');
  if (!input.model) throw new Error('model must not be empty');
  if (!Number.isInteger(input.dim) || input.dim <= 0) throw new Error(`dim must be a positive integer, got ${input.dim}`);
  const seen = new Set<number>();
  for (const c of input.chunks) {
    if (!Number.isInteger(c.index) || c.index < 0) throw new Error(`chunk index must be a non-negative integer, got ${c.index}`);
    if (seen.has(c.index)) throw new Error(`duplicate chunk index ${c.index} in document ${input.documentId}`);
    seen.add(c.index);
    if (c.vector.length !== input.dim) {
      throw new Error(`chunk ${c.index} of ${input.documentId} has ${c.vector.length} dimensions, expected ${input.dim}`);
    }
  }
}
