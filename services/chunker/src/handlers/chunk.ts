import { createHash } from 'node:crypto';
import type { Chunk } from '@memstream/contracts';
import o200k_base from 'js-tiktoken/ranks/o200k_base';
import { conversationUnits } from './conversation.js';

/**
 * Structure-aware chunking with real o200k_base token counts.
 *
 * 1. Blocks. The text is cut into blocks by its structure: markdown sections (a heading starts
 *    one; the heading path "# A > ## B" is the first line of every chunk of the section, so a
 *    chunk read alone still says where it came from), fenced code blocks, paragraphs and list
 *    items; plain paragraphs (blank-line separated). Conversations are cut into their turns
 *    instead (conversation.ts).
 *    A chunk never spans two markdown sections.
 * 2. Elements. A block that fits in a chunk is atomic. A bigger one is cut into sentences (code
 *    into lines), and a sentence still too big into token windows.
 * 3. Cuts. Inside a section, a cut goes after element i when the hash of i's opening (its first
 *    64 UTF-16 units) is the smallest among all elements ending within `minTokens` tokens on
 *    either side (a local minimum, as in content-defined chunking). A run between two cuts that
 *    still exceeds `maxTokens` is packed greedily from its start.
 *
 * Why local minima rather than packing the whole text greedily or with a sliding window: the
 * embedding cache is keyed by chunk hash, so an edit should re-embed only the chunks around it.
 * Whether a cut exists depends only on the elements within `minTokens` of it, never on where the
 * previous chunk ended, so an edit's effect cannot travel down the document: an edited
 * paragraph changes the chunk holding it and, when it moves a nearby cut, a neighbour; chunks
 * further away keep their exact text and hash. (Inside a run longer than `maxTokens` the greedy
 * packing can also move the run's later cuts, never past the run's end.) Greedy packing of the
 * whole text, by contrast, can shift every later boundary after one edit. The hash covers only
 * an element's opening so that the common edit (words changed inside a paragraph, a sentence
 * appended) leaves every cut priority as it was; then only the paragraph's change in size can
 * move a cut. Editing a paragraph's first words re-draws its priority, which can move nearby
 * cuts too. Measured on a 400-paragraph, ~95-chunk document, editing each paragraph in turn:
 * a word changed mid-paragraph re-chunked 1 chunk in 400/400 cases; an appended sentence 1 chunk
 * in 386 and 2 in 14; a changed opening 1 in 307, 2 in 89, 3 or 4 in 4. For the same reason
 * chunks do not overlap: an overlap would copy text across a boundary and drag the neighbour
 * into every edit.
 *
 * A chunk is the heading-path line (markdown) plus a verbatim slice of the text from its first
 * element to its last (line endings normalised to \n, ends trimmed), so the formatting between
 * blocks is kept; only whitespace at a cut (and markdown heading lines, which move into the
 * prefix) is left out.
 *
 * Consequences of the cut rule: cuts are at least `minTokens` apart and from a section's ends,
 * so a chunk is at least that long unless its whole section is shorter or it is the tail of a
 * greedy split; the gap between cuts averages about twice `minTokens`.
 */

/** The tokenizer whose counts `Chunk.tokens` reports (for `ChunkedData.tokenizer`). */
export const TOKENIZER = 'o200k_base';

/** The default upper bound of a chunk, heading prefix included. */
export const DEFAULT_MAX_TOKENS = 512;

/** The document shapes the chunker understands (ExtractedData.format). */
export type TextFormat = 'plain' | 'markdown' | 'conversation';

/** Size bounds; `minTokens` defaults to a quarter of `maxTokens` (see the module comment). */
export interface ChunkOptions {
  maxTokens?: number;
  minTokens?: number;
}

/** Splits a document into chunks of at most `maxTokens` o200k_base tokens; empty text gives []. */
export function chunkText(text: string, format: TextFormat, opts: ChunkOptions = {}): Chunk[] {
  const maxTokens = opts.maxTokens ?? DEFAULT_MAX_TOKENS;
  const minTokens = opts.minTokens ?? Math.floor(maxTokens / 4);
  if (!Number.isInteger(maxTokens) || maxTokens < MIN_MAX_TOKENS) {
    throw new RangeError(`chunkText: maxTokens must be an integer >= ${MIN_MAX_TOKENS}, got ${maxTokens}`);
  }
  if (!Number.isInteger(minTokens) || minTokens < 0 || minTokens > maxTokens) {
    throw new RangeError(`chunkText: minTokens must be an integer in 0..maxTokens, got ${minTokens}`);
  }
  const src = clean(text);
  if (src.trim() === '') return [];
  // Conversations are cut into their turns (conversation.ts), not packed into slabs.
  if (format === 'conversation') {
    const split = (t: string, budget: number) => chunkText(t, 'plain', { maxTokens: Math.max(MIN_MAX_TOKENS, budget) }).map((c) => c.text);
    return conversationUnits(src, maxTokens, countTokens, split).map((t, index) => ({
      index,
      hash: createHash('sha256').update(t, 'utf8').digest('hex'),
      text: t,
      tokens: countTokens(t),
    }));
  }

  const sections =
    format === 'markdown' ? markdownSections(src) : plainSections(src);
  const memo = newMemo(src);
  let packed = packSections(src, sections, maxTokens, minTokens, memo);
  // A markdown text of headings only has no section bodies; its words must still be searchable.
  if (packed.length === 0) packed = packSections(src, plainSections(src), maxTokens, minTokens, memo);

  return packed.map((c, index) => ({
    index,
    hash: createHash('sha256').update(c.text, 'utf8').digest('hex'),
    text: c.text,
    tokens: c.tokens,
  }));
}

