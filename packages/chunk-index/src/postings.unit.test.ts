import { describe, expect, it } from 'vitest';
import { documentTerms } from './analyse.js';
import { BM25_B, BM25_K1, FrequentPostings, ftsTokens } from './postings.js';

describe('FrequentPostings', () => {
  it('returns the exact BM25 top k (MaxScore skipping work), with removed rows, a restriction and rare rows added', () => {
    let rnd = 5;
    const next = () => (rnd = (Math.imul(rnd, 1103515245) + 12345) >>> 0) / 4294967296;
    // Zipf-like words, so some tokens are in most rows and others in few.
    const words = Array.from({ length: 200 }, (_, i) => `z${i.toString(36)}q`);
    const word = () => words[Math.floor(words.length * next() ** 2.5)]!;
    const texts = new Map<number, string>();
    for (let r = 1; r <= 800; r++) texts.set(r, Array.from({ length: 3 + Math.floor(next() * 40) }, word).join(' '));
    const docs = new Map<string, number>();
    for (const t of texts.values()) for (const tok of new Set([...documentTerms(t).terms, ...documentTerms(t).bigrams])) docs.set(tok, (docs.get(tok) ?? 0) + 1);
    const post = new FrequentPostings(new Map([...docs].filter(([, n]) => n >= 5)), 5, 0.3, texts.size);
    for (const [rowid, t] of texts) post.add(rowid, t);
    // Some rows go, and some rowids come back with other text.
    for (let r = 1; r <= 800; r += 7) {
      post.remove(r);
      texts.delete(r);
    }
    for (let r = 1; r <= 800; r += 21) {
      const t = Array.from({ length: 10 }, word).join(' ');
      post.add(r, t);
      texts.set(r, t);
    }
    const lens = new Map([...texts].map(([r, t]) => [r, documentTerms(t).terms.length + documentTerms(t).bigrams.length]));
    const avg = 17.5;
    const bm25 = (rowid: number, token: string, idf: number) => {
      const { terms, bigrams } = documentTerms(texts.get(rowid)!);
      const tf = [...terms, ...bigrams].filter((x) => x === token).length;
      if (tf === 0) return 0;
      const f = tf * (token.includes('_') ? 0.3 : 1);
      return idf * ((f * (BM25_K1 + 1)) / (f + BM25_K1 * (1 - BM25_B + (BM25_B * lens.get(rowid)!) / avg)));
    };
    let skipped = 0;
    for (let qn = 0; qn < 60; qn++) {
      const qtokens = [...new Set(Array.from({ length: 2 + Math.floor(next() * 6) }, word))];
      const frequent = qtokens.filter((t) => post.has(t)).map((t) => ({ token: t, idf: Math.max(1e-6, Math.log((texts.size + 0.5 - docs.get(t)!) / (docs.get(t)! + 0.5))) }));
      const rare: [number, number][] = [...texts.keys()].filter((r) => r % 13 === qn % 13).map((r) => [r, 0.5 + (r % 5) * 0.1]);
      const allowed = qn % 3 === 0 ? new Set([...texts.keys()].filter((r) => r % 2 === 0)) : undefined;
      const limit = 1 + (qn % 10);
      const got = post.top(frequent, rare, limit, allowed, avg)!;
      const want = [...texts.keys()]
        .filter((r) => !allowed || allowed.has(r))
        .map((r) => ({ id: r, score: frequent.reduce((a, t) => a + bm25(r, t.token, t.idf), 0) + (rare.find(([x]) => x === r)?.[1] ?? 0) }))
        .filter((x) => x.score > 0)
        .sort((a, b) => b.score - a.score || a.id - b.id)
        .slice(0, limit);
      expect(got.map((x) => x.score)).toEqual(want.map((x) => expect.closeTo(x.score, 9)));
      expect(got.map((x) => x.id)).toEqual(want.map((x) => x.id));
      if (post.lastWork.entries < frequent.reduce((a, t) => a + docs.get(t.token)!, 0) / 2) skipped++;
    }
    expect(skipped).toBeGreaterThan(10);
  });

  it('reads analysed tokens as FTS5 does: a word of combining marks is no token', () => {
    expect(ftsTokens('list_directori')).toEqual(['list_directori']);
    expect(ftsTokens('\ufe0f')).toEqual([]);
    expect(ftsTokens('\ufe0f_openapi')).toEqual(['_openapi']);
    expect(ftsTokens('größe')).toEqual(['größe']);
  });
});
