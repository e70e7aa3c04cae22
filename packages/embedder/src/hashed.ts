import type { Embedder } from './port.js';

/**
 * The offline, deterministic default embedder: signed feature hashing of word and character
 * n-grams. It needs no download and no network, and the same text always gives the same vector
 * on every machine.
 *
 * It is LEXICAL, not semantic: two texts score high when they share words, word pairs and
 * character shapes (so typos and inflections still overlap), never because they mean the same
 * thing in different words. "car" and "automobile" are unrelated to it.
 *
 * Features, each hashed into one of `dim` buckets with a sign from a second hash:
 *  - word unigrams (weight 1.0),
 *  - word bigrams (weight 0.5), which reward shared phrasing,
 *  - character trigrams within each word, with `^`/`$` boundary markers (weight 0.5), which
 *    carry typos and morphology. The weight is 0.5 rather than a smaller value because a single
 *    mistyped word must keep most of its vector: at 0.3, `embeddings` vs `embedings` falls to
 *    cosine ~0.39; at 0.5 it is ~0.6.
 * A feature seen tf times counts 1 + ln(tf) (sublinear, so a repeated word does not drown the
 * rest). The vector is L2-normalised. A text with no words (empty, whitespace, punctuation only)
 * gets the fixed unit vector e0 (bucket 0 = 1), so cosine stays defined; all such texts are
 * identical to each other.
 *
 * Normalisation before tokenizing: NFKC, lowercase, and Latin/Greek/Cyrillic diacritics removed
 * (`Café` = `cafe`). Words are runs of Unicode letters, digits and marks; Han, Hiragana and
 * Katakana characters are one word each because those scripts put no spaces between words
 * (their bigrams are then character bigrams, the usual lexical unit for CJK).
 *
 * Any change to normalisation, features, weights or hashing changes every vector, so it must
 * come with a new model name (`hashed-ngram-v2-…`): the index never mixes two models.
 */
export class HashedEmbedder implements Embedder {
  readonly model: string;
  readonly dim: number;

  constructor(options: { dim?: number } = {}) {
    const dim = options.dim ?? 384;
    if (!Number.isInteger(dim) || dim < 1 || dim > 65_536) {
      throw new RangeError(`HashedEmbedder: dim must be an integer in 1..65536, got ${dim}`);
    }
    this.dim = dim;
    this.model = `hashed-ngram-v1-${dim}`;
  }

  /** Embeds each text; the work is synchronous and only wrapped in a Promise to fit the port. */
  async embed(texts: string[]): Promise<Float32Array[]> {
    return texts.map((text) => this.embedOne(text));
  }

  /** The vector of one text (synchronous form of `embed`). */
  embedOne(text: string): Float32Array {
    const words = tokenize(normalise(text));
    // Per-type counters keyed by the feature's 32-bit hash: types are hashed with different
    // seeds, so a word and a trigram with the same characters never share a key.
    const unigrams = new Map<number, number>();
    const bigrams = new Map<number, number>();
    const trigrams = new Map<number, number>();
    let previous = 0;
    for (let i = 0; i < words.length; i++) {
      const word = words[i] as string;
      const h = hashString(word, SEED_WORD);
      bump(unigrams, h);
      if (i > 0) bump(bigrams, fmix32(Math.imul(previous, 0x9e3779b1) ^ h ^ SEED_BIGRAM));
      previous = h;
      addTrigrams(trigrams, word);
    }

    const acc = new Float64Array(this.dim);
    scatter(acc, unigrams, WEIGHT_UNIGRAM);
    scatter(acc, bigrams, WEIGHT_BIGRAM);
    scatter(acc, trigrams, WEIGHT_TRIGRAM);

    let sumSquares = 0;
    for (let i = 0; i < acc.length; i++) sumSquares += (acc[i] as number) * (acc[i] as number);
    const out = new Float32Array(this.dim);
    if (sumSquares === 0) {
      // No features (or, vanishingly rarely, features that cancel exactly): a fixed unit vector
      // keeps the norm at 1 so cosine with it is defined (0 against most texts).
      out[0] = 1;
      return out;
    }
    const inv = 1 / Math.sqrt(sumSquares);
    for (let i = 0; i < acc.length; i++) out[i] = (acc[i] as number) * inv;
    return out;
  }
}