/** The number of o200k_base tokens of a text (special-token strings count as plain text). */
export function countTokens(text: string): number {
  return countRange(text, 0, text.length, null);
}

/** Below this a heading prefix and one sentence window no longer fit sensibly. */
const MIN_MAX_TOKENS = 16;

// ---------------------------------------------------------------------------------------------
// Tokenizer. An exact re-implementation of tiktoken's byte-pair encoding over the o200k_base
// ranks and pre-tokenizer pattern shipped in js-tiktoken (no network). js-tiktoken's own
// encoder is not used at run time because its merge loop rescans and re-joins the whole piece
// after every merge: quadratic per pre-token, so a long emoji run or an unpunctuated CJK
// paragraph (one pre-token) takes seconds to minutes. This one keeps candidate pairs in a heap
// (n log n) and caches short pieces. Pre-tokens of ASCII text are found by a scanner rather than
// the pattern (asciiPieceEnd), and chunkText scans its text once though it counts most of it twice
// (each element, then the chunk holding it: Memo).
// The unit tests check the counts against js-tiktoken, on varied and on random text.

interface Codec {
  /** Byte string (one char per byte, as atob returns) → rank. */
  ranks: Map<string, number>;
  /** Rank → byte string. */
  bytesOf: string[];
  /** The pre-tokenizer pattern, sticky: it matches at lastIndex or not at all. */
  pattern: RegExp;
  /** Short pieces (words, mostly) → token ids; cleared when full to bound memory. */
  cache: Map<string, number[]>;
}

const PIECE_CACHE_LIMIT = 100_000;
const PIECE_CACHE_MAX_LENGTH = 32;

/**
 * A pre-token longer than this (in UTF-16 units) is cut into runs of this length before byte-pair
 * merging. Real words are far shorter; the runs that are not (an 8 MB "word", a base64 blob, a
 * line of one repeated emoji) would otherwise be merged as one piece: the heap keeps that
 * n log n, but an 8 MB piece still took tens of seconds per count, and a chunk is counted several
 * times. Cut, the work is linear in the text. The counts of such runs can differ from tiktoken's
 * by a token at each cut, which only moves where a window ends; no chunk exceeds maxTokens,
 * since every chunk is counted with this same function.
 */
const MAX_PIECE_LENGTH = 1024;

let codec: Codec | undefined;

/** Built on first use and kept: parsing the 200k ranks takes a few hundred milliseconds. */
function getCodec(): Codec {
  if (codec !== undefined) return codec;
  const ranks = new Map<string, number>();
  const bytesOf: string[] = [];
  // Format: one or more lines "<name> <first rank> <base64 token> <base64 token> ...".
  for (const line of o200k_base.bpe_ranks.split('\n')) {
    if (line === '') continue;
    const fields = line.split(' ');
    let rank = Number.parseInt(fields[1] ?? '', 10);
    for (let i = 2; i < fields.length; i++) {
      const bytes = atob(fields[i] as string);
      ranks.set(bytes, rank);
      bytesOf[rank] = bytes;
      rank++;
    }
  }
  codec = { ranks, bytesOf, pattern: new RegExp(o200k_base.pat_str, 'yu'), cache: new Map() };
  return codec;
}

const ASCII_ONLY = /^[\x00-\x7f]*$/;

/**
 * Pre-token decisions already made on one text, by start position. chunkText counts every
 * element, then each chunk, which is mostly the same elements again: with the memo the second
 * count reuses the first's pre-tokens instead of scanning them again. A decision is kept only
 * when all it looked at lies inside the range then counted, and reused only when all it looked
 * at lies inside the range being counted: then the text it depends on is the same, and so is the
 * pre-token. (Pre-tokens found by the pattern itself, for non-ASCII text, are not kept: what the
 * regex engine looked at is not known.)
 */
interface Memo {
  /** Length of the pre-token at each position; 0: nothing kept. */
  length: Uint16Array;
  tokens: Uint16Array;
  /** How far past its start the decision looked (the last position read, relative; at most 0xffff). */
  reach: Uint16Array;
}

/** Texts longer than this get no memo (6 bytes per character); they are rare and counted as before. */
const MEMO_MAX_LENGTH = 1 << 20;

function newMemo(text: string): Memo | null {
  const n = text.length;
  return n > MEMO_MAX_LENGTH ? null : { length: new Uint16Array(n), tokens: new Uint16Array(n), reach: new Uint16Array(n) };
}

