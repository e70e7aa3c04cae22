import { createHash } from 'node:crypto';
import type { Schemas } from '@qdrant/js-client-rest';
import type { FilterCondition, FilterExpr, Metadata } from '@memstream/contracts';
import { documentTerms } from './analyse.js';
import { metadataFacets, queryTerms } from './shared.js';

/*
 * Pure translations from the port's shapes into Qdrant's: no I/O, so they are unit-tested without
 * a server (see qdrant-translate.unit.test.ts).
 */

type QCondition = Schemas['Condition'];
type QFilter = Schemas['Filter'];

/** Name of the dense vector in every chunk collection. */
export const DENSE_VECTOR = 'dense';
/** Name of the sparse keyword vector in every chunk collection. */
export const SPARSE_VECTOR = 'keywords';

/** BM25 parameters of the client-side term weights (Qdrant's `idf` modifier supplies the IDF). */
export const BM25_K1 = 1.2;
export const BM25_B = 0.75;
/**
 * The average chunk length, in words, that BM25's length normalisation assumes. The true average
 * is not known client-side (it would need collection statistics at write time); chunks are cut to
 * a bounded size, so a constant of that order keeps the normalisation meaningful.
 */
export const BM25_AVG_LEN = 128;

function sha256(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}

/** Format 16 bytes of a digest as an RFC 4122 UUID (version 5 / variant bits set, like a name-based UUID). */
function uuidFrom(digest: Buffer): string {
  const b = Buffer.from(digest.subarray(0, 16));
  b[6] = (b[6]! & 0x0f) | 0x50;
  b[8] = (b[8]! & 0x3f) | 0x80;
  const h = b.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`;
}

/**
 * The point id of a chunk: a UUID from sha256(`${documentId}:${index}:${hash}`). An unchanged
 * chunk keeps its id across revisions, so a replace can tell kept chunks from new ones by id alone.
 */
export function chunkPointId(documentId: string, index: number, hash: string): string {
  return uuidFrom(sha256(`${documentId}:${index}:${hash}`));
}

/** The point id of a document's record in the documents collection. */
export function documentPointId(documentId: string): string {
  return uuidFrom(sha256(`document:${documentId}`));
}

/**
 * A collection-name-safe slug of a model name. A short hash of the exact name is appended, so two
 * models whose names slug alike ('A/b' and 'a-b') still get different collections.
 */
export function modelSlug(model: string): string {
  const base = model
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 40);
  return `${base || 'model'}-${sha256(model).toString('hex').slice(0, 8)}`;
}

/** The collection holding the chunks of one (model, dim): `${prefix}_${slug(model)}_${dim}`. */
export function chunkCollectionName(prefix: string, model: string, dim: number): string {
  return `${prefix}_${modelSlug(model)}_${dim}`;
}

/** The collection holding one record per document (revision, model, tags, metadata). */
export function documentsCollectionName(prefix: string): string {
  return `${prefix}_documents`;
}

/** Whether `name` is a chunk collection of `prefix` (optionally: of one model). */
export function isChunkCollection(prefix: string, name: string, model?: string): boolean {
  if (!name.startsWith(`${prefix}_`)) return false;
  // Slugs contain no underscore, so a longer prefix sharing ours ('p_x_…') never matches.
  const rest = name.slice(prefix.length + 1);
  const m = /^([a-z0-9-]+)_(\d+)$/.exec(rest);
  if (!m) return false;
  return model === undefined || m[1] === modelSlug(model);
}

/**
 * The payload field name for a metadata key: `k_` + hex of its UTF-8 bytes. User keys may hold
 * dots, brackets or quotes, which Qdrant's key paths would interpret; hex keeps them inert.
 */
export function fieldKey(key: string): string {
  return `k_${Buffer.from(key, 'utf8').toString('hex')}`;
}

/**
 * The filterable view of metadata stored with every point, precomputed with the same JS
 * conversions `matchesFilter` uses, so Qdrant's exact-match and range conditions reproduce it:
 * - `fs[k]`: `String(v)` of a scalar, or of every element of an array (equality, array_contains);
 * - `fl[k]`: the same, lower-cased (ignoreCase);
 * - `fa[k]`: true when the value is an array (array_contains must not match scalars);
 * - `fn[k]`: the number a numeric condition compares (a number, or a numeric string's Number()).
 *   ±Infinity (from strings like '1e999') is stored as ±Number.MAX_VALUE, since JSON has no
 *   infinities; conditions whose target could tell the two apart are post-filtered instead.
 */
export function filterPayload(metadata: Metadata): {
  fs: Record<string, string[]>;
  fl: Record<string, string[]>;
  fa: Record<string, boolean>;
  fn: Record<string, number>;
} {
  const fs: Record<string, string[]> = {};
  const fl: Record<string, string[]> = {};
  const fa: Record<string, boolean> = {};
  const fn: Record<string, number> = {};
  for (const f of metadataFacets(metadata)) {
    const k = fieldKey(f.key);
    fs[k] = f.values;
    fl[k] = f.values.map((v) => v.toLowerCase());
    if (f.kind === 'array') fa[k] = true;
    if (f.num !== null) fn[k] = Math.max(-Number.MAX_VALUE, Math.min(Number.MAX_VALUE, f.num));
  }
  return { fs, fl, fa, fn };
}

/** The payload indexes the filter view of one metadata key needs. */
export function metadataIndexFields(key: string): { field: string; schema: Schemas['PayloadSchemaType'] }[] {
  const k = fieldKey(key);
  return [
    { field: `fs.${k}`, schema: 'keyword' },
    { field: `fl.${k}`, schema: 'keyword' },
    { field: `fa.${k}`, schema: 'bool' },
    { field: `fn.${k}`, schema: 'float' },
  ];
}

/**
 * A translated filter: `all` (no restriction), `none` (matches nothing) or a Qdrant condition.
 * `exact: false` means the translation is a superset of the reference semantics, and results
 * must be post-filtered with `matchesFilter` (over-fetching to still fill the limit).
 */
export type TranslatedFilter =
  | { kind: 'all'; exact: boolean }
  | { kind: 'none'; exact: boolean }
  | { kind: 'cond'; cond: QCondition; exact: boolean };

const ALL: TranslatedFilter = { kind: 'all', exact: true };
const NONE: TranslatedFilter = { kind: 'none', exact: true };
/** A condition Qdrant cannot express exactly: relaxed to "no restriction" (a superset). */
const RELAXED: TranslatedFilter = { kind: 'all', exact: false };

/** Translate a FilterExpr into a Qdrant condition with the semantics of `matchesFilter`. */
export function translateFilter(e: FilterExpr): TranslatedFilter {
  if (e.op === 'and') {
    const items = e.items.map(translateFilter);
    const exact = items.every((i) => i.exact);
    if (items.some((i) => i.kind === 'none')) return { kind: 'none', exact };
    const conds = items.flatMap((i) => (i.kind === 'cond' ? [i.cond] : []));
    if (conds.length === 0) return { kind: 'all', exact };
    return { kind: 'cond', cond: conds.length === 1 ? conds[0]! : { must: conds }, exact };
  }
  if (e.op === 'or') {
    const items = e.items.map(translateFilter);
    const exact = items.every((i) => i.exact);
    if (items.some((i) => i.kind === 'all')) return { kind: 'all', exact };
    const conds = items.flatMap((i) => (i.kind === 'cond' ? [i.cond] : []));
    // No items, or all of them impossible: the empty OR is false, as Array.some is.
    if (conds.length === 0) return { kind: 'none', exact };
    return { kind: 'cond', cond: conds.length === 1 ? conds[0]! : { should: conds }, exact };
  }
  const hit = translateCondition(e);
  if (!e.negate) return hit;
  // A relaxed hit stays relaxed when negated: "no restriction" is a superset of either.
  if (hit.kind === 'all') return hit.exact ? NONE : RELAXED;
  if (hit.kind === 'none') return ALL;
  // must_not also holds for points that lack the field: a negated condition matches a missing key.
  return { kind: 'cond', cond: { must_not: [hit.cond] }, exact: hit.exact };
}

function translateCondition(c: FilterCondition): TranslatedFilter {
  const k = fieldKey(c.key);
  const strField = `${c.ignoreCase ? 'fl' : 'fs'}.${k}`;
  const value = c.ignoreCase ? c.value.toLowerCase() : c.value;
  switch (c.filterType) {
    case 'metadata':
      return { kind: 'cond', cond: { key: strField, match: { value } }, exact: true };
    case 'array_contains':
      return {
        kind: 'cond',
        cond: { must: [{ key: `fa.${k}`, match: { value: true } }, { key: strField, match: { value } }] },
        exact: true,
      };
    case 'numeric': {
      const t = Number(c.value);
      if (Number.isNaN(t)) return NONE;
      // Stored infinities are clamped to ±MAX_VALUE; only a target at or beyond that bound could
      // compare differently, and JSON cannot carry an infinite target. Post-filter those.
      if (!(Math.abs(t) < Number.MAX_VALUE)) return RELAXED;
      const range: Schemas['Range'] =
        c.numericOperator === '>' ? { gt: t }
        : c.numericOperator === '<' ? { lt: t }
        : c.numericOperator === '>=' ? { gte: t }
        : c.numericOperator === '<=' ? { lte: t }
        : { gte: t, lte: t };
      return { kind: 'cond', cond: { key: `fn.${k}`, range }, exact: true };
    }
    case 'string_contains':
      // Qdrant's text match is token-based, not a substring test (and has no case option on
      // keyword fields): relax to "no restriction", over-fetch and post-filter with matchesFilter.
      return RELAXED;
  }
}

/** The combined Qdrant filter of a search: tags (any-of), document ids and the metadata filter. */
export function buildSearchFilter(q: {
  containerTags?: string[];
  documentIds?: string[];
  filter?: FilterExpr;
}): { filter: QFilter | undefined; exact: boolean; none: boolean } {
  const must: QCondition[] = [];
  if (q.containerTags) {
    if (q.containerTags.length === 0) return { filter: undefined, exact: true, none: true };
    must.push({ key: 'containerTags', match: { any: q.containerTags } });
  }
  if (q.documentIds) {
    if (q.documentIds.length === 0) return { filter: undefined, exact: true, none: true };
    must.push({ key: 'documentId', match: { any: q.documentIds } });
  }
  let exact = true;
  if (q.filter) {
    const t = translateFilter(q.filter);
    exact = t.exact;
    if (t.kind === 'none') return { filter: undefined, exact, none: true };
    if (t.kind === 'cond') must.push(t.cond);
  }
  return { filter: must.length ? { must } : undefined, exact, none: false };
}

/** FNV-1a 32-bit hash of a term's UTF-8 bytes: the sparse dimension of the term. */
export function termId(term: string): number {
  let h = 0x811c9dc5;
  for (const byte of Buffer.from(term, 'utf8')) {
    h ^= byte;
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h >>> 0;
}

/**
 * The sparse keyword vector of a chunk: one dimension per hashed word, weighted by BM25's term
 * frequency part, tf·(k1+1) / (tf + k1·(1 − b + b·len/avglen)). Qdrant multiplies in the IDF at
 * query time (`modifier: idf`), so dot(query, doc) is a BM25 score. Words whose hashes collide
 * share a dimension (their counts add up), as in any hashed vocabulary.
 */
export function sparseDocumentVector(text: string): Schemas['SparseVector'] {
  const words = documentTerms(text).terms;
  const tf = new Map<number, number>();
  for (const w of words) {
    const id = termId(w);
    tf.set(id, (tf.get(id) ?? 0) + 1);
  }
  const norm = BM25_K1 * (1 - BM25_B + (BM25_B * words.length) / BM25_AVG_LEN);
  const indices = [...tf.keys()].sort((a, b) => a - b);
  return { indices, values: indices.map((i) => { const f = tf.get(i)!; return (f * (BM25_K1 + 1)) / (f + norm); }) };
}

/** The sparse query vector of free text: weight 1 for each distinct word (capped like FTS queries). */
export function sparseQueryVector(text: string): Schemas['SparseVector'] {
  const indices = [...new Set(queryTerms(text).map(termId))].sort((a, b) => a - b);
  return { indices, values: indices.map(() => 1) };
}
