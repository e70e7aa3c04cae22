import { describe, expect, it } from 'vitest';
import { Filters, matchesFilter } from '@memstream/contracts';
import type { FilterExpr, FilterInput, Metadata } from '@memstream/contracts';
import type { Schemas } from '@qdrant/js-client-rest';
import {
  BM25_AVG_LEN,
  BM25_B,
  BM25_K1,
  buildSearchFilter,
  chunkCollectionName,
  chunkPointId,
  documentPointId,
  documentsCollectionName,
  fieldKey,
  filterPayload,
  isChunkCollection,
  modelSlug,
  sparseDocumentVector,
  sparseQueryVector,
  termId,
  translateFilter,
} from './qdrant-translate.js';
// The fake's evaluator models how Qdrant applies the filter subset the translator emits.
import { qdrantConditionMatches } from './qdrant-fake.js';

function evaluate(metadata: Metadata, e: FilterExpr): { matches: boolean; exact: boolean } {
  const t = translateFilter(e);
  const payload = filterPayload(metadata) as unknown as Record<string, unknown>;
  if (t.kind === 'all') return { matches: true, exact: t.exact };
  if (t.kind === 'none') return { matches: false, exact: t.exact };
  return { matches: qdrantConditionMatches(payload, t.cond), exact: t.exact };
}

const f = (input: FilterInput): FilterExpr => Filters.parse(input);