/** The number of tokens of `text[start, end)`, as countTokens of that slice gives it. */
function countRange(text: string, start: number, end: number, memo: Memo | null): number {
  const c = getCodec();
  let count = 0;
  for (let p = start; p < end; ) {
    if (memo !== null) {
      const length = memo.length[p] as number;
      if (length !== 0 && p + (memo.reach[p] as number) < end) {
        count += memo.tokens[p] as number;
        p += length;
        continue;
      }
    }
    const e = asciiPieceEnd(text, p, end);
    if (e > p) {
      const tokens = pieceCount(c, text, p, e);
      count += tokens;
      // reach < end: the decision saw no end of range, so it holds in any range that covers what it read.
      // (A line break's pre-token can be short while the spaces read after it are not: such a
      // reach does not fit the memo's 16 bits, and the decision is not kept.)
      if (memo !== null && e - p <= MAX_PIECE_LENGTH && reach < end && reach - p <= 0xffff) {
        memo.length[p] = e - p;
        memo.tokens[p] = tokens;
        memo.reach[p] = reach - p;
      }
      p = e;
    } else {
      // The pattern decides, on the range alone: it may look ahead past the pre-token.
      const q = patternEnd(c, end === text.length ? text : text.slice(0, end), p);
      count += pieceCount(c, text, p, q);
      p = q;
    }
  }
  return count;
}

/**
 * Tokens of `head + text[start, end)` (a chunk: its heading prefix, then a slice of the source),
 * given that string as `joined`: the pre-tokens that start in the head are found in `joined`, the
 * rest in the source, where the memo has them.
 */
function countJoined(joined: string, headLength: number, text: string, start: number, end: number, memo: Memo | null): number {
  const c = getCodec();
  let count = 0;
  let p = 0;
  while (p < headLength) {
    const e = pieceEnd(c, joined, p);
    count += pieceCount(c, joined, p, e);
    p = e;
  }
  // From here on `joined` is the source's text from the same character to `end`.
  return count + countRange(text, start + (p - headLength), end, memo);
}

/** Token ids of a text, as js-tiktoken's `encode(text, [], [])` gives them. */
function encode(text: string): number[] {
  const c = getCodec();
  const out: number[] = [];
  for (let p = 0; p < text.length; ) {
    const e = pieceEnd(c, text, p);
    for (const run of pieceRuns(text, p, e)) for (const id of pieceIds(c, run)) out.push(id);
    p = e;
  }
  return out;
}

/** The pre-token text[p, e) as js-tiktoken encodes it: whole, or a long one cut into runs. */
function pieceRuns(text: string, p: number, e: number): Iterable<string> {
  return e - p <= MAX_PIECE_LENGTH ? [text.slice(p, e)] : runsOf(text.slice(p, e), MAX_PIECE_LENGTH);
}

/** How many tokens the pre-token text[p, e) is. */
function pieceCount(c: Codec, text: string, p: number, e: number): number {
  if (e - p <= MAX_PIECE_LENGTH) return pieceIds(c, text.slice(p, e)).length;
  let n = 0;
  for (const run of runsOf(text.slice(p, e), MAX_PIECE_LENGTH)) n += pieceIds(c, run).length;
  return n;
}

/** The token ids of one pre-token, from the cache when it is short. */
function pieceIds(c: Codec, s: string): number[] {
  let ids = c.cache.get(s);
  if (ids === undefined) {
    ids = encodePiece(c, s);
    if (s.length <= PIECE_CACHE_MAX_LENGTH) {
      if (c.cache.size >= PIECE_CACHE_LIMIT) c.cache.clear();
      c.cache.set(s, ids);
    }
  }
  return ids;
}

/**
 * Where the pre-token that starts at `p` ends: what the pattern matches there. The pattern
 * matches at every position (its alternatives cover letters, digits, whitespace and everything
 * else), so pre-tokens tile the text and the one at `p` depends only on the text from `p` on.
 * Most text is ASCII, where the pattern's Unicode classes are a few ranges: asciiPieceEnd finds
 * the same end by scanning, at a fraction of the regex engine's cost per match. Wherever the
 * answer would depend on a non-ASCII character it declines, and the pattern itself decides.
 */
function pieceEnd(c: Codec, text: string, p: number): number {
  const e = asciiPieceEnd(text, p, text.length);
  return e > p ? e : patternEnd(c, text, p);
}

/** The end of the pattern's match at `p` in `text` (whole: the pattern may look ahead to its end). */
function patternEnd(c: Codec, text: string, p: number): number {
  c.pattern.lastIndex = p;
  const m = c.pattern.exec(text);
  if (m === null || m[0] === '') throw new Error(`o200k pre-tokenizer: no match at ${p}`);
  return p + m[0].length;
}

// ASCII character classes of the pattern: \p{Ll}, \p{Lu}, \p{N}, [\r\n], the rest of \s, and
// everything else (punctuation, symbols, control characters: neither \s, \p{L} nor \p{N}).
const LOWER = 1;
const UPPER = 2;
const DIGIT = 3;
const NEWLINE = 4;
const SPACE = 5;
const OTHER = 6;
/** Beyond the end of the text. */
const END = 0;
/** A non-ASCII character: its class is the pattern's business. */
const WIDE = 7;

const ASCII_CLASS = ((): Uint8Array => {
  const t = new Uint8Array(128).fill(OTHER);
  for (let k = 0x61; k <= 0x7a; k++) t[k] = LOWER;
  for (let k = 0x41; k <= 0x5a; k++) t[k] = UPPER;
  for (let k = 0x30; k <= 0x39; k++) t[k] = DIGIT;
  t[0x0a] = NEWLINE;
  t[0x0d] = NEWLINE;
  // \t \v \f and space: JavaScript's \s in ASCII, besides \r and \n (0x1c-0x1f are not in it).
  for (const k of [0x09, 0x0b, 0x0c, 0x20]) t[k] = SPACE;
  return t;
})();

