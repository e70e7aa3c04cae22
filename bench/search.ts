/**
 * Search benchmark of the embedded default index (SqliteChunkIndex: FTS5 BM25 + exact dense scan
 * + weighted score fusion for hybrid) over real text, with the HashedEmbedder (384 dims).
 *
 *   node --import tsx bench/search.ts [--sizes 10000,100000] [--queries 200] [--max-tokens 256] [--json]
 *
 * Corpus: the prose that exists offline on this machine — README.md files of the installed npm
 * packages, /usr/share/doc (Markdown, text, READMEs, changelogs, copyright files; .gz and binary
 * files skipped), Vim's help, CMake's reStructuredText help and /usr/lib/node_modules READMEs —
 * deduplicated by content, in a seeded shuffled file order, cut with the chunker service's own
 * `chunkText` (Markdown files as markdown, the rest as plain), grouped into documents of up to 10
 * chunks of one file, each document carrying one of 4 container tags.
 *
 * For each size (ascending, one index grown in place): insert via replaceDocument, then run the
 * same queries — sentences sampled from the indexed chunks with about a fifth of their words
 * dropped, half of them restricted to the source document's container tag — through
 * index.search (dense, keyword, hybrid; limit 10). The references, measured in the same run: a
 * brute-force exact scan in plain TypeScript over one Float32Array on the same vectors (recall@10
 * of the index's dense search is measured against it), and keyword search by FTS5 alone (the OR
 * of every query token, what the index did before its in-memory postings) on the same file, whose
 * hits the index's keyword hits must equal. Memory: a fresh child process opens the index
 * and runs the queries, so its RSS is the index's and not this process's corpus copy.
 *
 * Figures, not assertions.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, readdirSync, realpathSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir, totalmem } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { HashedEmbedder } from '../packages/embedder/src/hashed.js';
import type { ChunkInput, SearchHit, SearchQuery } from '../packages/chunk-index/src/port.js';
import { SqliteChunkIndex } from '../packages/chunk-index/src/sqlite.js';
import { annDir } from '../packages/chunk-index/src/ann.js';
import { dotAt } from '../packages/chunk-index/src/shared.js';
import { chunkText, type TextFormat } from '../services/chunker/src/handlers/chunk.js';
// Seeded, so every run samples the same corpus order and queries.
import { rng, shuffle } from '../test/retrieval/manpages.js';
import { commandArgs } from '@memstream/cli';

const DIM = 384;
const LIMIT = 10;
const TAGS = ['tag-a', 'tag-b', 'tag-c', 'tag-d'];
const CHUNKS_PER_DOC = 10;
/** Queries per mode the memory probe runs. */
const PROBE_QUERIES = 50;
const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

// ---------------------------------------------------------------------------------------------
// Small utilities

/** Nearest-rank percentile of an ascending array. */
function pct(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

interface Dist {
  p50: number;
  p95: number;
  mean: number;
}

function dist(ms: number[]): Dist {
  const s = [...ms].sort((a, b) => a - b);
  const round = (x: number) => Math.round(x * 1000) / 1000;
  return { p50: round(pct(s, 50)), p95: round(pct(s, 95)), mean: round(s.reduce((a, b) => a + b, 0) / Math.max(1, s.length)) };
}

const mb = (bytes: number) => Math.round((bytes / 2 ** 20) * 10) / 10;

function dirSize(dir: string): number {
  return safeList(dir).reduce((sum, f) => sum + fileSize(path.join(dir, f)), 0);
}

function fileSize(p: string): number {
  try {
    return statSync(p).size;
  } catch {
    return 0;
  }
}

// ---------------------------------------------------------------------------------------------
// Corpus

interface SourceFile {
  source: string;
  path: string;
  format: TextFormat;
  text: string;
}

const PROSE_NAME = /(\.(md|markdown|txt|rst)|\/(readme|news|todo|authors|thanks|copyright|changelog|history|changes)(\.[a-z]+)?)$/i;

function walk(dir: string, out: string[]): void {
  let entries;
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return;
  }
  for (const e of entries) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) walk(p, out);
    else if (e.isFile()) out.push(p);
  }
}

