import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { buildStaticModel } from './static-build.js';
import { StaticEmbedder, decodeStaticModel, encodeStaticModel, installedSourceVersion, staticModelPath } from './static-model.js';
import { cosine } from './testing/vectors.js';

/** A wink-shaped table: words most frequent first, each vector [dim values, norm, index]. */
function tinyWink(entries: Array<[string, number[]]>) {
  const dim = entries[0]![1].length;
  return {
    dimensions: dim,
    size: entries.length,
    words: entries.map(([w]) => w),
    vectors: Object.fromEntries(entries.map(([w, v], i) => [w, [...v, Math.hypot(...v), i]])),
  };
}

describe('the static word-vector model', () => {
  // "the" and "of" are the most frequent words (stop words: left out of the table); the rest differ.
  const wink = tinyWink([
    ['the', [5, 0.1, 0, 0]],
    [',', [1, 1, 1, 1]],
    ['of', [4, 0, 0.2, 0]],
    ['Car', [0, 0, 0, 9]],
    ['car', [1, 2, 0, 0]],
    ['automobile', [1, 2.2, 0.1, 0]],
    ['cake', [1, 0, 0, 2]],
  ]);

  it('keeps words only (no punctuation, no capitalised duplicates, no stop words), round-trips through its file format', () => {
    const built = buildStaticModel(wink, { vocabulary: 100, source: 'tiny@0' });
    expect(built.header.words).toEqual(['car', 'automobile', 'cake']);
    const decoded = decodeStaticModel(encodeStaticModel(built.header, built.vectors, built.scales));
    const { words, ...rest } = built.header;
    expect(decoded.header).toEqual(rest);
    expect(Array.from({ length: decoded.vocabulary.size }, (_, r) => decoded.vocabulary.word(r))).toEqual(words);
    for (const [row, w] of words.entries()) expect(decoded.vocabulary.row(w)).toBe(row);
    expect(decoded.vocabulary.row('zebra')).toBe(-1);
    expect([...decoded.vectors]).toEqual([...built.vectors]);
    expect([...decoded.scales]).toEqual([...built.scales]);
    expect(() => decodeStaticModel(Buffer.from('not a model'))).toThrow(/not a memstream static model/);
  });

  it('finds words outside ASCII in a decoded file (the vocabulary is UTF-8 with a hash table)', () => {
    const words = ['café', 'naïve', 'straße', '東京', 'cafe'];
    const header = { model: 'm', source: 's', dim: 2, words, build: { sifA: 1, vocabulary: words.length, pcRemoved: 0 } };
    const decoded = decodeStaticModel(encodeStaticModel(header, new Int8Array(words.length * 2), new Float32Array(words.length).fill(1)));
    expect(words.map((w) => decoded.vocabulary.row(w))).toEqual([0, 1, 2, 3, 4]);
    expect(decoded.vocabulary.row('cafè')).toBe(-1);
  });

  it('finds the same words as lower-casing the text and taking its runs of letters and digits, ASCII or not', () => {
    // Lower-casing can turn a non-ASCII letter into ASCII (the Kelvin sign into k, İ into i and a
    // combining dot), and Σ into σ or ς by what stands around it: such stretches go to the pattern.
    const words = ['k', 'i', 'stanbul', 'café', 'cafe', 'naïve', 'na', 've', 'straße', '東京', 'σοφία', 'σοφίας', 'οδος', 'οδοσ', 'a1', '2024', 'x', 'ab', 'b'];
    const header = { model: 'm', source: 's', dim: 3, words, build: { sifA: 1, vocabulary: words.length, pcRemoved: 0 } };
    const { vocabulary } = decodeStaticModel(encodeStaticModel(header, new Int8Array(words.length * 3), new Float32Array(words.length).fill(1)));
    const reference = (text: string) => (text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []).map((w) => vocabulary.row(w)).filter((r) => r >= 0);
    const texts = [
      'Café and CAFE, naïve NA-VE; STRASSE straße 東京!',
      '\u212a and K: İstanbul, ISTANBUL',
      'ΣΟΦΊΑΣ. ΟΔΟΣ ΟΔΟΣ.Σ Α.Σ σοφίας',
      'a1 A1 2024 x-ab b\u00a0ab ab\u2028b ab\u0301 ab—b',
      '',
      '   ',
      'x',
    ];
    const fragments = ['ab', 'AB', 'b', ' ', '.', '-', 'é', 'É', 'Σ', '\u212a', 'İ', 'x', '1', '\u0301', '😀', 'k', "'", '\n'];
    let seed = 3;
    for (let k = 0; k < 3000; k++) {
      let t = '';
      for (let n = (k % 20) + 1; n > 0; n--) {
        seed = (seed * 1103515245 + 12345) >>> 0;
        t += fragments[seed % fragments.length];
      }
      texts.push(t);
    }
    for (const t of texts) expect(vocabulary.rowsOf(t), JSON.stringify(t)).toEqual(reference(t));
  });

  it('weighs frequent words down (SIF): of two words with equal vectors, the rarer counts more', async () => {
    const equal = tinyWink([
      ['the', [3, 1, 0, 0]],
      ['dog', [0, 1, 3, 0]],
      ...Array.from({ length: 500 }, (_, i): [string, number[]] => [`w${i}`, [Math.sin(i), Math.cos(i), Math.sin(2 * i), Math.cos(3 * i)]]),
      ['zebra', [0, 1, 3, 0]],
    ]);
    const built = buildStaticModel(equal, { vocabulary: 1000, source: 'tiny@0' });
    const row = (w: string) => built.header.words.indexOf(w);
    // The stored vector's size is its scale (int8 × scale): the rare word's is larger.
    expect(built.scales[row('zebra')]!).toBeGreaterThan(2 * built.scales[row('dog')]!);
  });

  it('embeds a text as its words pooled: near words give near texts', async () => {
    const b = buildStaticModel(wink, { vocabulary: 100, source: 'tiny@0' });
    const e = new StaticEmbedder(b.header, b.vectors, b.scales);
    const [car, auto, cake] = await e.embed(['a car', 'automobile!', 'cake']);
    expect(cosine(car!, auto!)).toBeGreaterThan(cosine(car!, cake!));
    expect(e.model).toBe('static-glove100-sif-v2');
  });

  it('leaves stop words out of the table: a sentence vector is its content words only', async () => {
    const b = buildStaticModel(wink, { vocabulary: 100, source: 'tiny@0' });
    const e = new StaticEmbedder(b.header, b.vectors, b.scales);
    const [withStop, without] = await e.embed(['the car', 'car']);
    expect(cosine(withStop!, without!)).toBeCloseTo(1, 6);
  });

  it('gives a text without a known word the zero vector, not an arbitrary one', async () => {
    const built = buildStaticModel(wink, { vocabulary: 100, source: 'tiny@0' });
    const [v] = await new StaticEmbedder(built.header, built.vectors, built.scales).embed(['zzzz qqqq']);
    expect([...v!].every((x) => x === 0)).toBe(true);
  });

  // The model the launcher builds at install time; skipped (with the reason) where it is not built.
  const file = staticModelPath(installedSourceVersion());
  if (!existsSync(file)) console.log(`[static model] installed-model test skipped: ${file} is not built (./memstream builds it after installing dependencies)`);
  it.skipIf(!existsSync(file))('the installed model knows paraphrases from unrelated text', async () => {
    const e = StaticEmbedder.load(file);
    expect(e.dim).toBe(100);
    const [a, b, c] = await e.embed(['password reset', 'change my password', 'chocolate cake recipe']);
    expect(cosine(a!, b!)).toBeGreaterThan(0.6);
    expect(cosine(a!, c!)).toBeLessThan(0.3);
  });
});