/** The furthest position asciiPieceEnd has read since it started on its current pre-token (see Memo). */
let reach = 0;

function classAt(text: string, i: number, n: number): number {
  if (i > reach) reach = i;
  if (i >= n) return END;
  const ch = text.charCodeAt(i);
  return ch < 128 ? (ASCII_CLASS[ch] as number) : WIDE;
}

/**
 * The end of the o200k pre-token at `p` when it is decided by ASCII characters alone, else -1.
 * The pattern's alternatives, in the order it tries them, restricted to ASCII:
 *   1. [^\r\n\p{L}\p{N}]?[\p{Lu}…]*[\p{Ll}…]+('s|'t|'re|'ve|'m|'ll|'d, any case)?  (an optional
 *      prefix character, upper-case letters, then lower-case ones, then a contraction)
 *   2. [^\r\n\p{L}\p{N}]?[\p{Lu}…]+[\p{Ll}…]*(contraction)?  (upper-case letters without lower-case)
 *   3. \p{N}{1,3}
 *   4. " "?[^\s\p{L}\p{N}]+[\r\n/]*
 *   5. \s*[\r\n]+  (whitespace up to its last line break)
 *   6. \s+(?!\S)  (whitespace but the last character before a non-space)
 *   7. \s+
 * Every run that decides an end must stop at an ASCII character (or the end of the text): a
 * non-ASCII letter, digit, mark, space or symbol could continue it.
 */
function asciiPieceEnd(text: string, p: number, n: number): number {
  reach = p;
  const k = classAt(text, p, n);
  if (k === WIDE) return -1;
  // 1 and 2: letters, maybe after one character that is not a line break, letter or digit.
  let start = -1;
  if (k === LOWER || k === UPPER) start = p;
  else if (k === SPACE || k === OTHER) {
    const next = classAt(text, p + 1, n);
    if (next === WIDE) return -1;
    if (next === LOWER || next === UPPER) start = p + 1;
  }
  if (start >= 0) {
    let i = start;
    let at = classAt(text, i, n);
    while (at === UPPER) at = classAt(text, ++i, n);
    while (at === LOWER) at = classAt(text, ++i, n);
    if (at === WIDE) return -1;
    // Lower-case letters after the upper-case ones make it 1, none make it 2 (at least one
    // upper-case letter then): the end is the same, and so is the contraction that may follow.
    return afterContraction(text, i, n);
  }
  // 3: up to three digits.
  if (k === DIGIT) {
    let i = p + 1;
    for (; i < p + 3; i++) {
      const at = classAt(text, i, n);
      if (at === WIDE) return -1;
      if (at !== DIGIT) break;
    }
    return i;
  }
  // 4: symbols, maybe after one space, then any line breaks and slashes.
  if (k === OTHER || (text.charCodeAt(p) === 0x20 && classAt(text, p + 1, n) === OTHER)) {
    let i = k === OTHER ? p : p + 1;
    let at = classAt(text, i, n);
    while (at === OTHER) at = classAt(text, ++i, n);
    if (at === WIDE) return -1;
    while (at === NEWLINE || (at === OTHER && text.charCodeAt(i) === 0x2f)) at = classAt(text, ++i, n);
    return i;
  }
  // 5, 6, 7: a run of whitespace.
  let i = p;
  let lastBreak = -1;
  for (;;) {
    const at = classAt(text, i, n);
    if (at === NEWLINE) lastBreak = i;
    else if (at === WIDE) return -1;
    else if (at !== SPACE) break;
    i++;
  }
  if (lastBreak >= 0) return lastBreak + 1;
  // Before a non-space, a run of two or more gives back its last character (6); a single one is 7.
  return i === n || i - p < 2 ? i : i - 1;
}

/** `i`, or past the contraction ('s 't 're 've 'm 'll 'd in any case) that starts there. */
function afterContraction(text: string, i: number, n: number): number {
  // The caller has read `i` (through classAt); a contraction reads up to two more.
  if (i >= n || text.charCodeAt(i) !== 0x27) return i;
  if (reach < i + 2) reach = i + 2;
  if (i + 1 >= n) return i;
  // | 0x20 folds case: only 'S' and 's' give 0x73, and so on for each letter compared.
  const a = text.charCodeAt(i + 1) | 0x20;
  if (a === 0x73 || a === 0x74 || a === 0x6d || a === 0x64) return i + 2;
  if (i + 2 >= n) return i;
  const b = text.charCodeAt(i + 2) | 0x20;
  if ((a === 0x72 && b === 0x65) || (a === 0x76 && b === 0x65) || (a === 0x6c && b === 0x6c)) return i + 3;
  return i;
}

/** `s` in runs of at most `max` UTF-16 units, never splitting a surrogate pair. */
function* runsOf(s: string, max: number): Generator<string> {
  for (let i = 0; i < s.length; ) {
    let j = Math.min(i + max, s.length);
    const last = s.charCodeAt(j - 1);
    if (j < s.length && last >= 0xd800 && last <= 0xdbff) j--;
    yield s.slice(i, j);
    i = j;
  }
}

