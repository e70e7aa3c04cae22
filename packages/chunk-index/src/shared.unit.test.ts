import { describe, expect, it } from 'vitest';
import type { SearchHit } from './port.js';
import { analyseQuery, documentTerms } from './analyse.js';
import { DEFAULT_FUSION, TopK, denseScale, dotAt, fuseHitLists, metadataFacets, normaliseKeywordScore, queryTerms, tokenize } from './shared.js';
import { toFtsQuery, toStemmedFtsQuery } from './sqlite.js';

const hit = (documentId: string, index = 0): SearchHit => ({ documentId, index, text: '', score: 0, containerTags: [], metadata: {} });

describe('keyword query text', () => {
  it('tokenises into lower-case words of letters, digits and marks', () => {
    expect(tokenize('Hello, WORLD! café 42x — 日本語 NEAR(a)')).toEqual(['hello', 'world', 'café', '42x', '日本語', 'near', 'a']);
    expect(queryTerms('x X b x')).toEqual(['x', 'b']);
    // Stop words are dropped, unless the query is nothing else; the rest are Porter2 stems.
    expect(queryTerms('number of the last errors')).toEqual(['number', 'last', 'error']);
    expect(queryTerms('to be or not to be')).toEqual(['to', 'be', 'or', 'not']);
    expect(queryTerms('what is this')).toEqual(['what', 'is', 'this']);
    expect(queryTerms(Array.from({ length: 100 }, (_, i) => `w${i}`).join(' '))).toHaveLength(32);
  });

  it('stems words and folds diacritics the same way in documents and queries', () => {
    expect(documentTerms('Listing the Directories’ contents, café').terms).toEqual(['list', 'the', 'directori', 'content', 'cafe']);
    expect(analyseQuery('list directory contents').terms).toEqual(['list', 'directori', 'content']);
  });

  it('pairs adjacent content words into bigrams, skipping stop words', () => {
    expect(documentTerms('list of the directory contents').bigrams).toEqual(['list_directori', 'directori_content']);
    expect(analyseQuery('list directory contents').bigrams).toEqual(['list_directori', 'directori_content']);
    expect(analyseQuery('directory').bigrams).toEqual([]);
  });

  it('builds FTS5 queries of quoted stems and bigrams joined by OR, or null without words', () => {
    expect(toStemmedFtsQuery('NEAR(foo "bar" AND baz*')).toBe('"near" OR "foo" OR "bar" OR "baz" OR "near_foo" OR "foo_bar" OR "bar_baz"');
    for (const text of ['', '   ', '"', '*', '()', '"""', ':^-+']) expect(toStemmedFtsQuery(text)).toBeNull();
    // For raw-text FTS5 tables (the memory store): words, unstemmed.
    expect(toFtsQuery('Listing the directories')).toBe('"listing" OR "directories"');
    for (const text of ['', '"', '()']) expect(toFtsQuery(text)).toBeNull();
  });

  it('normalises raw keyword scores into (0, 1), monotonically', () => {
    expect(normaliseKeywordScore(0)).toBe(0);
    expect(normaliseKeywordScore(1)).toBe(0.5);
    expect(normaliseKeywordScore(3)).toBeGreaterThan(normaliseKeywordScore(2));
    expect(normaliseKeywordScore(1e9)).toBeLessThanOrEqual(1);
  });
});

describe('TopK', () => {
  it('keeps the k best scores, ties broken by lower id', () => {
    const top = new TopK(3);
    const scores = [0.1, 0.9, 0.5, 0.9, 0.3, 0.7, -1];
    scores.forEach((s, i) => top.push(s, i));
    expect(top.sorted()).toEqual([
      { id: 1, score: 0.9 },
      { id: 3, score: 0.9 },
      { id: 5, score: 0.7 },
    ]);
    expect(top.threshold).toBe(0.7);
  });

  it('matches a full sort on random input', () => {
    let seed = 7;
    const rand = () => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 4294967296);
    for (const k of [1, 5, 50, 500]) {
      const xs = Array.from({ length: 300 }, (_, id) => ({ id, score: Math.round(rand() * 50) / 50 }));
      const top = new TopK(k);
      for (const x of xs) top.push(x.score, x.id);
      expect(top.sorted()).toEqual([...xs].sort((a, b) => b.score - a.score || a.id - b.id).slice(0, k));
    }
    expect(new TopK(0).sorted()).toEqual([]);
  });
});

describe('dotAt', () => {
  it('computes the dot product at an offset, for lengths not divisible by four', () => {
    const data = Float32Array.from([9, 9, 1, 2, 3, 4, 5]);
    expect(dotAt(data, 2, Float32Array.from([1, 1, 1, 1, 2]))).toBe(1 + 2 + 3 + 4 + 10);
  });
});

describe('fusion', () => {
  it('rescales cosines from the floor to 1', () => {
    expect(denseScale(0.1, 0.2)).toBe(0);
    expect(denseScale(0.6, 0.2)).toBeCloseTo(0.5, 12);
    expect(denseScale(1, 0.2)).toBe(1);
    expect(denseScale(Number.NaN, 0.2)).toBe(0);
  });

  it('weighs the keyword score and the rescaled cosine; a hit missing from a list scores 0 there', () => {
    const f = { denseWeight: 0.25, denseFloor: 0 };
    const kw = [{ ...hit('a'), score: 1 }, { ...hit('b'), score: 0.4 }];
    const dense = [{ ...hit('c'), score: 0.9 }, { ...hit('b'), score: 0.8 }];
    const fused = fuseHitLists(kw, dense, f, 10);
    expect(fused.map((h) => h.documentId)).toEqual(['a', 'b', 'c']);
    expect(fused[0]!.score).toBeCloseTo(0.75, 12);
    expect(fused[1]!.score).toBeCloseTo(0.75 * 0.4 + 0.25 * 0.8, 12);
    expect(fused[2]!.score).toBeCloseTo(0.25 * 0.9, 12);
    expect(fuseHitLists(kw, dense, f, 1).map((h) => h.documentId)).toEqual(['a']);
    // Fused scores stay in 0..1 with the defaults too.
    for (const h of fuseHitLists(kw, dense, DEFAULT_FUSION, 10)) expect(h.score).toBeGreaterThanOrEqual(0), expect(h.score).toBeLessThanOrEqual(1);
  });
});

describe('metadataFacets', () => {
  it('uses the conversions of matchesFilter', () => {
    expect(metadataFacets({ n: 0.1 + 0.2, s: ' 0x10 ', e: '', b: false, a: ['x', 'Y'] })).toEqual([
      { key: 'n', kind: 'number', values: ['0.30000000000000004'], num: 0.30000000000000004 },
      { key: 's', kind: 'string', values: [' 0x10 '], num: 16 },
      { key: 'e', kind: 'string', values: [''], num: null },
      { key: 'b', kind: 'boolean', values: ['false'], num: null },
      { key: 'a', kind: 'array', values: ['x', 'Y'], num: null },
    ]);
    expect(metadataFacets({ gone: null, missing: undefined })).toEqual([]);
  });
});