/** README.md of every package in a pnpm store (one per real file: dependency links repeat them). */
function pnpmReadmes(store: string): string[] {
  const out: string[] = [];
  let entries: string[];
  try {
    entries = readdirSync(store);
  } catch {
    return out;
  }
  for (const entry of entries) {
    const nm = path.join(store, entry, 'node_modules');
    let names: string[];
    try {
      names = readdirSync(nm);
    } catch {
      continue;
    }
    for (const name of names) {
      const dirs = name.startsWith('@') ? safeList(path.join(nm, name)).map((n) => path.join(nm, name, n)) : [path.join(nm, name)];
      for (const d of dirs) {
        for (const f of ['README.md', 'readme.md', 'Readme.md']) {
          try {
            out.push(realpathSync(path.join(d, f)));
            break;
          } catch {
            // no README under this spelling
          }
        }
      }
    }
  }
  return out;
}

function safeList(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

/** Every prose file found, deduplicated by content; text only (a NUL byte marks binary). */
function loadCorpus(): { files: SourceFile[]; bytes: number; bySource: Record<string, number> } {
  const candidates: { source: string; path: string }[] = [];
  const add = (source: string, paths: string[], keep: (p: string) => boolean) => {
    for (const p of paths.sort()) if (keep(p)) candidates.push({ source, path: p });
  };
  add('npm-readme', pnpmReadmes(path.join(REPO, 'node_modules/.pnpm')), () => true);
  const walked = (dir: string) => {
    const out: string[] = [];
    walk(dir, out);
    return out;
  };
  add('debian-doc', walked('/usr/share/doc'), (p) => PROSE_NAME.test(p) && !p.endsWith('.gz'));
  add('vim-help', walked('/usr/share/vim'), (p) => /\/doc\/[^/]+\.txt$/.test(p));
  add('cmake-help', walked('/usr/share').filter((p) => p.startsWith('/usr/share/cmake')), (p) => /\/Help\/.+\.rst$/.test(p));
  add('global-npm', walked('/usr/lib/node_modules'), (p) => /\.md$/i.test(p));

  const seen = new Set<string>();
  const files: SourceFile[] = [];
  const bySource: Record<string, number> = {};
  let bytes = 0;
  for (const c of candidates) {
    let buf: Buffer;
    try {
      const size = statSync(c.path).size;
      // Tiny files are boilerplate; multi-megabyte ones are data tables, not prose.
      if (size < 200 || size > 4_000_000) continue;
      buf = readFileSync(c.path);
    } catch {
      continue;
    }
    if (buf.subarray(0, 8192).includes(0)) continue;
    const hash = createHash('sha1').update(buf).digest('hex');
    if (seen.has(hash)) continue;
    seen.add(hash);
    bytes += buf.length;
    bySource[c.source] = (bySource[c.source] ?? 0) + 1;
    files.push({ source: c.source, path: c.path, format: /\.(md|markdown)$/i.test(c.path) ? 'markdown' : 'plain', text: buf.toString('utf8') });
  }
  return { files, bytes, bySource };
}

interface Doc {
  id: string;
  tag: string;
  tagNo: number;
  source: string;
  file: string;
  chunks: { hash: string; text: string }[];
}

/** Chunks files in shuffled order into documents of up to 10 chunks until `want` chunks exist. */
function buildDocs(files: SourceFile[], want: number, maxTokens: number, seed: number): { docs: Doc[]; chunks: number; filesUsed: number } {
  const order = shuffle(files, rng(seed));
  const docs: Doc[] = [];
  let chunks = 0;
  let filesUsed = 0;
  for (const f of order) {
    if (chunks >= want) break;
    filesUsed++;
    const cs = chunkText(f.text, f.format, { maxTokens });
    for (let i = 0; i < cs.length && chunks < want; i += CHUNKS_PER_DOC) {
      const part = cs.slice(i, Math.min(i + CHUNKS_PER_DOC, i + (want - chunks)));
      const n = docs.length;
      docs.push({
        id: `d${String(n).padStart(6, '0')}`,
        tag: TAGS[n % TAGS.length]!,
        tagNo: n % TAGS.length,
        source: f.source,
        file: path.basename(f.path),
        chunks: part.map((c) => ({ hash: c.hash, text: c.text })),
      });
      chunks += part.length;
    }
  }
  return { docs, chunks, filesUsed };
}

// ---------------------------------------------------------------------------------------------
// Queries

interface Query {
  text: string;
  vector: Float32Array;
  /** Restrict to this tag (index into TAGS), or -1 for no restriction. */
  tagNo: number;
}

const WORDY = /\p{L}{2,}/u;

/**
 * A sentence of an indexed chunk with about a fifth of its words dropped (at least one): a
 * query that shares most, not all, of its words with one chunk, as a user half-remembering it.
 */
function makeQueries(docs: Doc[], chunkCount: number, count: number, seed: number, embedder: HashedEmbedder): Query[] {
  const rnd = rng(seed);
  // Flat (doc, chunk) positions of the first `chunkCount` chunks.
  const where: [number, number][] = [];
  for (let d = 0; d < docs.length && where.length < chunkCount; d++) {
    for (let c = 0; c < docs[d]!.chunks.length && where.length < chunkCount; c++) where.push([d, c]);
  }
  const out: Query[] = [];
  for (let attempts = 0; out.length < count && attempts < count * 200; attempts++) {
    const [d, c] = where[Math.floor(rnd() * where.length)]!;
    const doc = docs[d]!;
    const sentences = doc.chunks[c]!.text
      .split(/(?<=[.!?])\s+|\n{2,}/)
      .map((s) => s.replace(/\s+/g, ' ').trim())
      .filter((s) => s.split(' ').filter((w) => WORDY.test(w)).length >= 6);
    if (sentences.length === 0) continue;
    const words = sentences[Math.floor(rnd() * sentences.length)]!.split(' ').slice(0, 30);
    const drop = Math.max(1, Math.round(words.length * 0.2));
    for (let k = 0; k < drop; k++) words.splice(Math.floor(rnd() * words.length), 1);
    const text = words.join(' ');
    const restricted = out.length % 2 === 1;
    out.push({ text, vector: embedder.embedOne(text), tagNo: restricted ? doc.tagNo : -1 });
  }
  return out;
}

function toSearch(q: Query, mode: SearchQuery['mode'], model: string): SearchQuery {
  return {
    mode,
    vector: q.vector,
    model,
    text: q.text,
    limit: LIMIT,
    ...(q.tagNo >= 0 ? { containerTags: [TAGS[q.tagNo]!] } : {}),
  };
}

// ---------------------------------------------------------------------------------------------
// The reference: an exact scan in plain TypeScript

/**
 * Top-k rows of `matrix` (rows 0..n-1) by dot product with `q`, restricted to rows whose tag is
 * `tagNo` unless it is -1; best first, lower row first among equal scores.
 */
function exactTopK(matrix: Float32Array, rowTags: Uint8Array, n: number, q: Float32Array, tagNo: number, k: number): { row: number; score: number }[] {
  const dim = q.length;
  const scores = new Float64Array(k).fill(Number.NEGATIVE_INFINITY);
  const rows = new Int32Array(k).fill(-1);
  let worst = Number.NEGATIVE_INFINITY;
  for (let row = 0; row < n; row++) {
    if (tagNo >= 0 && rowTags[row] !== tagNo) continue;
    const s = dotAt(matrix, row * dim, q);
    if (s <= worst) continue;
    // Insertion into a sorted array of k: k is 10, so this beats a heap.
    let j = k - 1;
    while (j > 0 && scores[j - 1]! < s) {
      scores[j] = scores[j - 1]!;
      rows[j] = rows[j - 1]!;
      j--;
    }
    scores[j] = s;
    rows[j] = row;
    worst = scores[k - 1]!;
  }
  const out: { row: number; score: number }[] = [];
  for (let j = 0; j < k; j++) if (rows[j]! >= 0) out.push({ row: rows[j]!, score: scores[j]! });
  return out;
}

// ---------------------------------------------------------------------------------------------
// The memory probe: a fresh process that only opens the index and searches

interface ProbeResult {
  rssBaseMb: number;
  rssOpenMb: number;
  rssAfterMb: number;
  firstDenseMs: number;
}

async function probe(dbPath: string, queriesFile: string): Promise<void> {
  const embedder = new HashedEmbedder({ dim: DIM });
  const specs = JSON.parse(readFileSync(queriesFile, 'utf8')) as { text: string; tagNo: number }[];
  const queries: Query[] = specs.map((s) => ({ ...s, vector: embedder.embedOne(s.text) }));
  const rssBase = process.memoryUsage().rss;
  const index = SqliteChunkIndex.open(dbPath);
  await index.stats();
  const rssOpen = process.memoryUsage().rss;
  // The keyword postings, as a gateway builds them in the background after its first keyword search.
  await index.prepareKeyword();
  const t = performance.now();
  await index.search(toSearch(queries[0]!, 'dense', embedder.model));
  const firstDenseMs = performance.now() - t;
  for (const mode of ['dense', 'keyword', 'hybrid'] as const) for (const q of queries) await index.search(toSearch(q, mode, embedder.model));
  const result: ProbeResult = {
    rssBaseMb: mb(rssBase),
    rssOpenMb: mb(rssOpen),
    rssAfterMb: mb(process.memoryUsage().rss),
    firstDenseMs: Math.round(firstDenseMs),
  };
  await index.close();
  process.stdout.write(JSON.stringify(result) + '\n');
}

// ---------------------------------------------------------------------------------------------

interface SizeResult {
  chunks: number;
  /** The graph: time to build (or catch up) and save it, its files, and how many timed dense searches (dense and hybrid) it answered. */
  ann: { buildSecs: number; fileMb: number; denseByGraph: number; denseExact: number };
  documents: number;
  insertSecs: number;
  insertChunksPerSec: number;
  diskMb: { db: number; wal: number };
  firstDenseMs: number;
  /** Dense searches each right after a one-document write (5 of them). */
  denseAfterWriteMs: Dist;
  queries: number;
  restrictedQueries: number;
  latencyMs: Record<'dense' | 'keyword' | 'hybrid' | 'exactScan' | 'keywordFts', { all: Dist; unrestricted: Dist; tagRestricted: Dist }>;
  /** The in-memory postings of frequent tokens, and how the timed keyword searches used them. */
  keywordPostings: {
    buildSecs: number;
    frequentTokens: number;
    minDocs: number;
    mb: number;
    byPostings: number;
    byFtsAlone: number;
    entriesPerSearch: number;
    rareRowsPerSearch: number;
    queriesDifferingFromFts: number;
  };
  recallAt10: { strict: number; tieAware: number; queriesWithTies: number; unrestricted: number; tagRestricted: number };
  avgHits: Record<'dense' | 'keyword' | 'hybrid', number>;
  memory: ProbeResult & { benchProcessRssMb: number };
  /** 1-minute load average before and after the timed queries: other work on the machine skews figures. */
  loadAvg: [number, number];
}

async function main(): Promise<void> {
  const USAGE = `usage: ./memstream bench search [--sizes 10000,100000] [--queries 200] [--max-tokens 256] [--seed 42] [--json] [--keep] [--probe …] [--queries-file F]
  
  the embedded index (FTS5 BM25 + exact dense scan + hybrid) over real text: latency per size.`;
  const { values } = commandArgs('bench search', USAGE, {
    options: {
      sizes: { type: 'string', default: '10000,100000' },
      queries: { type: 'string', default: '200' },
      'max-tokens': { type: 'string', default: '256' },
      seed: { type: 'string', default: '42' },
      json: { type: 'boolean', default: false },
      probe: { type: 'string' },
      'queries-file': { type: 'string' },
      keep: { type: 'boolean', default: false },
    },
  });
  if (values.probe) {
    await probe(values.probe, values['queries-file']!);
    return;
  }
  const sizes = values.sizes.split(',').map((s) => Number(s.trim())).filter((n) => Number.isInteger(n) && n > 0).sort((a, b) => a - b);
  const queryCount = Number(values.queries);
  const maxTokens = Number(values['max-tokens']);
  const seed = Number(values.seed);
  if (sizes.length === 0 || !(queryCount > 0)) throw new Error('--sizes needs positive integers and --queries a positive number');
  const log = (line: string) => process.stderr.write(`${line}\n`);
  const started = performance.now();
  const machine = `${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.versions.node}`;

  let t = performance.now();
  const corpus = loadCorpus();
  const readSecs = (performance.now() - t) / 1000;
  log(`corpus: ${corpus.files.length} distinct files, ${mb(corpus.bytes)} MB (${JSON.stringify(corpus.bySource)}) read in ${readSecs.toFixed(1)} s`);

  t = performance.now();
  const want = sizes[sizes.length - 1]!;
  const { docs, chunks: available, filesUsed } = buildDocs(corpus.files, want, maxTokens, seed);
  const chunkSecs = (performance.now() - t) / 1000;
  let chunkChars = 0;
  for (const d of docs) for (const c of d.chunks) chunkChars += c.text.length;
  log(`chunked ${filesUsed} files into ${available} chunks (max ${maxTokens} tokens, mean ${Math.round(chunkChars / available)} chars) in ${docs.length} documents in ${chunkSecs.toFixed(1)} s`);
  const runSizes = sizes.filter((n) => n <= available);
  if (runSizes.length < sizes.length) {
    log(`only ${available} chunks available from this machine's text: sizes ${sizes.filter((n) => n > available).join(', ')} skipped`);
  }

  // One vector per chunk, in document order: row r of `matrix` is the r-th chunk overall. The
  // index gets these very vectors, so the exact scan and the index score the same data.
  t = performance.now();
  const embedder = new HashedEmbedder({ dim: DIM });
  const matrix = new Float32Array(available * DIM);
  const rowTags = new Uint8Array(available);
  const rowKey: string[] = [];
  const docStart: number[] = [];
  let row = 0;
  for (const d of docs) {
    docStart.push(row);
    for (let c = 0; c < d.chunks.length; c++) {
      matrix.set(embedder.embedOne(d.chunks[c]!.text), row * DIM);
      rowTags[row] = d.tagNo;
      rowKey.push(`${d.id}#${c}`);
      row++;
    }
  }
  const embedSecs = (performance.now() - t) / 1000;
  log(`embedded ${available} chunks (${embedder.model}) in ${embedSecs.toFixed(1)} s, ${Math.round(available / embedSecs)} chunks/s`);

  const dir = mkdtempSync(path.join(tmpdir(), 'memstream-search-bench-'));
  const dbPath = path.join(dir, 'index.sqlite');
  const index = SqliteChunkIndex.open(dbPath);
  const results: SizeResult[] = [];
  try {
    let inserted = 0;
    let nextDoc = 0;
    let insertSecs = 0;
    for (const size of runSizes) {
      t = performance.now();
      while (inserted < size) {
        const d = docs[nextDoc]!;
        const base = docStart[nextDoc]!;
        const chunks: ChunkInput[] = d.chunks.map((c, i) => ({
          index: i,
          hash: c.hash,
          text: c.text,
          vector: matrix.subarray((base + i) * DIM, (base + i + 1) * DIM),
        }));
        await index.replaceDocument({
          documentId: d.id,
          revision: 1,
          model: embedder.model,
          dim: DIM,
          containerTags: [d.tag],
          metadata: { source: d.source, file: d.file },
          chunks,
        });
        inserted += chunks.length;
        nextDoc++;
      }
      insertSecs += (performance.now() - t) / 1000;
      const stats = await index.stats();
      // Whole documents go in, so the index can hold a few more chunks than `size`: the exact
      // scan covers exactly the rows the index holds.
      const n = inserted;
      log(`index holds ${stats.chunks} chunks in ${stats.documents} documents (insert so far ${insertSecs.toFixed(1)} s)`);

      let q0: number;
      const queries = makeQueries(docs, n, queryCount, seed + size, embedder);
      const restricted = queries.filter((q) => q.tagNo >= 0).length;

      // The nearest-neighbour graph: built in the background after the first dense search in a
      // gateway; here built (or caught up, for the second size) and saved before timing, and timed.
      q0 = performance.now();
      const graphs = await index.prepareAnn();
      const annBuildSecs = (performance.now() - q0) / 1000;
      const annStatsBefore = index.annStats();
      log(`nearest-neighbour graph ready in ${annBuildSecs.toFixed(1)} s: ${JSON.stringify(graphs)}`);

      // The keyword postings of the frequent tokens: built in the background after the first
      // keyword search in a gateway; here built before timing, and timed.
      q0 = performance.now();
      await index.prepareKeyword();
      const postingsBuildSecs = (performance.now() - q0) / 1000;
      const kwBefore = index.keywordPathStats();
      log(`keyword postings ready in ${postingsBuildSecs.toFixed(1)} s: ${kwBefore.frequentTokens} tokens in at least ${kwBefore.minDocs} chunks, ${mb(kwBefore.bytes)} MB`);
      // The reference: the same file, keyword search by FTS5 alone (the OR of every query token),
      // timed query by query beside the index so both see the same load; its hits must be the same.
      const ftsOnly = SqliteChunkIndex.open(dbPath, { postingsMinRows: Number.POSITIVE_INFINITY, vectorCacheBytes: 0 });

      // The first dense search after a write loads the vectors into memory: timed on its own.
      q0 = performance.now();
      await index.search(toSearch(queries[0]!, 'dense', embedder.model));
      const firstDenseMs = performance.now() - q0;

      // Warm-up (not recorded): statement preparation, FTS5 pages into the page cache, JIT.
      for (const q of queries.slice(0, 20)) {
        for (const mode of ['dense', 'keyword', 'hybrid'] as const) await index.search(toSearch(q, mode, embedder.model));
        await ftsOnly.search(toSearch(q, 'keyword', embedder.model));
        exactTopK(matrix, rowTags, n, q.vector, q.tagNo, LIMIT);
      }
      const kwWarm = index.keywordPathStats();

      const times: Record<'dense' | 'keyword' | 'hybrid' | 'exactScan' | 'keywordFts', number[]> = { dense: [], keyword: [], hybrid: [], exactScan: [], keywordFts: [] };
      let keywordDiffer = 0;
      const hits: Record<'dense' | 'keyword' | 'hybrid', number> = { dense: 0, keyword: 0, hybrid: 0 };
      const denseHits: SearchHit[][] = [];
      const exact: { row: number; score: number }[][] = [];
      const loadBefore = loadavg()[0]!;
      // Query by query, every method in turn: background load on the machine then falls on all
      // methods alike instead of on whichever happened to run during it.
      for (const q of queries) {
        for (const mode of ['dense', 'keyword', 'hybrid'] as const) {
          q0 = performance.now();
          const h = await index.search(toSearch(q, mode, embedder.model));
          times[mode].push(performance.now() - q0);
          hits[mode] += h.length;
          if (mode === 'dense') denseHits.push(h);
          if (mode === 'keyword') {
            q0 = performance.now();
            const ref = await ftsOnly.search(toSearch(q, 'keyword', embedder.model));
            times.keywordFts.push(performance.now() - q0);
            // The same chunks with the same scores (ties at the last place may differ in which).
            const key = (x: SearchHit) => `${x.score.toFixed(9)} ${x.documentId}#${x.index}`;
            const last = ref.at(-1)?.score ?? 0;
            const above = (xs: SearchHit[]) => xs.filter((x) => x.score - last > 1e-9).map(key).sort().join('|');
            if (h.length !== ref.length || above(h) !== above(ref) || h.some((x, i) => Math.abs(x.score - ref[i]!.score) > 1e-9)) keywordDiffer++;
          }
        }
        q0 = performance.now();
        exact.push(exactTopK(matrix, rowTags, n, q.vector, q.tagNo, LIMIT));
        times.exactScan.push(performance.now() - q0);
      }
      const loadAfter = loadavg()[0]!;
      const kwAfter = index.keywordPathStats();
      await ftsOnly.close();
      const annStatsAfter = index.annStats();
      const annAnswered = annStatsAfter.ann - annStatsBefore.ann;
      const exactAnswered = annStatsAfter.exact - annStatsBefore.exact;

      // Recall@10 of the index's dense hits against the exact scan. Strict: the same chunks.
      // Tie-aware: a hit also counts when its score equals the exact 10th score (the corpus has
      // duplicate chunks — the same licence paragraph in many files — and which of several equal
      // vectors fills the last places is arbitrary).
      let strict = 0;
      let tieAware = 0;
      let withTies = 0;
      const strictBy = { unrestricted: 0, tagRestricted: 0 };
      queries.forEach((query, qi) => {
        const truth = exact[qi]!;
        const got = denseHits[qi]!;
        const side = query.tagNo >= 0 ? 'tagRestricted' : 'unrestricted';
        if (truth.length === 0) {
          strict += 1;
          tieAware += 1;
          strictBy[side] += 1;
          return;
        }
        const truthKeys = new Set(truth.map((x) => rowKey[x.row]));
        const kth = truth[truth.length - 1]!.score;
        if (truth.filter((x) => Math.abs(x.score - kth) <= 1e-6).length > 1) withTies++;
        let s = 0;
        let a = 0;
        for (const h of got) {
          const inTruth = truthKeys.has(`${h.documentId}#${h.index}`);
          if (inTruth) s++;
          if (inTruth || h.score >= kth - 1e-6) a++;
        }
        strict += s / truth.length;
        strictBy[side] += s / truth.length;
        tieAware += Math.min(a, truth.length) / truth.length;
      });

      // A search right after a write: any commit makes the in-memory vector matrix stale, so the
      // next dense search reloads it. One document (10 chunks) rewritten, then one dense search.
      const afterWrite: number[] = [];
      for (let k = 0; k < 5; k++) {
        const d = docs[k]!;
        await index.replaceDocument({
          documentId: d.id,
          revision: 2 + k + results.length * 10,
          model: embedder.model,
          dim: DIM,
          containerTags: [d.tag],
          metadata: { source: d.source, file: d.file, rewritten: k },
          chunks: d.chunks.map((c, i) => ({ index: i, hash: c.hash, text: c.text, vector: matrix.subarray((docStart[k]! + i) * DIM, (docStart[k]! + i + 1) * DIM) })),
        });
        q0 = performance.now();
        await index.search(toSearch(queries[k]!, 'dense', embedder.model));
        afterWrite.push(performance.now() - q0);
      }

      // The index's memory, measured in a process of its own (a subset of the queries: the
      // vector matrix dominates, and every query again would double the run time).
      const queriesFile = path.join(dir, 'queries.json');
      writeFileSync(queriesFile, JSON.stringify(queries.slice(0, PROBE_QUERIES).map((q) => ({ text: q.text, tagNo: q.tagNo }))));
      const probeOut = execFileSync(
        process.execPath,
        ['--import', 'tsx', fileURLToPath(import.meta.url), '--probe', dbPath, '--queries-file', queriesFile],
        { cwd: REPO, encoding: 'utf8', maxBuffer: 1 << 20 },
      );
      const probeResult = JSON.parse(probeOut.trim().split('\n').pop()!) as ProbeResult;

      const split = (mode: keyof typeof times) => ({
        all: dist(times[mode]),
        unrestricted: dist(times[mode].filter((_, i) => queries[i]!.tagNo < 0)),
        tagRestricted: dist(times[mode].filter((_, i) => queries[i]!.tagNo >= 0)),
      });
      results.push({
        chunks: stats.chunks,
        ann: {
          buildSecs: round1(annBuildSecs),
          fileMb: mb(dirSize(annDir(dbPath))),
          denseByGraph: annAnswered,
          denseExact: exactAnswered,
        },
        documents: stats.documents,
        insertSecs: Math.round(insertSecs * 10) / 10,
        insertChunksPerSec: Math.round(stats.chunks / insertSecs),
        diskMb: { db: mb(fileSize(dbPath)), wal: mb(fileSize(`${dbPath}-wal`)) },
        firstDenseMs: Math.round(firstDenseMs),
        denseAfterWriteMs: dist(afterWrite),
        queries: queries.length,
        restrictedQueries: restricted,
        latencyMs: { dense: split('dense'), keyword: split('keyword'), hybrid: split('hybrid'), exactScan: split('exactScan'), keywordFts: split('keywordFts') },
        keywordPostings: {
          buildSecs: round1(postingsBuildSecs),
          frequentTokens: kwBefore.frequentTokens,
          minDocs: kwBefore.minDocs,
          mb: mb(kwBefore.bytes),
          // Timed keyword and hybrid searches answered with the postings, and by FTS5 alone.
          byPostings: kwAfter.postings - kwWarm.postings,
          byFtsAlone: kwAfter.fts - kwWarm.fts,
          entriesPerSearch: Math.round((kwAfter.entries - kwWarm.entries) / Math.max(1, kwAfter.postings - kwWarm.postings)),
          rareRowsPerSearch: Math.round((kwAfter.rareRows - kwWarm.rareRows) / Math.max(1, kwAfter.postings - kwWarm.postings)),
          queriesDifferingFromFts: keywordDiffer,
        },
        recallAt10: {
          strict: Math.round((strict / queries.length) * 10000) / 10000,
          tieAware: Math.round((tieAware / queries.length) * 10000) / 10000,
          queriesWithTies: withTies,
          unrestricted: Math.round((strictBy.unrestricted / Math.max(1, queries.length - restricted)) * 10000) / 10000,
          tagRestricted: Math.round((strictBy.tagRestricted / Math.max(1, restricted)) * 10000) / 10000,
        },
        avgHits: {
          dense: Math.round((hits.dense / queries.length) * 10) / 10,
          keyword: Math.round((hits.keyword / queries.length) * 10) / 10,
          hybrid: Math.round((hits.hybrid / queries.length) * 10) / 10,
        },
        memory: { ...probeResult, benchProcessRssMb: mb(process.memoryUsage().rss) },
        loadAvg: [round1(loadBefore), round1(loadAfter)],
      });
    }
  } finally {
    await index.close();
    if (values.keep) log(`index kept at ${dbPath}`);
    else rmSync(dir, { recursive: true, force: true });
  }

  const totalSecs = (performance.now() - started) / 1000;
  const summary = {
    bench: 'search',
    machine,
    index: 'SqliteChunkIndex (BM25 over stems and bigrams: frequent tokens from in-memory postings, rare ones by FTS5 + HNSW graph from 10k candidate rows (40k restricted), exact scan below + weighted score fusion)',
    embedder: `HashedEmbedder ${DIM}`,
    corpus: {
      files: corpus.files.length,
      mb: mb(corpus.bytes),
      bySource: corpus.bySource,
      chunkMaxTokens: maxTokens,
      chunkMeanChars: Math.round(chunkChars / available),
      chunksAvailable: available,
    },
    phasesSecs: { read: round1(readSecs), chunk: round1(chunkSecs), embed: round1(embedSecs), total: round1(totalSecs) },
    limit: LIMIT,
    sizes: results,
  };

  const f = (d: Dist) => `${d.p50.toFixed(2).padStart(8)} ${d.p95.toFixed(2).padStart(8)}`;
  const lines = [
    `memstream search bench — ${machine}`,
    `corpus: ${corpus.files.length} files, ${mb(corpus.bytes)} MB of real text; chunks of ≤ ${maxTokens} tokens (mean ${summary.corpus.chunkMeanChars} chars); ${embedder.model}; limit ${LIMIT}`,
    `phases: read ${round1(readSecs)} s, chunk ${round1(chunkSecs)} s, embed ${round1(embedSecs)} s, total ${round1(totalSecs)} s`,
  ];
  for (const r of results) {
    lines.push(
      '',
      `${r.chunks} chunks / ${r.documents} documents — insert ${r.insertSecs} s cumulative (${r.insertChunksPerSec} chunks/s); disk ${r.diskMb.db} MB + WAL ${r.diskMb.wal} MB`,
      `  ${r.queries} queries (${r.restrictedQueries} restricted to one of ${TAGS.length} tags); load average ${r.loadAvg[0]} → ${r.loadAvg[1]} during them`,
      `  nearest-neighbour graph (HNSW, M 16, efConstruction 100, efSearch 400): built or caught up and saved in ${r.ann.buildSecs} s, ${r.ann.fileMb} MB on disk; it answered ${r.ann.denseByGraph} of the timed dense searches (dense and hybrid), an exact scan ${r.ann.denseExact} (restrictions to fewer than 40,000 rows)`,
      `  first dense search after the bulk insert ${r.firstDenseMs} ms; dense search right after a one-document write p50 ${r.denseAfterWriteMs.p50.toFixed(0)} ms (the cached vectors catch up from the change log; a tag-restricted one also asks SQL for the tag's rows again)`,
      `  ms                         all p50   all p95   unres p50 unres p95  tag p50   tag p95   hits/q`,
    );
    for (const [name, key] of [
      ['index dense (ANN)', 'dense'],
      ['index keyword', 'keyword'],
      ['keyword, FTS5 alone (ref.)', 'keywordFts'],
      ['index hybrid', 'hybrid'],
      ['exact scan (TS, ref.)', 'exactScan'],
    ] as const) {
      const l = r.latencyMs[key];
      const h = key === 'exactScan' || key === 'keywordFts' ? '' : String(r.avgHits[key]);
      lines.push(`  ${name.padEnd(24)} ${f(l.all)}  ${f(l.unrestricted)}  ${f(l.tagRestricted)}  ${h.padStart(6)}`);
    }
    const k = r.keywordPostings;
    lines.push(
      `  keyword postings: ${k.frequentTokens} frequent tokens (in ≥ ${k.minDocs} chunks), ${k.mb} MB, built in ${k.buildSecs} s; the timed keyword and hybrid searches scored ${k.entriesPerSearch} postings entries and ${k.rareRowsPerSearch} FTS5 rows (rare tokens) each (${k.byPostings} by postings, ${k.byFtsAlone} by FTS5 alone); ${k.queriesDifferingFromFts} of ${r.queries} queries' keyword hits differ from FTS5 alone`,
      `  recall@10 of index dense (ANN) vs exact scan: ${r.recallAt10.strict} (no filter ${r.recallAt10.unrestricted}, tag filter ${r.recallAt10.tagRestricted}; tie-aware ${r.recallAt10.tieAware}; ${r.recallAt10.queriesWithTies} queries with a tie at rank 10)`,
      `  memory: index in a fresh process: RSS ${r.memory.rssBaseMb} MB before open → ${r.memory.rssOpenMb} MB open → ${r.memory.rssAfterMb} MB after ${3 * Math.min(r.queries, PROBE_QUERIES)} searches (its first dense search ${r.memory.firstDenseMs} ms); this bench process ${r.memory.benchProcessRssMb} MB`,
    );
  }
  if (!values.json) process.stdout.write(lines.join('\n') + '\n');
  process.stdout.write(JSON.stringify(summary) + '\n');
}

function round1(x: number): number {
  return Math.round(x * 10) / 10;
}

main().catch((err) => {
  process.stderr.write(`bench failed: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