function encodePiece(c: Codec, piece: string): number[] {
  // For ASCII the UTF-16 string already is the byte string.
  const bytes = ASCII_ONLY.test(piece) ? piece : Buffer.from(piece, 'utf8').toString('latin1');
  const whole = c.ranks.get(bytes);
  if (whole !== undefined) return [whole];
  return bytePairEncode(bytes, c.ranks);
}

/**
 * Byte-pair merging with tiktoken's rule: repeatedly merge the adjacent pair of lowest rank,
 * the leftmost on ties. Pairs wait in a min-heap keyed by (rank, start); a per-part version
 * number discards entries made stale by a neighbouring merge.
 */
function bytePairEncode(bytes: string, ranks: Map<string, number>): number[] {
  const n = bytes.length;
  const end = new Int32Array(n);
  const prev = new Int32Array(n);
  const version = new Int32Array(n);
  for (let i = 0; i < n; i++) {
    end[i] = i + 1;
    prev[i] = i - 1;
  }
  const stride = n + 1;
  const heap = new PairHeap();
  const pushPair = (i: number): void => {
    const j = end[i] as number;
    if (j >= n) return;
    const rank = ranks.get(bytes.slice(i, end[j] as number));
    if (rank !== undefined) heap.push(rank * stride + i, version[i] as number);
  };
  for (let i = 0; i < n - 1; i++) pushPair(i);

  while (heap.pop()) {
    const i = heap.key % stride;
    if (version[i] !== heap.tag) continue;
    const j = end[i] as number;
    end[i] = end[j] as number;
    version[i] = (version[i] as number) + 1;
    version[j] = (version[j] as number) + 1;
    const after = end[i] as number;
    if (after < n) prev[after] = i;
    pushPair(i);
    const before = prev[i] as number;
    if (before >= 0) {
      version[before] = (version[before] as number) + 1;
      pushPair(before);
    }
  }

  const ids: number[] = [];
  for (let i = 0; i < n; i = end[i] as number) {
    const id = ranks.get(bytes.slice(i, end[i] as number));
    if (id !== undefined) ids.push(id);
  }
  return ids;
}

/** A binary min-heap of (key, tag) pairs; `pop` leaves the minimum in `key` and `tag`. */
class PairHeap {
  private readonly keys: number[] = [];
  private readonly tags: number[] = [];
  key = 0;
  tag = 0;

  push(key: number, tag: number): void {
    const keys = this.keys;
    const tags = this.tags;
    let i = keys.length;
    keys.push(key);
    tags.push(tag);
    while (i > 0) {
      const parent = (i - 1) >> 1;
      const pk = keys[parent] as number;
      if (pk <= key) break;
      keys[i] = pk;
      tags[i] = tags[parent] as number;
      i = parent;
    }
    keys[i] = key;
    tags[i] = tag;
  }

  pop(): boolean {
    const keys = this.keys;
    const tags = this.tags;
    if (keys.length === 0) return false;
    this.key = keys[0] as number;
    this.tag = tags[0] as number;
    const lastKey = keys.pop() as number;
    const lastTag = tags.pop() as number;
    const size = keys.length;
    if (size === 0) return true;
    let i = 0;
    for (;;) {
      const left = 2 * i + 1;
      if (left >= size) break;
      const right = left + 1;
      const child = right < size && (keys[right] as number) < (keys[left] as number) ? right : left;
      if ((keys[child] as number) >= lastKey) break;
      keys[i] = keys[child] as number;
      tags[i] = tags[child] as number;
      i = child;
    }
    keys[i] = lastKey;
    tags[i] = lastTag;
    return true;
  }
}

// ---------------------------------------------------------------------------------------------
// Blocks.

interface Range {
  start: number;
  end: number;
}

interface Block extends Range {
  /** Code is split by lines, prose by sentences, when it does not fit in one chunk. */
  kind: 'text' | 'code';
}

interface Section {
  /** The markdown heading path, '' outside markdown or before the first heading. */
  prefix: string;
  blocks: Block[];
}