const WEIGHT_UNIGRAM = 1.0;
const WEIGHT_BIGRAM = 0.5;
const WEIGHT_TRIGRAM = 0.5;

// Arbitrary fixed seeds, one per feature type and one for the sign; part of the model's identity.
const SEED_WORD = 0x811c9dc5;
const SEED_BIGRAM = 0x27d4eb2f;
const SEED_TRIGRAM = 0x165667b1;
const SEED_SIGN = 0x5bd1e995;

/** `^` and `$` mark a word's start and end inside its trigrams. */
const BOUNDARY_START = 0x5e;
const BOUNDARY_END = 0x24;

const FNV_PRIME = 0x01000193;

/** murmur3's 32-bit finaliser: spreads FNV's weak low bits before they pick a bucket. */
function fmix32(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** Seeded FNV-1a over UTF-16 code units (one unit per step), then finalised. */
function hashString(s: string, seed: number): number {
  let h = seed;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, FNV_PRIME);
  }
  return fmix32(h);
}

/** Hashes the trigrams of `^word$` straight from code units, without building substrings. */
function addTrigrams(counts: Map<number, number>, word: string): void {
  const n = word.length + 2;
  if (n < 3) return;
  const unit = (i: number): number =>
    i === 0 ? BOUNDARY_START : i === n - 1 ? BOUNDARY_END : word.charCodeAt(i - 1);
  let a = unit(0);
  let b = unit(1);
  for (let i = 2; i < n; i++) {
    const c = unit(i);
    let h = SEED_TRIGRAM;
    h = Math.imul(h ^ a, FNV_PRIME);
    h = Math.imul(h ^ b, FNV_PRIME);
    h = Math.imul(h ^ c, FNV_PRIME);
    bump(counts, fmix32(h));
    a = b;
    b = c;
  }
}

function bump(counts: Map<number, number>, key: number): void {
  counts.set(key, (counts.get(key) ?? 0) + 1);
}

/** Adds each feature, with sublinear tf, to its bucket with its sign. */
function scatter(acc: Float64Array, counts: Map<number, number>, weight: number): void {
  const dim = acc.length;
  for (const [h, tf] of counts) {
    const bucket = h % dim;
    // The sign comes from a second hash so that two features colliding in one bucket cancel
    // on average instead of always adding up (which would bias every dot product upwards).
    const sign = (fmix32(h ^ SEED_SIGN) & 1) === 0 ? 1 : -1;
    acc[bucket] = (acc[bucket] as number) + sign * weight * (1 + Math.log(tf));
  }
}

const ASCII_ONLY = /^[\x00-\x7f]*$/;
const COMBINING_DIACRITICS = /[\u0300-\u036f]/g;

/** NFKC, lowercase, strip Latin/Greek/Cyrillic diacritics; ASCII text skips the Unicode work. */
function normalise(text: string): string {
  if (ASCII_ONLY.test(text)) return text.toLowerCase();
  // Only the generic combining-diacritics block is removed: marks of other scripts (Devanagari
  // vowel signs, Thai tones…) are letters there, and NFC re-composes Hangul afterwards.
  return text
    .normalize('NFKC')
    .toLowerCase()
    .normalize('NFD')
    .replace(COMBINING_DIACRITICS, '')
    .normalize('NFC');
}

const WORD = /[\p{L}\p{N}\p{M}]+/gu;
const CJK_CHAR = /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}]/u;
const CJK_OR_RUN = /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}]|[^\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}]+/gu;

/** Words of normalised text; CJK ideographs and kana become one word per character. */
function tokenize(text: string): string[] {
  const out: string[] = [];
  for (const match of text.matchAll(WORD)) {
    const word = match[0];
    if (!CJK_CHAR.test(word)) {
      out.push(word);
      continue;
    }
    for (const part of word.matchAll(CJK_OR_RUN)) out.push(part[0]);
  }
  return out;
}