describe('translateFilter', () => {
  const k = fieldKey('color');

  it('translates equality, ignoreCase and negation', () => {
    expect(translateFilter(f({ AND: [{ key: 'color', value: 'Red' }] }))).toEqual({
      kind: 'cond',
      cond: { key: `fs.${k}`, match: { value: 'Red' } },
      exact: true,
    });
    expect(translateFilter(f({ AND: [{ key: 'color', value: 'Red', ignoreCase: true }] }))).toEqual({
      kind: 'cond',
      cond: { key: `fl.${k}`, match: { value: 'red' } },
      exact: true,
    });
    expect(translateFilter(f({ AND: [{ key: 'color', value: 'Red', negate: true }] }))).toEqual({
      kind: 'cond',
      cond: { must_not: [{ key: `fs.${k}`, match: { value: 'Red' } }] },
      exact: true,
    });
  });

  it('translates numeric operators into ranges, and = into a closed range', () => {
    const n = fieldKey('n');
    const cases: [string, Schemas['Range']][] = [
      ['>', { gt: 5 }],
      ['<', { lt: 5 }],
      ['>=', { gte: 5 }],
      ['<=', { lte: 5 }],
      ['=', { gte: 5, lte: 5 }],
    ];
    for (const [op, range] of cases) {
      const t = translateFilter(f({ AND: [{ key: 'n', value: '5', filterType: 'numeric', numericOperator: op as '>' }] }));
      expect(t).toEqual({ kind: 'cond', cond: { key: `fn.${n}`, range }, exact: true });
    }
    // A non-numeric target matches nothing; negated, everything.
    expect(translateFilter(f({ AND: [{ key: 'n', value: 'abc', filterType: 'numeric' }] }))).toEqual({ kind: 'none', exact: true });
    expect(translateFilter(f({ AND: [{ key: 'n', value: 'abc', filterType: 'numeric', negate: true }] }))).toEqual({ kind: 'all', exact: true });
    // An infinite target cannot be sent as JSON: relaxed and post-filtered.
    expect(translateFilter(f({ AND: [{ key: 'n', value: 'Infinity', filterType: 'numeric' }] }))).toEqual({ kind: 'all', exact: false });
  });

  it('requires an array for array_contains', () => {
    const t = translateFilter(f({ AND: [{ key: 'tags', value: 'x', filterType: 'array_contains' }] }));
    expect(t).toEqual({
      kind: 'cond',
      cond: { must: [{ key: `fa.${fieldKey('tags')}`, match: { value: true } }, { key: `fs.${fieldKey('tags')}`, match: { value: 'x' } }] },
      exact: true,
    });
  });

  it('relaxes string_contains (negated or not) and marks the whole filter inexact', () => {
    expect(translateFilter(f({ AND: [{ key: 'title', value: 'wor', filterType: 'string_contains' }] }))).toEqual({ kind: 'all', exact: false });
    expect(translateFilter(f({ AND: [{ key: 'title', value: 'wor', filterType: 'string_contains', negate: true }] }))).toEqual({
      kind: 'all',
      exact: false,
    });
    const mixed = translateFilter(
      f({ AND: [{ key: 'color', value: 'red' }, { key: 'title', value: 'wor', filterType: 'string_contains' }] }),
    );
    expect(mixed).toEqual({ kind: 'cond', cond: { key: `fs.${k}`, match: { value: 'red' } }, exact: false });
    // OR with a relaxed branch cannot restrict at all.
    const or = translateFilter(f({ OR: [{ key: 'color', value: 'red' }, { key: 'title', value: 'wor', filterType: 'string_contains' }] }));
    expect(or).toEqual({ kind: 'all', exact: false });
  });

  it('nests and/or as must/should, and folds empty groups', () => {
    const t = translateFilter(
      f({ OR: [{ AND: [{ key: 'a', value: '1' }, { key: 'b', value: '2' }] }, { key: 'c', value: '3', negate: true }] }),
    );
    expect(t).toEqual({
      kind: 'cond',
      cond: {
        should: [
          { must: [{ key: `fs.${fieldKey('a')}`, match: { value: '1' } }, { key: `fs.${fieldKey('b')}`, match: { value: '2' } }] },
          { must_not: [{ key: `fs.${fieldKey('c')}`, match: { value: '3' } }] },
        ],
      },
      exact: true,
    });
    expect(translateFilter(f({ OR: [] }))).toEqual({ kind: 'none', exact: true });
    expect(translateFilter(f({ AND: [] }))).toEqual({ kind: 'all', exact: true });
    expect(translateFilter(f({ AND: [{ OR: [] }, { key: 'a', value: '1' }] })).kind).toBe('none');
  });

  it('agrees with matchesFilter on random metadata and filters (exact translations are equal, relaxed ones supersets)', () => {
    let seed = 12345;
    const rand = () => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return seed / 4294967296;
    };
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
    const keys = ['a', 'b', 'c.d', 'e"f'];
    const strings = ['x', 'X', 'xy', '10', ' 10 ', '1e1', '0x10', '', 'true', 'false', 'Ünï', 'ünï', '-3.5', 'abc'];
    const value = (): Metadata[string] =>
      pick([
        () => pick(strings),
        () => pick([0, 10, -3.5, 16, 1e21, 0.1 + 0.2]),
        () => rand() < 0.5,
        () => Array.from({ length: Math.floor(rand() * 3) }, () => pick(strings)),
      ])();
    const metadata = (): Metadata => {
      const m: Metadata = {};
      for (const key of keys) if (rand() < 0.7) m[key] = value();
      return m;
    };
    const cond = (): Record<string, unknown> => ({
      key: pick(keys),
      value: pick<string | number | boolean>([...strings, 10, 16, -3.5, true, 1e21, '1e999']),
      filterType: pick(['metadata', 'numeric', 'array_contains', 'string_contains'] as const),
      ignoreCase: rand() < 0.3,
      negate: rand() < 0.3,
      numericOperator: pick(['>', '<', '>=', '<=', '='] as const),
    });
    const node = (depth: number): unknown => {
      if (depth === 0 || rand() < 0.5) return cond();
      const items = Array.from({ length: Math.floor(rand() * 4) }, () => node(depth - 1));
      return rand() < 0.5 ? { AND: items } : { OR: items };
    };
    const docs = Array.from({ length: 40 }, metadata);
    let exactChecks = 0;
    for (let i = 0; i < 400; i++) {
      const filter = f({ [rand() < 0.5 ? 'AND' : 'OR']: Array.from({ length: 1 + Math.floor(rand() * 3) }, () => node(2)) } as FilterInput);
      for (const m of docs) {
        const want = matchesFilter(m, filter);
        const got = evaluate(m, filter);
        if (got.exact) {
          exactChecks++;
          expect(got.matches, JSON.stringify({ m, filter })).toBe(want);
        } else if (want) {
          expect(got.matches, JSON.stringify({ m, filter })).toBe(true);
        }
      }
    }
    expect(exactChecks).toBeGreaterThan(4000);
  });
});

describe('buildSearchFilter', () => {
  it('combines tags (any-of), document ids and the metadata filter under must', () => {
    const built = buildSearchFilter({
      containerTags: ['t1', 't2'],
      documentIds: ['d1'],
      filter: f({ AND: [{ key: 'color', value: 'red' }] }),
    });
    expect(built).toEqual({
      filter: {
        must: [
          { key: 'containerTags', match: { any: ['t1', 't2'] } },
          { key: 'documentId', match: { any: ['d1'] } },
          { key: `fs.${fieldKey('color')}`, match: { value: 'red' } },
        ],
      },
      exact: true,
      none: false,
    });
    expect(buildSearchFilter({})).toEqual({ filter: undefined, exact: true, none: false });
  });

  it('reports empty tag or id lists, and impossible filters, as matching nothing', () => {
    expect(buildSearchFilter({ containerTags: [] }).none).toBe(true);
    expect(buildSearchFilter({ documentIds: [] }).none).toBe(true);
    expect(buildSearchFilter({ containerTags: ['t'], filter: f({ OR: [] }) }).none).toBe(true);
  });
});