interface Line extends Range {
  text: string;
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/** One line-ending convention, and no lone surrogates (UTF-8 cannot carry them; they would
 *  count as U+FFFD and make token windows disagree with the text). */
function clean(text: string): string {
  return (text.includes('\r') ? text.replace(/\r\n?/g, '\n') : text).replace(LONE_SURROGATE, '\uFFFD');
}

function splitLines(src: string): Line[] {
  const lines: Line[] = [];
  let start = 0;
  while (start <= src.length) {
    let end = src.indexOf('\n', start);
    if (end === -1) end = src.length;
    lines.push({ start, end, text: src.slice(start, end) });
    start = end + 1;
  }
  return lines;
}

const BLANK = /^[ \t]*$/;

/** JS `trim` semantics, on a range of the source instead of a copy. */
function trimRange(src: string, start: number, end: number): Range {
  while (start < end && isSpace(src.charCodeAt(start))) start++;
  while (end > start && isSpace(src.charCodeAt(end - 1))) end--;
  return { start, end };
}

function isSpace(c: number): boolean {
  return (
    (c >= 0x09 && c <= 0x0d) ||
    c === 0x20 ||
    c === 0xa0 ||
    c === 0x1680 ||
    (c >= 0x2000 && c <= 0x200a) ||
    c === 0x2028 ||
    c === 0x2029 ||
    c === 0x202f ||
    c === 0x205f ||
    c === 0x3000 ||
    c === 0xfeff
  );
}

function pushBlock(blocks: Block[], src: string, start: number, end: number, kind: Block['kind']): void {
  const r = trimRange(src, start, end);
  if (r.end > r.start) blocks.push({ start: r.start, end: r.end, kind });
}

/** Plain text: paragraphs separated by blank lines. */
function plainSections(src: string): Section[] {
  const blocks: Block[] = [];
  let open: Range | null = null;
  for (const line of splitLines(src)) {
    if (BLANK.test(line.text)) {
      if (open) pushBlock(blocks, src, open.start, open.end, 'text');
      open = null;
    } else if (open) open.end = line.end;
    else open = { start: line.start, end: line.end };
  }
  if (open) pushBlock(blocks, src, open.start, open.end, 'text');
  return [{ prefix: '', blocks }];
}

const FENCE_OPEN = /^ {0,3}(?:(`{3,})[^`]*|(~{3,}).*)$/;
const FENCE_CLOSE = /^ {0,3}(`{3,}|~{3,})[ \t]*$/;
const ATX_HEADING = /^ {0,3}(#{1,6})(?:[ \t]+(.*))?$/;
const SETEXT_UNDERLINE = /^ {0,3}(=+|-+)[ \t]*$/;
const LIST_ITEM = /^[ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]+\S/;

/** Markdown: sections by heading; inside them fenced code, list items and paragraphs. */
function markdownSections(src: string): Section[] {
  const sections: Section[] = [];
  const path: { level: number; title: string }[] = [];
  let current: Section = { prefix: '', blocks: [] };
  sections.push(current);
  let open: (Range & { kind: 'para' | 'item' }) | null = null;
  let fence: { marker: string; start: number } | null = null;

  const closeOpen = (): void => {
    if (open) pushBlock(current.blocks, src, open.start, open.end, 'text');
    open = null;
  };
  const startSection = (level: number, rawTitle: string): void => {
    const title = rawTitle.replace(/[ \t]+#+[ \t]*$/, '').replace(/^#+$/, '').replace(/\s+/g, ' ').trim();
    while (path.length > 0 && (path[path.length - 1] as { level: number }).level >= level) path.pop();
    path.push({ level, title });
    const prefix = path
      .filter((h) => h.title !== '')
      .map((h) => `${'#'.repeat(h.level)} ${h.title}`)
      .join(' > ');
    current = { prefix, blocks: [] };
    sections.push(current);
  };

  for (const line of splitLines(src)) {
    const text = line.text;
    if (fence) {
      const close = FENCE_CLOSE.exec(text);
      const marker = close?.[1];
      if (marker !== undefined && marker[0] === fence.marker[0] && marker.length >= fence.marker.length) {
        pushBlock(current.blocks, src, fence.start, line.end, 'code');
        fence = null;
      }
      continue;
    }
    if (BLANK.test(text)) {
      closeOpen();
      continue;
    }
    const fenceOpen = FENCE_OPEN.exec(text);
    if (fenceOpen) {
      closeOpen();
      fence = { marker: fenceOpen[1] ?? fenceOpen[2] ?? '```', start: line.start };
      continue;
    }
    const atx = ATX_HEADING.exec(text);
    if (atx) {
      closeOpen();
      startSection((atx[1] as string).length, atx[2] ?? '');
      continue;
    }
    const setext = SETEXT_UNDERLINE.exec(text);
    const para: (Range & { kind: 'para' | 'item' }) | null = open;
    if (setext && para !== null && para.kind === 'para') {
      // The paragraph above the underline is the heading text (CommonMark setext heading).
      open = null;
      startSection((setext[1] as string)[0] === '=' ? 1 : 2, src.slice(para.start, para.end));
      continue;
    }
    if (LIST_ITEM.test(text)) {
      closeOpen();
      open = { start: line.start, end: line.end, kind: 'item' };
      continue;
    }
    if (para !== null) para.end = line.end;
    else open = { start: line.start, end: line.end, kind: 'para' };
  }
  // An unclosed fence runs to the end of the document, as in CommonMark.
  if (fence) pushBlock(current.blocks, src, fence.start, src.length, 'code');
  closeOpen();
  return sections;
}

// ---------------------------------------------------------------------------------------------
// Elements: blocks, or the sentences / lines / token windows of a block too big for a chunk.

interface Element extends Range {
  tokens: number;
}

let sentenceSegmenter: Intl.Segmenter | null | undefined;

/** A fixed locale: the default locale differs between machines, and chunking must not. */
function getSentenceSegmenter(): Intl.Segmenter | null {
  if (sentenceSegmenter === undefined) {
    sentenceSegmenter = typeof Intl.Segmenter === 'function' ? new Intl.Segmenter('en', { granularity: 'sentence' }) : null;
  }
  return sentenceSegmenter;
}

const SENTENCE_FALLBACK = /[^.!?。！？\n]*(?:[.!?。！？]+["'”’)\]]*|\n|$)/g;

function sentenceRanges(src: string, start: number, end: number): Range[] {
  const text = src.slice(start, end);
  const out: Range[] = [];
  const segmenter = getSentenceSegmenter();
  if (segmenter) {
    for (const s of segmenter.segment(text)) out.push({ start: start + s.index, end: start + s.index + s.segment.length });
  } else {
    SENTENCE_FALLBACK.lastIndex = 0;
    for (let m = SENTENCE_FALLBACK.exec(text); m !== null && m[0] !== ''; m = SENTENCE_FALLBACK.exec(text)) {
      out.push({ start: start + m.index, end: start + m.index + m[0].length });
    }
  }
  return out;
}

function lineRanges(src: string, start: number, end: number): Range[] {
  const out: Range[] = [];
  let s = start;
  while (s < end) {
    let e = src.indexOf('\n', s);
    if (e === -1 || e > end) e = end;
    out.push({ start: s, end: e });
    s = e + 1;
  }
  return out;
}

/** The longest o200k_base token is 128 bytes, and a UTF-16 unit is at least one byte. */
const MAX_UNITS_PER_TOKEN = 128;

/** Tokens of `src[start, end)`, or Infinity when it is certainly over `budget` (then it is not counted: it is cut into windows, which are). */
function tokensUpTo(src: string, start: number, end: number, budget: number, memo: Memo | null): number {
  return end - start > budget * MAX_UNITS_PER_TOKEN ? Number.POSITIVE_INFINITY : countRange(src, start, end, memo);
}

function toElements(src: string, block: Block, budget: number, out: Element[], memo: Memo | null): void {
  const tokens = tokensUpTo(src, block.start, block.end, budget, memo);
  if (tokens <= budget) {
    out.push({ start: block.start, end: block.end, tokens });
    return;
  }
  const parts = block.kind === 'code' ? lineRanges(src, block.start, block.end) : sentenceRanges(src, block.start, block.end);
  for (const part of parts) {
    const r = trimRange(src, part.start, part.end);
    if (r.end <= r.start) continue;
    const t = tokensUpTo(src, r.start, r.end, budget, memo);
    if (t <= budget) out.push({ start: r.start, end: r.end, tokens: t });
    else for (const w of tokenWindows(src, r.start, r.end, budget, memo)) out.push(w);
  }
}

/**
 * Cuts `src[start, end)` into pieces of at most `budget` tokens along token boundaries, moving a
 * boundary back (or, for a lone partial token, forward) so no UTF-8 character is cut in two:
 * a 4-byte emoji or a CJK character can span two tokens.
 */
function tokenWindows(src: string, start: number, end: number, budget: number, memo: Memo | null = null): Element[] {
  const c = getCodec();
  const text = src.slice(start, end);
  const utf8 = Buffer.from(text, 'utf8');
  const ids = encode(text);
  const byteEnd: number[] = [0];
  for (const id of ids) byteEnd.push((byteEnd[byteEnd.length - 1] as number) + (c.bytesOf[id] as string).length);
  const onCharBoundary = (k: number): boolean => k === ids.length || ((utf8[byteEnd[k] as number] as number) & 0xc0) !== 0x80;

  const out: Element[] = [];
  let a = 0;
  let offset = start;
  while (a < ids.length) {
    let limit = budget;
    let previous = Number.POSITIVE_INFINITY;
    for (;;) {
      let b = Math.min(a + Math.max(1, limit), ids.length);
      while (b > a + 1 && !onCharBoundary(b)) b--;
      while (!onCharBoundary(b)) b++;
      const piece = utf8.toString('utf8', byteEnd[a] as number, byteEnd[b] as number);
      const r = trimRange(src, offset, offset + piece.length);
      const tokens = r.end > r.start ? countRange(src, r.start, r.end, memo) : 0;
      // Re-encoding a window on its own can differ from its share of the whole by a token or
      // two at the edges; shrink until the piece itself fits, unless shrinking would cut a
      // character (then the window is already as small as it can be).
      if (tokens > budget && b < previous && b - a > 1) {
        previous = b;
        limit = b - a - (tokens - budget);
        continue;
      }
      if (tokens > 0) out.push({ start: r.start, end: r.end, tokens });
      offset += piece.length;
      a = b;
      break;
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Packing.

interface Packed {
  text: string;
  tokens: number;
}

function packSections(src: string, sections: Section[], maxTokens: number, minTokens: number, memo: Memo | null): Packed[] {
  const out: Packed[] = [];
  for (const section of sections) {
    if (section.blocks.length > 0) packSection(src, section, maxTokens, minTokens, out, memo);
  }
  return out;
}

/** The separator between a heading prefix and the chunk body. */
const PREFIX_SEPARATOR = '\n\n';

/** How much of an element's opening decides its cut priority (see the module comment). */
const PRIORITY_SPAN = 64;

function packSection(src: string, section: Section, maxTokens: number, minTokens: number, out: Packed[], memo: Memo | null): void {
  const prefix = fitPrefix(section.prefix, Math.floor(maxTokens / 4));
  const budget = prefix === '' ? maxTokens : maxTokens - countTokens(prefix) - countTokens(PREFIX_SEPARATOR);

  const elements: Element[] = [];
  for (const block of section.blocks) toElements(src, block, budget, elements, memo);
  if (elements.length === 0) return;

  // Token position of each element's end, whitespace between elements included.
  const gaps: number[] = [0];
  const ends: number[] = [];
  let position = 0;
  for (let i = 0; i < elements.length; i++) {
    const el = elements[i] as Element;
    if (i > 0) {
      const gap = countRange(src, (elements[i - 1] as Element).end, el.start, memo);
      gaps.push(gap);
      position += gap;
    }
    position += el.tokens;
    ends.push(position);
  }
  const hashes = elements.map((el) => fnv1a(src, el.start, Math.min(el.end, el.start + PRIORITY_SPAN)));

  // A cut after element i when (hash, index) of i is the smallest among the elements ending
  // within minTokens of it: decided by local content only (see the module comment). The index
  // breaks ties between elements that open identically. The section's start and end count as
  // unbeatable neighbours, so a section shorter than twice minTokens stays whole and its first
  // and last chunks are not slivers; both distances depend only on the text between the cut and
  // that edge, so locality holds.
  const lastBoundary = elements.length - 2;
  const total = position;
  const isCut = (i: number): boolean => {
    const h = hashes[i] as number;
    const p = ends[i] as number;
    if (p < minTokens || total - p < minTokens) return false;
    for (let j = i - 1; j >= 0 && p - (ends[j] as number) < minTokens; j--) {
      if ((hashes[j] as number) <= h) return false;
    }
    for (let j = i + 1; j <= lastBoundary && (ends[j] as number) - p < minTokens; j++) {
      if ((hashes[j] as number) < h) return false;
    }
    return true;
  };

  let runStart = 0;
  for (let i = 0; i < elements.length; i++) {
    if (i === elements.length - 1 || isCut(i)) {
      packRun(src, prefix, elements, gaps, runStart, i, budget, maxTokens, out, memo);
      runStart = i + 1;
    }
  }
}

/** Elements first..last between two cuts: one chunk if they fit, else greedy from the start. */
function packRun(
  src: string,
  prefix: string,
  elements: Element[],
  gaps: number[],
  first: number,
  last: number,
  budget: number,
  maxTokens: number,
  out: Packed[],
  memo: Memo | null,
): void {
  let start = first;
  let size = (elements[first] as Element).tokens;
  for (let i = first + 1; i <= last; i++) {
    const add = (gaps[i] as number) + (elements[i] as Element).tokens;
    if (size + add > budget) {
      emit(src, prefix, elements.slice(start, i), budget, maxTokens, out, memo);
      start = i;
      size = (elements[i] as Element).tokens;
    } else size += add;
  }
  emit(src, prefix, elements.slice(start, last + 1), budget, maxTokens, out, memo);
}

/**
 * Emits one chunk after counting its real text: sums of parts are an estimate, because tokens
 * can merge across a join. In the rare case the whole is over the limit, the group is halved
 * (or its single element split finer) until every piece fits.
 */
function emit(src: string, prefix: string, group: Element[], budget: number, maxTokens: number, out: Packed[], memo: Memo | null): void {
  const firstEl = group[0] as Element;
  const lastEl = group[group.length - 1] as Element;
  const body = src.slice(firstEl.start, lastEl.end);
  const text = prefix === '' ? body : prefix + PREFIX_SEPARATOR + body;
  // A lone element without a prefix is exactly the text its count was made from: not counted twice.
  const tokens =
    prefix === ''
      ? group.length === 1
        ? firstEl.tokens
        : countRange(src, firstEl.start, lastEl.end, memo)
      : countJoined(text, prefix.length + PREFIX_SEPARATOR.length, src, firstEl.start, lastEl.end, memo);
  if (tokens <= maxTokens) {
    out.push({ text, tokens });
    return;
  }
  if (group.length > 1) {
    const mid = Math.ceil(group.length / 2);
    emit(src, prefix, group.slice(0, mid), budget, maxTokens, out, memo);
    emit(src, prefix, group.slice(mid), budget, maxTokens, out, memo);
    return;
  }
  const finer = Math.min(budget, firstEl.tokens) - (tokens - maxTokens);
  if (finer < 1) {
    // Unreachable while the prefix is capped at a quarter of maxTokens; dropping the prefix
    // keeps the size bound if it ever happens.
    const bare = countRange(src, firstEl.start, lastEl.end, memo);
    out.push({ text: body, tokens: bare });
    return;
  }
  for (const piece of tokenWindows(src, firstEl.start, firstEl.end, finer, memo)) emit(src, prefix, [piece], budget, maxTokens, out, memo);
}

/** The heading path, shortened to its deepest heading, then cut, if it exceeds `cap` tokens. */
function fitPrefix(prefix: string, cap: number): string {
  if (prefix === '' || countTokens(prefix) <= cap) return prefix;
  const at = prefix.lastIndexOf(' > ');
  const deepest = at === -1 ? prefix : prefix.slice(at + 3);
  if (countTokens(deepest) <= cap) return deepest;
  const first = tokenWindows(deepest, 0, deepest.length, cap)[0];
  return first === undefined ? '' : deepest.slice(first.start, first.end);
}

/** 32-bit FNV-1a over the UTF-16 code units of `s[start, end)`: an element's cut priority. */
function fnv1a(s: string, start: number, end: number): number {
  let h = 0x811c9dc5;
  for (let i = start; i < end; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}