describe('filterPayload', () => {
  it('precomputes the JS string, lower-case, array flag and number of each value', () => {
    const p = filterPayload({ s: 'Hello', n: 0.1 + 0.2, ns: ' 0x10 ', b: true, arr: ['A', 'b'], blank: '', big: '1e999' });
    expect(p.fs[fieldKey('n')]).toEqual(['0.30000000000000004']);
    expect(p.fl[fieldKey('s')]).toEqual(['hello']);
    expect(p.fs[fieldKey('b')]).toEqual(['true']);
    expect(p.fa).toEqual({ [fieldKey('arr')]: true });
    expect(p.fn).toEqual({
      [fieldKey('n')]: 0.1 + 0.2,
      [fieldKey('ns')]: 16,
      [fieldKey('big')]: Number.MAX_VALUE,
    });
    expect(JSON.parse(JSON.stringify(p))).toEqual(p);
  });

  it('hex-encodes keys so dots and quotes are not read as paths', () => {
    expect(fieldKey('a.b"c')).toBe('k_612e622263');
    expect(fieldKey('é')).toBe('k_c3a9');
  });
});

describe('ids and names', () => {
  it('derives deterministic UUIDs from (documentId, index, hash)', () => {
    const id = chunkPointId('doc', 3, 'abc');
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(chunkPointId('doc', 3, 'abc')).toBe(id);
    expect(chunkPointId('doc', 3, 'abd')).not.toBe(id);
    expect(chunkPointId('doc', 4, 'abc')).not.toBe(id);
    expect(chunkPointId('doc:3', 3, 'abc')).not.toBe(id);
    expect(documentPointId('doc')).not.toBe(id);
    expect(documentPointId('doc')).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('names one collection per (model, dim), and recognises only its own prefix', () => {
    const name = chunkCollectionName('ms', 'BAAI/bge-small-en-v1.5', 384);
    expect(name).toMatch(/^ms_baai-bge-small-en-v1-5-[0-9a-f]{8}_384$/);
    expect(chunkCollectionName('ms', 'A/b', 8)).not.toBe(chunkCollectionName('ms', 'a-b', 8));
    expect(modelSlug('')).toMatch(/^model-[0-9a-f]{8}$/);
    expect(isChunkCollection('ms', name)).toBe(true);
    expect(isChunkCollection('ms', name, 'BAAI/bge-small-en-v1.5')).toBe(true);
    expect(isChunkCollection('ms', name, 'other')).toBe(false);
    expect(isChunkCollection('ms', documentsCollectionName('ms'))).toBe(false);
    expect(isChunkCollection('ms', `ms_x_${name.slice(3)}`)).toBe(false);
    expect(isChunkCollection('m', name)).toBe(false);
  });
});

describe('sparse vectors', () => {
  it('hashes terms with FNV-1a 32', () => {
    expect(termId('a')).toBe(0xe40c292c);
    expect(termId('foobar')).toBe(0xbf9cf968);
  });

  it('weights document terms by BM25 term frequency, with unique sorted indices', () => {
    const v = sparseDocumentVector('The cat saw the other CAT, the end.');
    // Words: the ×3, cat ×2, saw, other, end → 5 dimensions, 8 words.
    expect(v.indices).toHaveLength(5);
    expect([...v.indices].sort((a, b) => a - b)).toEqual(v.indices);
    const norm = BM25_K1 * (1 - BM25_B + (BM25_B * 8) / BM25_AVG_LEN);
    const w = (tf: number) => (tf * (BM25_K1 + 1)) / (tf + norm);
    const weight = (term: string) => v.values[v.indices.indexOf(termId(term))];
    expect(weight('the')).toBeCloseTo(w(3), 12);
    expect(weight('cat')).toBeCloseTo(w(2), 12);
    expect(weight('end')).toBeCloseTo(w(1), 12);
  });

  it('builds queries of distinct words with weight 1, and nothing from hostile text', () => {
    const q = sparseQueryVector('NEAR(cat "cat" AND dog*');
    // "and" is a stop word: dropped from queries, as in the SQLite index (shared queryTerms).
    expect(q.indices).toEqual([termId('near'), termId('cat'), termId('dog')].sort((a, b) => a - b));
    expect(q.values).toEqual([1, 1, 1]);
    for (const text of ['', '   ', '"', '*', '()', '😀']) expect(sparseQueryVector(text)).toEqual({ indices: [], values: [] });
    expect(sparseDocumentVector('')).toEqual({ indices: [], values: [] });
  });
});
