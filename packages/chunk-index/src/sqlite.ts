import { mkdirSync } from 'node:fs';
import { endianness } from 'node:os';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import type { FilterExpr, Metadata } from '@memstream/contracts';
import type { ChunkIndex, ReplaceDocumentInput, SearchHit, SearchQuery, StoredChunk } from './port.js';
import { AnnGraph, annFile } from './ann.js';
import { FrequentPostings, ftsTokens } from './postings.js';
import { MAX_QUERY_TERMS, STOPWORDS, analyseQuery, documentTerms, tokenize } from './analyse.js';
import {
  DEFAULT_FUSION,
  TopK,
  dotAt,
  fuseScores,
  hybridDepth,
  metadataFacets,
  validateQuery,
  validateReplace,
} from './shared.js';

const SCHEMA_VERSION = 5;
const DEFAULT_VECTOR_CACHE_BYTES = 256 * 1024 * 1024;
const LITTLE_ENDIAN = endianness() === 'LE';

/** A SQL fragment with its positional parameters, in the order their `?` appear. */
export interface Sql {
  sql: string;
  params: unknown[];
}

/*
 * Schema notes.
 * - `documents` holds one row per document with its tags and metadata as JSON (the record of truth
 *   returned with hits). Two side tables make the pushdown exact and indexable:
 *   `document_tags` (one row per tag) and `document_meta` (one row per metadata value, with
 *   `String(v)`, its JS lower-case, and the JS `Number()` of numeric values precomputed at write
 *   time). Evaluating filters with json_extract alone cannot match `matchesFilter` exactly:
 *   SQLite formats reals differently from JS `String()` (0.1+0.2 → '0.3' vs
 *   '0.30000000000000004'), parses numbers differently from JS `Number()` (' 0x10 ' → 0 vs 16),
 *   and its lower() folds ASCII only.
 * - `chunks.vector` is the float32 little-endian vector blob; search reads it as a Float32Array
 *   view without copying.
 * - `chunks_fts` is an FTS5 index with external content (`chunks.text`), kept in sync by
 *   triggers, so every write to `chunks` updates it inside the same transaction.
 */
const SCHEMA = `
CREATE TABLE IF NOT EXISTS documents (
  document_id    TEXT PRIMARY KEY,
  revision       INTEGER NOT NULL,
  model          TEXT NOT NULL,
  dim            INTEGER NOT NULL,
  container_tags TEXT NOT NULL,
  metadata       TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS document_tags (
  document_id TEXT NOT NULL,
  tag         TEXT NOT NULL,
  PRIMARY KEY (document_id, tag)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS document_tags_by_tag ON document_tags (tag, document_id);
CREATE TABLE IF NOT EXISTS document_meta (
  document_id TEXT NOT NULL,
  key         TEXT NOT NULL,
  kind        TEXT NOT NULL,
  str         TEXT NOT NULL,
  str_lower   TEXT NOT NULL,
  num         REAL
);
CREATE INDEX IF NOT EXISTS document_meta_by_doc ON document_meta (document_id, key);
CREATE TABLE IF NOT EXISTS chunks (
  rowid       INTEGER PRIMARY KEY,
  document_id TEXT NOT NULL,
  idx         INTEGER NOT NULL,
  hash        TEXT NOT NULL,
  text        TEXT NOT NULL,
  model       TEXT NOT NULL,
  dim         INTEGER NOT NULL,
  vector      BLOB NOT NULL,
  UNIQUE (document_id, idx)
);
CREATE INDEX IF NOT EXISTS chunks_by_model ON chunks (model, dim);
-- Schema 3: the keyword index holds analysed text, made in JS by ms_terms / ms_bigrams (functions
-- every connection registers): Porter2 stems, and bigrams of content words joined by '_'.
-- Contentless (the text is in chunks); contentless_delete lets the triggers delete by rowid.
-- Schema 5: no insert trigger. FTS5 writes the entries it holds in memory out as a new segment at
-- every statement savepoint, which each statement with triggers opens (the insert of a chunk
-- row): every chunk became a segment of its own, to be merged again and again. replaceDocuments
-- adds a batch's entries after its other statements, by single-row inserts, which open none.
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5 (
  terms, bigrams, content = '', contentless_delete = 1, tokenize = "unicode61 remove_diacritics 2 tokenchars '_'"
);
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts_vocab USING fts5vocab (chunks_fts, 'row');
CREATE TRIGGER IF NOT EXISTS chunks_fts_delete AFTER DELETE ON chunks BEGIN
  DELETE FROM chunks_fts WHERE rowid = old.rowid;
END;
CREATE TRIGGER IF NOT EXISTS chunks_fts_update AFTER UPDATE OF text ON chunks BEGIN
  DELETE FROM chunks_fts WHERE rowid = old.rowid;
  INSERT INTO chunks_fts (rowid, terms, bigrams) VALUES (new.rowid, ms_terms(new.text), ms_bigrams(new.text));
END;
-- Schema 2: every chunk row added or removed, in commit order, so a reader holding the vectors
-- in memory applies what changed instead of reading them all again (op 1 = added, 0 = removed).
-- AUTOINCREMENT: seq never goes back, even when the newest rows are pruned.
CREATE TABLE IF NOT EXISTS chunk_changes (
  seq         INTEGER PRIMARY KEY AUTOINCREMENT,
  op          INTEGER NOT NULL,
  chunk_rowid INTEGER NOT NULL,
  model       TEXT NOT NULL,
  dim         INTEGER NOT NULL
);
CREATE TRIGGER IF NOT EXISTS chunk_changes_insert AFTER INSERT ON chunks BEGIN
  INSERT INTO chunk_changes (op, chunk_rowid, model, dim) VALUES (1, new.rowid, new.model, new.dim);
END;
CREATE TRIGGER IF NOT EXISTS chunk_changes_delete AFTER DELETE ON chunks BEGIN
  INSERT INTO chunk_changes (op, chunk_rowid, model, dim) VALUES (0, old.rowid, old.model, old.dim);
END;
CREATE TRIGGER IF NOT EXISTS chunk_changes_update AFTER UPDATE OF vector, model, dim ON chunks BEGIN
  INSERT INTO chunk_changes (op, chunk_rowid, model, dim) VALUES (0, old.rowid, old.model, old.dim);
  INSERT INTO chunk_changes (op, chunk_rowid, model, dim) VALUES (1, new.rowid, new.model, new.dim);
END;
-- Schema 4: a random identity of this file. A nearest-neighbour graph saved beside it (ann.ts)
-- records it, so a graph is never used with another file (a rebuilt index swapped in by name).
CREATE TABLE IF NOT EXISTS index_identity (id TEXT NOT NULL);
INSERT INTO index_identity (id) SELECT lower(hex(randomblob(16))) WHERE NOT EXISTS (SELECT 1 FROM index_identity);
`;

/**
 * Schema 2 → 3: the keyword index changes from FTS5 over the raw text to analysed text. The old
 * table and its triggers go; SCHEMA makes the new ones and every chunk is analysed again.
 */
const DROP_SCHEMA_2_FTS = `
DROP TRIGGER IF EXISTS chunks_fts_insert;
DROP TRIGGER IF EXISTS chunks_fts_delete;
DROP TRIGGER IF EXISTS chunks_fts_update;
DROP TABLE IF EXISTS chunks_fts;
`;

/** Weight of the bigram column in BM25 against 1 for the stems: a small proximity boost. */
export const BIGRAM_WEIGHT = 0.3;

/** One analysis per text although the update trigger asks for terms and bigrams separately. */
let lastAnalysed: { text: string; terms: string; bigrams: string } | null = null;
function analysed(text: string): { terms: string; bigrams: string } {
  if (lastAnalysed?.text !== text) {
    const a = documentTerms(text);
    lastAnalysed = { text, terms: a.terms.join(' '), bigrams: a.bigrams.join(' ') };
  }
  return lastAnalysed;
}

/** The chunk rows a batch inserted and kept (rowid → text), whose keyword index entries addTerms writes. */
type AddedChunks = Map<number, string>;

/** Changes kept in chunk_changes; a reader further behind than this reads every vector again. */
const CHANGES_KEPT = 100_000;

/**
 * A dense copy of one model's vectors (row i of `data` belongs to `rowids[i]`), so a scan is a
 * tight loop over one Float32Array instead of one Buffer allocation per row from SQLite.
 */
interface VectorMatrix {
  /** `${data_version}:${writeSeq}` when loaded or last caught up: any commit since makes it stale. */
  token: string;
  /** The last chunk_changes seq it reflects. */
  seq: number;
  /** Rows in use; the arrays have room for more (they grow by doubling). */
  size: number;
  rowids: Float64Array;
  data: Float32Array;
  /** rowid → row. */
  pos: Map<number, number>;
  /**
   * The rows that pass a restriction (tags, ids, filter), by the restriction's SQL and
   * parameters. Valid while the token is: any commit changes it, and catching up clears these. Tenants search their own tags again and again; asking
   * SQLite once per tag and version instead of on every query took a tag-filtered dense search at
   * 100k chunks from ~200 ms (the SQL) to the cost of scoring the tag's rows.
   */
  restricted: Map<string, Restricted>;
}

/** The rows of the matrix that pass one restriction, and (made when a graph search needs it) their rowids as a set. */
interface Restricted {
  rows: Int32Array;
  ids?: Set<number>;
}

/**
 * The nearest-neighbour graph of one (model, dim), kept at the change-log position `seq` like a
 * matrix. `busy` while a background load, build or catch-up runs (one at a time).
 */
interface AnnState {
  graph: AnnGraph | null;
  seq: number;
  busy: boolean;
  /** Changes applied since the graph was last written to its file. */
  unsaved: number;
  savedAt: number;
}

/**
 * Below this many candidate rows (the model's, or those passing a tag or filter restriction) a
 * dense search scans them exactly: ~4 ms at 10k × 384 on one core, and exact. Above it the graph
 * answers (when built), and its candidates are rescored exactly from the matrix.
 */
const DEFAULT_ANN_MIN_ROWS = 10_000;
/** A restricted search uses the graph from this many times annMinRows restricted rows. */
const ANN_FILTERED_MIN_FACTOR = 4;
/** A graph this far behind the change log is caught up in the background, not inside a search. */
const ANN_SYNC_CATCH_UP = 512;
/** A graph of at most this many vectors is built inside the search that needs it; larger ones in the background. */
const ANN_SYNC_BUILD = 1_000;
/** A background build or catch-up works in slices of this long, so searches keep being answered. */
const ANN_SLICE_MS = 25;
/** Rebuild a graph when this share of its points are deleted ones (they slow the walk down). */
const ANN_MAX_DELETED_SHARE = 0.3;
/** Write a graph to its file after this many changes, at most once a minute (and on close). */
const ANN_SAVE_CHANGES = 5_000;
const ANN_SAVE_INTERVAL_MS = 60_000;

/**
 * From this many chunks a keyword search scores the frequent tokens from in-memory postings
 * (postings.ts) and asks FTS5 only for the rare ones; below it FTS5 evaluates the whole OR
 * (a few ms at 10k chunks).
 */
const DEFAULT_POSTINGS_MIN_ROWS = 10_000;
/** A token is frequent (its postings held in memory) when at least this share of the chunks hold it, and at least 2. */
const POSTINGS_FREQUENT_SHARE = 1 / 2000;
/** Postings of at most this many chunks are built inside the search that needs them; more in the background. */
const POSTINGS_SYNC_BUILD = 2_000;
/** Postings this far behind the change log are caught up in the background, not inside a search. */
const POSTINGS_SYNC_CATCH_UP = 512;

/** What keyword search remembers of one snapshot (`token`): any commit makes a new one. */
interface KeywordStats {
  token: string;
  /** Chunks in the index. */
  total: number;
  /**
   * FTS5's own row count and average row length (stems plus bigrams), as bm25() uses them: its
   * "averages" record, which deletes from a contentless_delete table leave as they were, so
   * after deletes they are those of every row ever indexed.
   */
  ftsRows: number;
  ftsAvgLen: number;
  /** Chunks holding a stem or bigram, by token. */
  docs: Map<string, number>;
  /** Whether the file holds chunks of a model other than the key. */
  otherModel: Map<string, boolean>;
  /** Rowids passing a restriction, by restriction. */
  allowed: Map<string, Set<number>>;
}

/** Restrictions whose rows a matrix remembers; the oldest is forgotten first. */
const RESTRICTED_ROWS_CACHE = 64;

interface DocRow {
  document_id: string;
  revision: number;
  model: string;
  dim: number;
  container_tags: string;
  metadata: string;
}

interface ChunkKeyRow {
  rowid: number;
  idx: number;
  hash: string;
}

interface HitRow {
  rowid: number;
  document_id: string;
  idx: number;
  text: string;
  container_tags: string;
  metadata: string;
}

/**
 * Compile a filter into a SQL boolean over the `documents` row aliased `d`, with the semantics of
 * `matchesFilter`: a condition holds when some stored value of its key satisfies it; `negate`
 * inverts that, so a negated condition also holds when the key is missing.
 */
export function compileFilterSql(e: FilterExpr): Sql {
  if (e.op === 'and' || e.op === 'or') {
    // The empty AND is true and the empty OR false, as with Array.every / Array.some.
    if (e.items.length === 0) return { sql: e.op === 'and' ? '1' : '0', params: [] };
    const parts = e.items.map(compileFilterSql);
    return {
      sql: `(${parts.map((p) => p.sql).join(e.op === 'and' ? ' AND ' : ' OR ')})`,
      params: parts.flatMap((p) => p.params),
    };
  }
  const hit = compileCondition(e);
  return e.negate ? { sql: `NOT ${hit.sql}`, params: hit.params } : hit;
}

function compileCondition(c: FilterExpr & { op: 'cond' }): Sql {
  const col = c.ignoreCase ? 'm.str_lower' : 'm.str';
  const value = c.ignoreCase ? c.value.toLowerCase() : c.value;
  let pred: Sql;
  switch (c.filterType) {
    case 'numeric': {
      // Number() of the target as in matchesFilter: a non-numeric target matches nothing.
      const target = Number(c.value);
      if (Number.isNaN(target)) return { sql: '0', params: [] };
      // The operator comes from a closed enum ('>', '<', '>=', '<=', '='), all valid SQL.
      pred = { sql: `m.num IS NOT NULL AND m.num ${c.numericOperator} ?`, params: [target] };
      break;
    }
    case 'array_contains':
      pred = { sql: `m.kind = 'array' AND ${col} = ?`, params: [value] };
      break;
    case 'string_contains':
      // instr() is an exact substring test like String.prototype.includes (instr(x, '') = 1).
      pred = { sql: `m.kind = 'string' AND instr(${col}, ?) > 0`, params: [value] };
      break;
    case 'metadata':
      pred = { sql: `${col} = ?`, params: [value] };
      break;
  }
  return {
    sql: `EXISTS (SELECT 1 FROM document_meta m WHERE m.document_id = d.document_id AND m.key = ? AND ${pred.sql})`,
    params: [c.key, ...pred.params],
  };
}

/**
 * Turn free text into a safe FTS5 query of this index (analysed columns): its stems and bigrams
 * (see analyse.ts), each double-quoted (a quoted string is a phrase, so operators, `*`, `NEAR(`
 * and column filters in the input lose their meaning), joined with OR. Stems contain only
 * letters, digits and marks, bigrams also `_`, so they never contain a quote. Returns null when
 * the text has no words.
 */
export function toStemmedFtsQuery(text: string): string | null {
  const { terms, bigrams } = analyseQuery(text);
  return terms.length === 0 ? null : [...terms, ...bigrams].map((t) => `"${t}"`).join(' OR ');
}

/**
 * The same for an FTS5 table over raw text with its own tokenizer (the memory store's, which
 * stems with FTS5's `porter`): the query's distinct words, stop words left out, unstemmed.
 */
export function toFtsQuery(text: string): string | null {
  const words = [...new Set(tokenize(text))];
  const content = words.filter((w) => !STOPWORDS.has(w));
  const terms = (content.length ? content : words).slice(0, MAX_QUERY_TERMS);
  return terms.length === 0 ? null : terms.map((t) => `"${t}"`).join(' OR ');
}

/** FTS5's BM25 idf of a term found in `n` of `total` rows (bm25() floors it at 1e-6 the same way). */
function bm25Idf(total: number, n: number): number {
  const idf = Math.log((total - n + 0.5) / (n + 0.5));
  return idf > 1e-6 ? idf : 1e-6;
}

/** Serialise a vector as float32 little-endian bytes. */
function vectorBlob(v: Float32Array): Buffer {
  if (LITTLE_ENDIAN) return Buffer.from(v.buffer, v.byteOffset, v.byteLength);
  const b = Buffer.alloc(v.length * 4);
  for (let i = 0; i < v.length; i++) b.writeFloatLE(v[i]!, i * 4);
  return b;
}

/** Read a vector blob; a zero-copy view when the bytes are aligned and the host is little-endian. */
function blobVector(b: Buffer): Float32Array {
  if (LITTLE_ENDIAN && b.byteOffset % 4 === 0) return new Float32Array(b.buffer, b.byteOffset, b.byteLength >> 2);
  const out = new Float32Array(b.byteLength >> 2);
  for (let i = 0; i < out.length; i++) out[i] = b.readFloatLE(i * 4);
  return out;
}

/**
 * The chunk index in one SQLite file: FTS5 for keywords and an exact dot-product scan for dense
 * vectors. One writer process (the indexer) and any number of reader processes (the gateway)
 * share the file: WAL lets readers proceed while the writer commits, and busy_timeout makes the
 * short write locks wait rather than fail.
 */
export class SqliteChunkIndex implements ChunkIndex {
  private closed = false;
  private readonly stmts;
  /** Search statements by SQL text: their shape varies only with which restrictions are present. */
  private readonly searchStmts = new Map<string, Database.Statement<unknown[], unknown>>();

  /** Vectors of one (model, dim) held in memory, valid while `token` is current. */
  private readonly matrices = new Map<string, VectorMatrix>();
  /** Bumped after each of our own commits: data_version only reflects other connections' commits. */
  private writeSeq = 0;
  /** How the vector cache was kept current: whole loads, and catch-ups from the change log. */
  private readonly cacheCounts = { loads: 0, catchUps: 0 };
  /** Nearest-neighbour graphs by (dim, model), as the matrices. */
  private readonly anns = new Map<string, AnnState>();
  /** How dense searches were answered (by a graph, by an exact scan of the matrix), and graphs built and loaded from files. */
  private readonly denseCounts = { ann: 0, exact: 0, builds: 0, loads: 0 };
  /** index_identity of this file. */
  private readonly identity: string;
  /** Keyword statistics of the last snapshot searched. */
  private kwStats: KeywordStats | null = null;
  /** In-memory postings of the frequent tokens; `busy` while a background build or catch-up runs. */
  private readonly kwPost: { post: FrequentPostings | null; busy: boolean } = { post: null, busy: false };
  /** How keyword searches were answered (postings + FTS5 for rare tokens, or FTS5 alone) and how the postings were kept. */
  private readonly keywordCounts = { postings: 0, fts: 0, builds: 0, catchUps: 0, entries: 0, rareRows: 0 };

  private constructor(
    private readonly db: Database.Database,
    private readonly vectorCacheBytes: number,
    /** Candidate rows from which a dense search uses the graph (Infinity: never). */
    private readonly annMinRows: number,
    /** The index file (graphs are saved beside it), or null for an in-memory index. */
    private readonly filePath: string | null,
    /** Chunks from which keyword search uses the in-memory postings (Infinity: never). */
    private readonly postingsMinRows: number = DEFAULT_POSTINGS_MIN_ROWS,
  ) {
    this.stmts = {
      getDoc: db.prepare<[string], DocRow>('SELECT * FROM documents WHERE document_id = ?'),
      upsertDoc: db.prepare<[string, number, string, number, string, string]>(
        `INSERT INTO documents (document_id, revision, model, dim, container_tags, metadata) VALUES (?, ?, ?, ?, ?, ?)
         ON CONFLICT (document_id) DO UPDATE SET revision = excluded.revision, model = excluded.model,
           dim = excluded.dim, container_tags = excluded.container_tags, metadata = excluded.metadata`,
      ),
      updateDocMeta: db.prepare<[string, string, string]>(
        'UPDATE documents SET container_tags = ?, metadata = ? WHERE document_id = ?',
      ),
      deleteDoc: db.prepare<[string]>('DELETE FROM documents WHERE document_id = ?'),
      deleteTags: db.prepare<[string]>('DELETE FROM document_tags WHERE document_id = ?'),
      insertTag: db.prepare<[string, string]>('INSERT OR IGNORE INTO document_tags (document_id, tag) VALUES (?, ?)'),
      deleteMeta: db.prepare<[string]>('DELETE FROM document_meta WHERE document_id = ?'),
      insertMeta: db.prepare<[string, string, string, string, string, number | null]>(
        'INSERT INTO document_meta (document_id, key, kind, str, str_lower, num) VALUES (?, ?, ?, ?, ?, ?)',
      ),
      chunkKeys: db.prepare<[string], ChunkKeyRow>('SELECT rowid, idx, hash FROM chunks WHERE document_id = ?'),
      deleteChunk: db.prepare<[number]>('DELETE FROM chunks WHERE rowid = ?'),
      deleteChunks: db.prepare<[string]>('DELETE FROM chunks WHERE document_id = ?'),
      insertChunk: db.prepare<[string, number, string, string, string, number, Buffer]>(
        'INSERT INTO chunks (document_id, idx, hash, text, model, dim, vector) VALUES (?, ?, ?, ?, ?, ?, ?)',
      ),
      insertTerms: db.prepare<[number, string, string]>('INSERT INTO chunks_fts (rowid, terms, bigrams) VALUES (?, ?, ?)'),
      docChunks: db.prepare<[string], { idx: number; hash: string; text: string; model: string; dim: number }>(
        'SELECT idx, hash, text, model, dim FROM chunks WHERE document_id = ? ORDER BY idx',
      ),
      countDocs: db.prepare<[], { n: number }>('SELECT count(*) AS n FROM documents'),
      countChunks: db.prepare<[], { n: number }>('SELECT count(*) AS n FROM chunks'),
      termRows: db.prepare<[string], { doc: number }>('SELECT doc FROM chunks_fts_vocab WHERE term = ?'),
      otherModel: db.prepare<[string, string], { other: number }>(
        'SELECT EXISTS (SELECT 1 FROM chunks WHERE model < ?) OR EXISTS (SELECT 1 FROM chunks WHERE model > ?) AS other',
      ),
      ftsTop: db.prepare<[string, number], unknown>(
        `SELECT rowid, bm25(chunks_fts, 1.0, ${BIGRAM_WEIGHT}) AS rank FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY rank, rowid LIMIT ?`,
      ),
      ftsAverages: db.prepare<[], { block: Buffer }>('SELECT block FROM chunks_fts_data WHERE id = 1'),
      ftsRare: db.prepare<[string], unknown>(`SELECT rowid, bm25(chunks_fts, 1.0, ${BIGRAM_WEIGHT}) AS rank FROM chunks_fts WHERE chunks_fts MATCH ?`),
      // In term order (fts5vocab walks the index in order), a slice at a time.
      vocabAfter: db.prepare<[string, number, number], { term: string; doc: number }>(
        'SELECT term, doc FROM chunks_fts_vocab WHERE term > ? AND doc >= ? LIMIT ?',
      ),
      textsAfter: db.prepare<[number, number], unknown>('SELECT rowid, text FROM chunks WHERE rowid > ? ORDER BY rowid LIMIT ?'),
      chunkText: db.prepare<[number], { text: string }>('SELECT text FROM chunks WHERE rowid = ?'),
      allChangesAfter: db.prepare<[number, number], { seq: number; op: number; chunk_rowid: number }>(
        'SELECT seq, op, chunk_rowid FROM chunk_changes WHERE seq > ? ORDER BY seq LIMIT ?',
      ),
      ftsAll: db.prepare<[string], unknown>(
        `SELECT rowid, bm25(chunks_fts, 1.0, ${BIGRAM_WEIGHT}) AS rank FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY rank, rowid`,
      ),
      countModel: db.prepare<[string, number], { n: number }>('SELECT count(*) AS n FROM chunks WHERE model = ? AND dim = ?'),
      modelVectors: db.prepare<[string, number], unknown>('SELECT rowid, vector FROM chunks WHERE model = ? AND dim = ?'),
      chunkVector: db.prepare<[number, string, number], { vector: Buffer }>('SELECT vector FROM chunks WHERE rowid = ? AND model = ? AND dim = ?'),
      lastChange: db.prepare<[], { seq: number }>("SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'chunk_changes'), 0) AS seq"),
      firstChange: db.prepare<[], { seq: number | null }>('SELECT min(seq) AS seq FROM chunk_changes'),
      changesSince: db.prepare<[number, string, number], { op: number; chunk_rowid: number }>(
        'SELECT op, chunk_rowid FROM chunk_changes WHERE seq > ? AND model = ? AND dim = ? ORDER BY seq',
      ),
      countChangesSince: db.prepare<[number], { n: number }>('SELECT count(*) AS n FROM chunk_changes WHERE seq > ?'),
      pruneChanges: db.prepare<[number]>(
        "DELETE FROM chunk_changes WHERE seq <= coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'chunk_changes'), 0) - ?",
      ),
      vectorsAfter: db.prepare<[string, number, number, number], unknown>(
        'SELECT rowid, vector FROM chunks WHERE model = ? AND dim = ? AND rowid > ? ORDER BY rowid LIMIT ?',
      ),
      changesAfter: db.prepare<[number, string, number, number], { seq: number; op: number; chunk_rowid: number }>(
        'SELECT seq, op, chunk_rowid FROM chunk_changes WHERE seq > ? AND model = ? AND dim = ? ORDER BY seq LIMIT ?',
      ),
      hitsByRowid: db.prepare<[string], HitRow>(
        `SELECT c.rowid AS rowid, c.document_id AS document_id, c.idx AS idx, c.text AS text,
                d.container_tags AS container_tags, d.metadata AS metadata
         FROM chunks c JOIN documents d ON d.document_id = c.document_id
         WHERE c.rowid IN (SELECT value FROM json_each(?))`,
      ),
    };
    this.identity = (db.prepare('SELECT id FROM index_identity').pluck().get() as string | undefined) ?? '';
  }

  /**
   * Open (creating if needed) the index file at `path`; ':memory:' gives a private in-memory index.
   * `vectorCacheBytes` bounds the in-memory copy of one model's vectors that makes dense scans fast
   * (default 256 MiB; 0 disables it, and every dense query then streams the blobs from SQLite).
   * `annMinRows`: from how many candidate rows a dense search asks the nearest-neighbour graph
   * instead of scanning exactly (default 10,000; Infinity never builds a graph). The graphs need the
   * matrix: without a vector cache every dense search is exact. `postingsMinRows`: from how many
   * chunks keyword search scores frequent tokens from in-memory postings and asks FTS5 only for
   * the rare ones (default 10,000; Infinity: FTS5 alone).
   */
  static open(path: string, opts: { vectorCacheBytes?: number; annMinRows?: number; postingsMinRows?: number } = {}): SqliteChunkIndex {
    if (path !== ':memory:' && !path.startsWith('file:')) mkdirSync(dirname(path), { recursive: true });
    const db = new Database(path);
    try {
      db.pragma('busy_timeout = 5000');
      db.pragma('journal_mode = WAL');
      // NORMAL is durable across process crashes in WAL mode; only an OS crash can lose the last commits.
      db.pragma('synchronous = NORMAL');
      // The keyword triggers call these: every connection that writes chunks needs them.
      db.function('ms_terms', { deterministic: true }, (text: unknown) => analysed(String(text)).terms);
      db.function('ms_bigrams', { deterministic: true }, (text: unknown) => analysed(String(text)).bigrams);
      db.transaction(() => {
        // Checked inside the write lock: the indexer and a gateway may open a new file at the same time.
        const version = db.pragma('user_version', { simple: true }) as number;
        if (version > SCHEMA_VERSION) {
          throw new Error(`chunk index schema version ${version} is newer than this code (${SCHEMA_VERSION})`);
        }
        if (version < SCHEMA_VERSION) {
          if (version > 0 && version < 3) db.exec(DROP_SCHEMA_2_FTS);
          db.exec(SCHEMA);
          if (version > 0 && version < 3) {
            db.exec('INSERT INTO chunks_fts (rowid, terms, bigrams) SELECT rowid, ms_terms(text), ms_bigrams(text) FROM chunks');
          }
          if (version > 0 && version < 5) db.exec('DROP TRIGGER IF EXISTS chunks_fts_insert');
          db.pragma(`user_version = ${SCHEMA_VERSION}`);
        }
      }).immediate();
    } catch (err) {
      db.close();
      throw err;
    }
    const file = path === ':memory:' || path.startsWith('file:') ? null : path;
    return new SqliteChunkIndex(
      db,
      opts.vectorCacheBytes ?? DEFAULT_VECTOR_CACHE_BYTES,
      opts.annMinRows ?? DEFAULT_ANN_MIN_ROWS,
      file,
      opts.postingsMinRows ?? DEFAULT_POSTINGS_MIN_ROWS,
    );
  }

  async replaceDocument(input: ReplaceDocumentInput): Promise<{ upserted: number; removed: number; stale: boolean }> {
    return (await this.replaceDocuments([input]))[0]!;
  }

  async replaceDocuments(inputs: ReplaceDocumentInput[]): Promise<Array<{ upserted: number; removed: number; stale: boolean }>> {
    this.assertOpen();
    for (const input of inputs) validateReplace(input);
    const run = this.db.transaction(() => {
      const added: AddedChunks = new Map();
      const results = inputs.map((input) => this.replaceNow(input, added));
      this.addTerms(added);
      return results;
    });
    // IMMEDIATE takes the write lock up front, so a concurrent writer waits (busy_timeout)
    // instead of failing when a read transaction tries to upgrade.
    try {
      return run.immediate();
    } finally {
      this.writeSeq++;
    }
  }

  /**
   * One document's replacement, inside the caller's transaction. The rowid and text of each chunk
   * it inserts are put in `added`, for addTerms; a chunk it deletes leaves it (a batch naming one
   * document twice deletes what its first pass added, and SQLite may give that rowid out again).
   */
  private replaceNow(input: ReplaceDocumentInput, added: AddedChunks): { upserted: number; removed: number; stale: boolean } {
    const s = this.stmts;
    const current = s.getDoc.get(input.documentId);
    if (current && current.revision > input.revision) return { upserted: 0, removed: 0, stale: true };
    // Vectors of another model are never kept, even for an unchanged text.
    const sameModel = current !== undefined && current.model === input.model && current.dim === input.dim;
    const wanted = new Map(input.chunks.map((c) => [c.index, c]));
    const kept = new Set<number>();
    let removed = 0;
    for (const row of s.chunkKeys.all(input.documentId)) {
      if (sameModel && wanted.get(row.idx)?.hash === row.hash) {
        kept.add(row.idx);
      } else {
        s.deleteChunk.run(row.rowid);
        added.delete(row.rowid);
        removed++;
      }
    }
    let upserted = 0;
    for (const c of input.chunks) {
      if (kept.has(c.index)) continue;
      const { lastInsertRowid } = s.insertChunk.run(input.documentId, c.index, c.hash, c.text, input.model, input.dim, vectorBlob(c.vector));
      added.set(Number(lastInsertRowid), c.text);
      upserted++;
    }
    s.upsertDoc.run(
      input.documentId,
      input.revision,
      input.model,
      input.dim,
      JSON.stringify(input.containerTags),
      JSON.stringify(input.metadata),
    );
    this.writeSideTables(input.documentId, input.containerTags, input.metadata);
    s.pruneChanges.run(CHANGES_KEPT);
    return { upserted, removed, stale: false };
  }

  /**
   * The keyword index entries of the chunks a batch inserted, once its other statements have run
   * (see the schema note on chunks_fts: a statement with triggers, as the chunk inserts and deletes
   * are, makes FTS5 write out what it holds), one single-row insert each (which does not), in rowid
   * order (FTS5 also writes out when a rowid goes backwards).
   */
  private addTerms(added: AddedChunks): void {
    for (const rowid of [...added.keys()].sort((a, b) => a - b)) {
      const a = analysed(added.get(rowid)!);
      this.stmts.insertTerms.run(rowid, a.terms, a.bigrams);
    }
  }

  async updateDocumentMeta(documentId: string, patch: { containerTags?: string[]; metadata?: Metadata }): Promise<void> {
    this.assertOpen();
    const s = this.stmts;
    this.db
      .transaction(() => {
        const current = s.getDoc.get(documentId);
        if (!current) return;
        const tags = patch.containerTags ?? (JSON.parse(current.container_tags) as string[]);
        const metadata = patch.metadata ?? (JSON.parse(current.metadata) as Metadata);
        s.updateDocMeta.run(JSON.stringify(tags), JSON.stringify(metadata), documentId);
        this.writeSideTables(documentId, tags, metadata);
      })
      .immediate();
    this.writeSeq++;
  }

  async deleteDocument(documentId: string): Promise<number> {
    this.assertOpen();
    const s = this.stmts;
    const removed = this.db
      .transaction(() => {
        const n = s.deleteChunks.run(documentId).changes;
        s.deleteDoc.run(documentId);
        s.deleteTags.run(documentId);
        s.deleteMeta.run(documentId);
        s.pruneChanges.run(CHANGES_KEPT);
        return n;
      })
      .immediate();
    this.writeSeq++;
    return removed;
  }

  async getDocumentChunks(documentId: string): Promise<StoredChunk[]> {
    this.assertOpen();
    const s = this.stmts;
    // One read transaction, so the chunks and the document row come from the same snapshot.
    return this.db.transaction(() => {
      const doc = s.getDoc.get(documentId);
      if (!doc) return [];
      const containerTags = JSON.parse(doc.container_tags) as string[];
      const metadata = JSON.parse(doc.metadata) as Metadata;
      return s.docChunks.all(documentId).map(
        (r): StoredChunk => ({
          documentId,
          revision: doc.revision,
          index: r.idx,
          hash: r.hash,
          text: r.text,
          model: r.model,
          dim: r.dim,
          containerTags: [...containerTags],
          metadata: { ...metadata },
        }),
      );
    })();
  }

  async search(q: SearchQuery): Promise<SearchHit[]> {
    this.assertOpen();
    validateQuery(q);
    const limit = Math.floor(q.limit);
    // An empty tag or id list restricts to nothing: "any of no tags" matches no chunk.
    if (limit <= 0 || q.containerTags?.length === 0 || q.documentIds?.length === 0) return [];
    const restrict = this.restriction(q);
    // One read transaction: both halves of a hybrid search, and the detail lookups, see one snapshot.
    return this.db.transaction((): SearchHit[] => {
      // Read before anything else in the transaction, so the snapshot the search reads is at
      // least as new as this version: a cache labelled with it can be older, never newer.
      const token = `${this.db.pragma('data_version', { simple: true }) as number}:${this.writeSeq}`;
      for (const force of [false, true]) {
        // null from hydrate: the in-memory vectors and this snapshot disagree (a commit landed
        // between the version check and the first read). Reload them from this snapshot, score again.
        const hits = this.hydrate(this.ranked(q, token, restrict, limit, force));
        if (hits) return hits;
      }
      throw new Error('chunk index: vectors reloaded from this snapshot still disagree with it');
    })();
  }

  /** Scored row ids, best first, for any mode. */
  private ranked(q: SearchQuery, token: string, restrict: Sql, limit: number, force: boolean): { id: number; score: number }[] {
    if (q.mode === 'dense') return this.dense(token, q.vector!, q.model!, restrict, limit, force);
    if (q.mode === 'keyword') return this.keyword(token, q.text!, q.model, restrict, limit);
    const depth = hybridDepth(limit);
    const keyword = this.keyword(token, q.text!, q.model, restrict, depth);
    const dense = this.dense(token, q.vector!, q.model!, restrict, depth, force);
    const cosines = new Map(dense.map((h) => [h.id, h.score]));
    // A keyword candidate outside the dense top list still has a cosine: score it exactly, so
    // fusion does not treat "not among the dense best" as "unrelated".
    const missing = keyword.filter((h) => !cosines.has(h.id)).map((h) => h.id);
    for (const [id, c] of this.cosinesOf(token, q.vector!, q.model!, missing)) cosines.set(id, c);
    return fuseScores(new Map(keyword.map((h) => [h.id, h.score])), cosines, q.fusion ?? DEFAULT_FUSION, limit);
  }

  async stats(): Promise<{ documents: number; chunks: number }> {
    this.assertOpen();
    return this.db.transaction(() => ({
      documents: this.stmts.countDocs.get()!.n,
      chunks: this.stmts.countChunks.get()!.n,
    }))();
  }

  /** Diagnostics (not part of the port): how often the in-memory vectors were loaded whole or caught up. */
  vectorCacheStats(): { loads: number; catchUps: number } {
    return { ...this.cacheCounts };
  }

  /** Diagnostics (not part of the port): dense searches answered by a graph and by an exact scan, and the graphs held. */
  annStats(): { ann: number; exact: number; builds: number; loads: number; graphs: { key: string; live: number; deleted: number; seq: number; busy: boolean }[] } {
    const graphs = [...this.anns].map(([key, st]) => ({
      key: key.replace('\u0000', ' '),
      live: st.graph?.live ?? 0,
      deleted: st.graph?.deleted.size ?? 0,
      seq: st.seq,
      busy: st.busy,
    }));
    return { ...this.denseCounts, graphs };
  }

  async ping(): Promise<void> {
    this.assertOpen();
    this.db.prepare('SELECT 1').get();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    // Graphs changed since they were last written are written now: the next start loads them.
    for (const [key, st] of this.anns) {
      const [dim, model] = key.split('\u0000') as [string, string];
      if (!st.busy) this.maybeSaveAnn(st, model, Number(dim), true);
    }
    this.closed = true;
    this.anns.clear();
    this.matrices.clear();
    this.db.close();
  }

  private assertOpen(): void {
    if (this.closed) throw new Error('chunk index is closed');
  }

  private writeSideTables(documentId: string, tags: string[], metadata: Metadata): void {
    const s = this.stmts;
    s.deleteTags.run(documentId);
    for (const t of tags) s.insertTag.run(documentId, t);
    s.deleteMeta.run(documentId);
    for (const f of metadataFacets(metadata)) {
      for (const v of f.values) s.insertMeta.run(documentId, f.key, f.kind, v, v.toLowerCase(), f.num);
    }
  }

  /** The tag, document-id and metadata restrictions as a boolean over the chunk row aliased `c`. */
  private restriction(q: SearchQuery): Sql {
    const parts: string[] = [];
    const params: unknown[] = [];
    if (q.containerTags) {
      parts.push('c.document_id IN (SELECT document_id FROM document_tags WHERE tag IN (SELECT value FROM json_each(?)))');
      params.push(JSON.stringify(q.containerTags));
    }
    if (q.documentIds) {
      parts.push('c.document_id IN (SELECT value FROM json_each(?))');
      params.push(JSON.stringify(q.documentIds));
    }
    if (q.filter) {
      const f = compileFilterSql(q.filter);
      parts.push(`c.document_id IN (SELECT d.document_id FROM documents d WHERE ${f.sql})`);
      params.push(...f.params);
    }
    return { sql: parts.length ? parts.join(' AND ') : '1', params };
  }

  /**
   * Exact cosine top-k: vectors are L2-normalised, so cosine is the dot product. Scores come from
   * the in-memory matrix of the model when it fits the cache budget (a restricted query first
   * asks SQLite for the rowids that pass, which is cheap: integers only), otherwise from a stream
   * of rowid + vector blob; text and payload are fetched for the k winners only.
   */
  private dense(token: string, vector: Float32Array, model: string, restrict: Sql, limit: number, force: boolean): { id: number; score: number }[] {
    const m = this.matrix(token, model, vector.length, force);
    if (m) {
      const scored = this.denseFromMatrix(m, model, vector, restrict, limit);
      if (scored) return scored;
      // The matrix lacks a row this snapshot has: reload it and score again.
      const fresh = this.matrix(token, model, vector.length, true);
      const again = fresh && this.denseFromMatrix(fresh, model, vector, restrict, limit);
      if (again) return again;
    }
    const stmt = this.cached(`SELECT c.rowid, c.vector FROM chunks c WHERE c.model = ? AND c.dim = ? AND ${restrict.sql}`);
    const top = new TopK(limit);
    let threshold = top.threshold;
    for (const [rowid, blob] of stmt.raw(true).iterate(model, vector.length, ...restrict.params) as IterableIterator<[number, Buffer]>) {
      const s = dotAt(blobVector(blob), 0, vector);
      if (s >= threshold) {
        top.push(s, rowid);
        threshold = top.threshold;
      }
    }
    return top.sorted();
  }

  /** Cosines of given rows with `vector` (rows of another model or gone are left out). */
  private cosinesOf(token: string, vector: Float32Array, model: string, rowids: number[]): Map<number, number> {
    const out = new Map<number, number>();
    if (rowids.length === 0) return out;
    const m = this.matrices.get(`${vector.length}\u0000${model}`);
    const fromMatrix = m !== undefined && m.token === token;
    for (const id of rowids) {
      const row = fromMatrix ? m.pos.get(id) : undefined;
      if (row !== undefined) {
        out.set(id, dotAt(m!.data, row * vector.length, vector));
        continue;
      }
      const hit = this.stmts.chunkVector.get(id, model, vector.length);
      if (hit) out.set(id, dotAt(blobVector(hit.vector), 0, vector));
    }
    return out;
  }

  /**
   * Top rows from the in-memory matrix, by the graph when the candidates are many and it is ready,
   * else by an exact scan; null when a row that passes the restriction is not in the matrix.
   */
  private denseFromMatrix(m: VectorMatrix, model: string, vector: Float32Array, restrict: Sql, limit: number): { id: number; score: number }[] | null {
    const n = vector.length;
    const { data, rowids } = m;
    let restricted: Restricted | undefined;
    if (restrict.sql !== '1') {
      const key = JSON.stringify([restrict.sql, restrict.params]);
      restricted = m.restricted.get(key);
      if (!restricted) {
        const found: number[] = [];
        const stmt = this.cached(`SELECT c.rowid FROM chunks c WHERE c.model = ? AND c.dim = ? AND ${restrict.sql}`);
        for (const rowid of stmt.pluck(true).iterate(model, n, ...restrict.params) as IterableIterator<number>) {
          const row = m.pos.get(rowid);
          if (row === undefined) return null;
          found.push(row);
        }
        restricted = { rows: Int32Array.from(found) };
        if (m.restricted.size >= RESTRICTED_ROWS_CACHE) m.restricted.delete(m.restricted.keys().next().value!);
        m.restricted.set(key, restricted);
      }
    }
    // A walk with a filter visits more of the graph and calls back into JS for each candidate:
    // below about four times the threshold, scanning the restricted rows exactly is as fast.
    if (restricted ? restricted.rows.length >= ANN_FILTERED_MIN_FACTOR * this.annMinRows : m.size >= this.annMinRows) {
      const graph = this.annGraph(m, model, n);
      if (graph) {
        const scored = this.denseFromGraph(graph, m, vector, limit, restricted);
        if (scored) {
          this.denseCounts.ann++;
          return scored;
        }
        this.anns.get(`${n}\u0000${model}`)!.graph = null;
      }
    }
    this.denseCounts.exact++;
    const top = new TopK(limit);
    let threshold = top.threshold;
    if (!restricted) {
      for (let row = 0; row < m.size; row++) {
        const s = dotAt(data, row * n, vector);
        if (s >= threshold) {
          top.push(s, rowids[row]!);
          threshold = top.threshold;
        }
      }
    } else {
      for (const row of restricted.rows) {
        const s = dotAt(data, row * n, vector);
        if (s >= threshold) {
          top.push(s, rowids[row]!);
          threshold = top.threshold;
        }
      }
    }
    return top.sorted();
  }

  /**
   * The graph's top rows, rescored exactly from the matrix (the graph only picks candidates, so
   * scores are the same cosines an exact scan gives). A restriction is applied during the walk,
   * by a filter on labels: the graph keeps looking until it has `limit` rows that pass, instead
   * of over-fetching and dropping. Null when the graph names a row the matrix lacks (it cannot
   * be trusted: it is rebuilt, and this search scans exactly).
   */
  private denseFromGraph(graph: AnnGraph, m: VectorMatrix, vector: Float32Array, limit: number, restricted: Restricted | undefined): { id: number; score: number }[] | null {
    const n = vector.length;
    let accept: ((label: number) => boolean) | undefined;
    if (restricted) {
      const ids = (restricted.ids ??= new Set(Array.from(restricted.rows, (row) => m.rowids[row]!)));
      accept = (label) => ids.has(label);
    }
    const top = new TopK(limit);
    for (const label of graph.search(vector, limit, accept)) {
      const row = m.pos.get(label);
      if (row === undefined) return null;
      top.push(dotAt(m.data, row * n, vector), label);
    }
    return top.sorted();
  }

  /**
   * The graph of (model, dim) brought to the matrix's snapshot, or null when it is not ready (a
   * load, build or catch-up then runs in the background, and the search scans exactly). Small
   * graphs are built here, from the matrix; a few changes behind, it catches up here, from the
   * change log with the vectors of the matrix (which is current for this snapshot).
   */
  private annGraph(m: VectorMatrix, model: string, dim: number): AnnGraph | null {
    const key = `${dim}\u0000${model}`;
    let st = this.anns.get(key);
    if (!st) {
      st = { graph: null, seq: 0, busy: false, unsaved: 0, savedAt: Date.now() };
      this.anns.set(key, st);
    }
    if (!st.graph) {
      if (m.size <= ANN_SYNC_BUILD) {
        const graph = AnnGraph.create(dim, m.size + 64);
        for (let row = 0; row < m.size; row++) graph.add(m.rowids[row]!, m.data.subarray(row * dim, (row + 1) * dim));
        Object.assign(st, { graph, seq: m.seq, unsaved: m.size });
        this.denseCounts.builds++;
        return graph;
      }
      if (!st.busy) this.annInBackground(st, model, dim, 'load');
      return null;
    }
    const s = this.stmts;
    if (st.seq !== m.seq) {
      const first = s.firstChange.get()!.seq;
      if (st.seq > m.seq || first === null || first > st.seq + 1) {
        // The log no longer reaches back to the graph (or it is from the future of a reset file): rebuild.
        st.graph = null;
        if (!st.busy) this.annInBackground(st, model, dim, 'build');
        return null;
      }
      if (s.countChangesSince.get(st.seq)!.n > ANN_SYNC_CATCH_UP) {
        if (!st.busy) this.annInBackground(st, model, dim, 'catch-up');
        return null;
      }
      const graph = st.graph;
      for (const c of s.changesSince.all(st.seq, model, dim)) {
        const row = c.op === 1 ? m.pos.get(c.chunk_rowid) : undefined;
        // Added or replaced: its vector as of this snapshot. Gone since: a later change removes it.
        if (row !== undefined) graph.add(c.chunk_rowid, m.data.subarray(row * dim, (row + 1) * dim));
        else if (c.op === 0) graph.remove(c.chunk_rowid);
        st.unsaved++;
      }
      st.seq = m.seq;
      this.maybeSaveAnn(st, model, dim);
    }
    const graph = st.graph;
    if (graph.deleted.size > ANN_MAX_DELETED_SHARE * graph.slots && !st.busy) this.annInBackground(st, model, dim, 'build');
    return graph;
  }

  /**
   * Load the graph from its file (when it belongs to this index file), else build it; or catch
   * it up from the change log. In slices of ANN_SLICE_MS with the event loop free between them,
   * so a gateway keeps answering (exactly) meanwhile. A rebuild replaces the graph only when done.
   */
  private annInBackground(st: AnnState, model: string, dim: number, task: 'load' | 'build' | 'catch-up'): void {
    st.busy = true;
    const s = this.stmts;
    const slice = () => new Promise<void>((resolve) => setImmediate(resolve));
    const run = async (): Promise<void> => {
      if (task === 'load' && this.filePath) {
        const loaded = await AnnGraph.load(annFile(this.filePath, model, dim));
        if (this.closed) return;
        if (loaded && loaded.meta.identity === this.identity && loaded.meta.model === model && loaded.meta.dim === dim) {
          Object.assign(st, { graph: loaded.graph, seq: loaded.meta.seq, unsaved: 0, savedAt: Date.now() });
          this.denseCounts.loads++;
          return;
        }
      }
      if (task === 'catch-up' && st.graph) {
        const graph = st.graph;
        for (;;) {
          if (this.closed || st.graph !== graph) return;
          const until = performance.now() + ANN_SLICE_MS;
          let caughtUp = false;
          this.db.transaction(() => {
            while (performance.now() < until) {
              const first = s.firstChange.get()!.seq;
              if (first !== null && first > st.seq + 1) throw new Error('the change log no longer reaches the graph');
              const changes = s.changesAfter.all(st.seq, model, dim, 256);
              for (const c of changes) {
                const hit = c.op === 1 ? s.chunkVector.get(c.chunk_rowid, model, dim) : undefined;
                if (hit) graph.add(c.chunk_rowid, blobVector(hit.vector));
                else if (c.op === 0) graph.remove(c.chunk_rowid);
                st.seq = c.seq;
                st.unsaved++;
              }
              if (changes.length < 256) {
                // Later changes are other models': the graph is at this snapshot's end of the log.
                st.seq = s.lastChange.get()!.seq;
                caughtUp = true;
                return;
              }
            }
          })();
          if (caughtUp) {
            this.maybeSaveAnn(st, model, dim);
            return;
          }
          await slice();
        }
      }
      // Build: the log position first, then the vectors in rowid order, a slice at a time. Changes
      // committed meanwhile may be read twice (by the scan and again by the catch-up from `seq`);
      // applying a change is idempotent, so the graph ends at the same state.
      const seq = s.lastChange.get()!.seq;
      const graph = AnnGraph.create(dim, s.countModel.get(model, dim)!.n + 1024);
      let after = 0;
      for (;;) {
        if (this.closed) return;
        const until = performance.now() + ANN_SLICE_MS;
        let done = false;
        while (!done && performance.now() < until) {
          const rows = s.vectorsAfter.raw(true).all(model, dim, after, 64) as [number, Buffer][];
          for (const [rowid, blob] of rows) {
            graph.add(rowid, blobVector(blob));
            after = rowid;
          }
          done = rows.length < 64;
        }
        if (done) break;
        await slice();
      }
      Object.assign(st, { graph, seq, unsaved: Number.POSITIVE_INFINITY });
      this.denseCounts.builds++;
      this.maybeSaveAnn(st, model, dim);
    };
    run()
      .catch(() => {
        // A graph that cannot be loaded, built or caught up is dropped: searches scan exactly,
        // and the next one that needs the graph starts over.
        st.graph = null;
      })
      .finally(() => {
        st.busy = false;
      });
  }

  /** Write the graph to its file when enough changed since the last time (or `force`, at close). */
  private maybeSaveAnn(st: AnnState, model: string, dim: number, force = false): void {
    if (!this.filePath || !st.graph || st.unsaved === 0) return;
    if (!force && (st.unsaved < ANN_SAVE_CHANGES || Date.now() - st.savedAt < ANN_SAVE_INTERVAL_MS) && st.unsaved !== Number.POSITIVE_INFINITY) return;
    try {
      st.graph.save(annFile(this.filePath, model, dim), { identity: this.identity, model, seq: st.seq });
      st.unsaved = 0;
      st.savedAt = Date.now();
    } catch {
      // A graph that cannot be written (disk full, read-only data dir) is built again at the next start.
    }
  }

  /**
   * Build (or load) the graph of every model with at least `annMinRows` chunks now, catch it up
   * and save it, and resolve when done (not part of the port): `replay index` calls it so a
   * rebuilt index starts with its graphs, and bench/search.ts before timing searches.
   */
  async prepareAnn(): Promise<{ model: string; dim: number; points: number }[]> {
    this.assertOpen();
    const out: { model: string; dim: number; points: number }[] = [];
    const models = this.db.prepare('SELECT model, dim, count(*) AS n FROM chunks GROUP BY model, dim').all() as { model: string; dim: number; n: number }[];
    for (const { model, dim, n } of models) {
      if (n < this.annMinRows) continue;
      for (;;) {
        const ready = this.db.transaction(() => {
          const token = `${this.db.pragma('data_version', { simple: true }) as number}:${this.writeSeq}`;
          const m = this.matrix(token, model, dim, false);
          return m ? this.annGraph(m, model, dim) : undefined;
        })();
        if (ready === undefined) break;
        if (ready) {
          const st = this.anns.get(`${dim}\u0000${model}`)!;
          this.maybeSaveAnn(st, model, dim, true);
          out.push({ model, dim, points: ready.live });
          break;
        }
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    }
    return out;
  }

  /**
   * The cached matrix of (model, dim), (re)loaded when stale; null when it alone exceeds the
   * budget. The budget covers all cached models together: stale matrices are dropped first, then
   * the others if the new one would not fit beside them.
   */
  private matrix(token: string, model: string, dim: number, force: boolean): VectorMatrix | null {
    const key = `${dim}\u0000${model}`;
    const have = this.matrices.get(key);
    if (have && have.token === token && !force) return have;
    if (have && !force && this.catchUp(have, model, dim)) {
      this.cacheCounts.catchUps++;
      have.token = token;
      return have;
    }
    const count = this.stmts.countModel.get(model, dim)!.n;
    const bytes = count * dim * 4;
    let cached = 0;
    for (const [k, m] of this.matrices) {
      if (k === key || m.token !== token) this.matrices.delete(k);
      else cached += m.data.byteLength;
    }
    if (bytes > this.vectorCacheBytes) return null;
    if (cached + bytes > this.vectorCacheBytes) this.matrices.clear();
    // Read in the same transaction as the vectors: the matrix reflects exactly the changes up to it.
    const seq = this.stmts.lastChange.get()!.seq;
    const rowids = new Float64Array(count);
    const data = new Float32Array(count * dim);
    const pos = new Map<number, number>();
    let row = 0;
    for (const [rowid, blob] of this.stmts.modelVectors.raw(true).iterate(model, dim) as IterableIterator<[number, Buffer]>) {
      // Both statements run in the same read transaction, so the count cannot be exceeded.
      rowids[row] = rowid;
      pos.set(rowid, row);
      data.set(blobVector(blob), row * dim);
      row++;
    }
    this.cacheCounts.loads++;
    const m: VectorMatrix = { token, seq, size: row, rowids, data, pos, restricted: new Map() };
    this.matrices.set(key, m);
    return m;
  }

  /**
   * Bring a stale matrix up to this transaction's snapshot by applying the chunk rows added and
   * removed since it was loaded (chunk_changes), instead of reading every vector again: a write
   * of one document used to cost the next search a full reload (~0.9 s at 100k chunks). False
   * when that is not possible or not cheaper — the log was pruned past it, the change is large,
   * or the matrix would outgrow the cache budget — and the caller reloads.
   */
  private catchUp(m: VectorMatrix, model: string, dim: number): boolean {
    const s = this.stmts;
    const last = s.lastChange.get()!.seq;
    if (last === m.seq) {
      // Only tags or metadata changed (or another model's chunks): the vectors are current.
      m.restricted.clear();
      return true;
    }
    const first = s.firstChange.get()!.seq;
    if (first === null || first > m.seq + 1) return false;
    if (s.countChangesSince.get(m.seq)!.n > Math.max(1000, m.size / 2)) return false;
    for (const c of s.changesSince.all(m.seq, model, dim)) {
      if (c.op === 0) {
        removeRow(m, dim, c.chunk_rowid);
        continue;
      }
      // Its vector as of this snapshot; gone means a later change in this same list removes it.
      const hit = s.chunkVector.get(c.chunk_rowid, model, dim);
      if (!hit) continue;
      removeRow(m, dim, c.chunk_rowid);
      if (!appendRow(m, dim, c.chunk_rowid, blobVector(hit.vector), this.vectorCacheBytes)) return false;
    }
    m.seq = last;
    m.restricted.clear();
    return true;
  }

  /**
   * BM25 over FTS5, on an absolute 0..1 scale: x = BM25 / Σ idf of the query's stems (Σ idf is
   * the BM25 of a chunk of average length holding each stem once), scored tanh(x). A chunk with
   * the whole query has x ≈ 1 or more (short chunks and shared bigrams push it up) and scores
   * 0.76–1; one that shares a rare word of three has x ≈ 1/3 and scores ~0.32, whatever the
   * other hits. tanh rather than a cap at 1: a cap made every strong match tie at 1 and threw
   * BM25's order among them away (hybrid MRR fell 0.12 on the manual pages).
   */
  private keyword(token: string, text: string, model: string | undefined, restrict: Sql, limit: number): { id: number; score: number }[] {
    const { terms, bigrams } = analyseQuery(text);
    if (terms.length === 0) return [];
    const stats = this.keywordStats(token);
    let best = 0;
    for (const t of terms) best += bm25Idf(stats.total, this.docsOf(stats, t));
    const score = (rank: number) => (best > 0 ? Math.tanh(-rank / best) : 0);
    // The model condition matters only when the file holds chunks of another model too (during
    // a model switch each model has a file of its own, so almost never).
    const modelMatters = model !== undefined && this.holdsOtherModel(stats, model);
    const post = this.postings(token, stats.total);
    if (post) {
      const scored = this.keywordFromPostings(post, stats, [...terms, ...bigrams], model, modelMatters, restrict, limit);
      if (scored) {
        this.keywordCounts.postings++;
        this.keywordCounts.entries += post.lastWork.entries;
        this.keywordCounts.rareRows += post.lastWork.rareRows;
        return scored.map((h) => ({ id: h.id, score: score(-h.score) }));
      }
    }
    this.keywordCounts.fts++;
    const match = toStemmedFtsQuery(text)!;
    if (!modelMatters && restrict.sql === '1') {
      // FTS5 alone: joining every match to chunks (a B-tree lookup per matching row, tens of
      // thousands at 100k chunks) was most of a keyword search's time.
      const rows = this.stmts.ftsTop.raw(true).all(match, limit) as [number, number][];
      return rows.map(([id, rank]) => ({ id, score: score(rank) }));
    }
    if (restrict.sql !== '1') {
      // Matches in BM25 order, kept when they pass the restriction, whose rowids SQLite gives
      // once per snapshot and restriction (a tenant searches its own tags again and again).
      const allowed = this.allowedRows(stats, model, modelMatters, restrict);
      const out: { id: number; score: number }[] = [];
      if (allowed.size === 0) return out;
      for (const [id, rank] of this.stmts.ftsAll.raw(true).iterate(match) as IterableIterator<[number, number]>) {
        if (!allowed.has(id)) continue;
        out.push({ id, score: score(rank) });
        if (out.length >= limit) break;
      }
      return out;
    }
    const modelSql = model === undefined ? '' : 'AND c.model = ?';
    const stmt = this.cached(
      `SELECT c.rowid AS rowid, bm25(chunks_fts, 1.0, ${BIGRAM_WEIGHT}) AS rank
         FROM chunks_fts JOIN chunks c ON c.rowid = chunks_fts.rowid
         WHERE chunks_fts MATCH ? ${modelSql} AND ${restrict.sql}
         ORDER BY rank, c.rowid LIMIT ?`,
    );
    const rows = stmt.all(match, ...(model === undefined ? [] : [model]), ...restrict.params, limit) as { rowid: number; rank: number }[];
    return rows.map((r) => ({ id: r.rowid, score: score(r.rank) }));
  }

  /** Chunks holding a stem or bigram in this snapshot (FTS5's own count, as bm25() uses), asked once per snapshot. */
  private docsOf(stats: KeywordStats, token: string): number {
    let n = stats.docs.get(token);
    if (n === undefined) {
      n = this.stmts.termRows.get(token)?.doc ?? 0;
      stats.docs.set(token, n);
    }
    return n;
  }

  /**
   * BM25 of the whole query as FTS5's bm25() computes it, in two parts: the frequent tokens from
   * the in-memory postings (term at a time, typed arrays), the rare ones (each in fewer than
   * `minDocs` chunks) by FTS5 — whose bm25() over just those tokens is their part of the sum, and
   * whose doclists for them are short. Raw BM25 (higher is better), or null when the postings and
   * FTS5 disagree about a row (the caller then asks FTS5 for the whole query).
   */
  private keywordFromPostings(
    post: FrequentPostings,
    stats: KeywordStats,
    tokens: string[],
    model: string | undefined,
    modelMatters: boolean,
    restrict: Sql,
    limit: number,
  ): { id: number; score: number }[] | null {
    const frequent: { token: string; idf: number }[] = [];
    const rare: string[] = [];
    for (const q of tokens) {
      // As FTS5 reads the quoted token: one token (almost always), none, or a phrase of several.
      const f = ftsTokens(q);
      if (f.length === 0) continue;
      const t = f[0]!;
      if (f.length > 1) {
        rare.push(`"${q}"`);
        continue;
      }
      const n = this.docsOf(stats, t);
      if (n === 0) continue;
      if (post.has(t)) frequent.push({ token: t, idf: bm25Idf(stats.ftsRows, n) });
      else rare.push(`"${q}"`);
    }
    const allowed = modelMatters || restrict.sql !== '1' ? this.allowedRows(stats, model, modelMatters, restrict) : undefined;
    if (allowed?.size === 0) return [];
    const rareRows = rare.length === 0 ? [] : negatedRanks(this.stmts.ftsRare.raw(true).iterate(rare.join(' OR ')) as IterableIterator<[number, number]>);
    return post.top(frequent, rareRows, limit, allowed, stats.ftsAvgLen);
  }

  /**
   * The frequent-token postings at this transaction's snapshot, or null when keyword search
   * should ask FTS5 for the whole query: the index is below `postingsMinRows`, or the postings
   * are being built, or are far behind the change log (they are then built or caught up in the
   * background, in slices, while searches use FTS5). A few hundred changes behind, they catch
   * up here: the rows added since are read and analysed, the removed ones dropped.
   */
  private postings(token: string, total: number): FrequentPostings | null {
    const st = this.kwPost;
    const p = st.post;
    if (!p) {
      if (total < this.postingsMinRows || st.busy) return null;
      if (total <= POSTINGS_SYNC_BUILD) {
        const b = this.newPostingsBuild(total);
        this.postingsBuildStep(b, Number.POSITIVE_INFINITY);
        st.post = b.post!;
        st.post.token = token;
        this.keywordCounts.builds++;
        return st.post;
      }
      this.postingsInBackground();
      return null;
    }
    if (p.token === token) return p;
    const s = this.stmts;
    const last = s.lastChange.get()!.seq;
    if (last !== p.seq) {
      const first = s.firstChange.get()!.seq;
      if (p.seq > last || first === null || first > p.seq + 1) {
        // The log no longer reaches back to them (or they are from the future of a reset file).
        st.post = null;
        if (!st.busy) this.postingsInBackground();
        return null;
      }
      if (s.countChangesSince.get(p.seq)!.n > POSTINGS_SYNC_CATCH_UP) {
        if (!st.busy) this.postingsInBackground();
        return null;
      }
      this.applyPostingChanges(p, Number.POSITIVE_INFINITY);
    }
    p.token = token;
    if (p.stale && !st.busy) this.postingsInBackground();
    return p;
  }

  /** Apply up to `max` changes of the log after the postings' position (in the caller's transaction); how many there were. */
  private applyPostingChanges(p: FrequentPostings, max: number): number {
    const s = this.stmts;
    const changes = s.allChangesAfter.all(p.seq, Number.isFinite(max) ? max : -1);
    for (const c of changes) {
      if (c.op === 1) {
        // Its text as of this snapshot; gone means a later change in the log removes it.
        const row = s.chunkText.get(c.chunk_rowid);
        if (row) p.add(c.chunk_rowid, row.text);
      } else {
        p.remove(c.chunk_rowid);
      }
      p.seq = c.seq;
    }
    return changes.length;
  }

  private newPostingsBuild(total: number): PostingsBuild {
    return { phase: 'tokens', total, minDocs: Math.max(2, Math.ceil(total * POSTINGS_FREQUENT_SHARE)), tokens: new Map(), after: '', rowAfter: 0 };
  }

  /**
   * Work on a build until `until` (inside the caller's transaction); true when done. First the
   * frequent tokens (FTS5's vocabulary, in term order), then every chunk's text in rowid order.
   * The log position is read before the first chunk: changes committed while the build runs over
   * several transactions are applied afterwards, and applying one twice is harmless.
   */
  private postingsBuildStep(b: PostingsBuild, until: number): boolean {
    const s = this.stmts;
    do {
      if (b.phase === 'tokens') {
        const rows = s.vocabAfter.all(b.after, b.minDocs, 512);
        for (const r of rows) {
          b.tokens.set(r.term, r.doc);
          b.after = r.term;
        }
        if (rows.length < 512) {
          b.post = new FrequentPostings(b.tokens, b.minDocs, BIGRAM_WEIGHT, b.total);
          b.phase = 'rows';
        }
      } else {
        if (b.seq === undefined) b.seq = s.lastChange.get()!.seq;
        const rows = s.textsAfter.raw(true).all(b.rowAfter, 256) as [number, string][];
        for (const [rowid, text] of rows) {
          b.post!.add(rowid, text);
          b.rowAfter = rowid;
        }
        if (rows.length < 256) {
          b.post!.seq = b.seq;
          return true;
        }
      }
    } while (performance.now() < until);
    return false;
  }

  /**
   * Build the postings (when there are none, or they are stale: many removed rows, or the index
   * grew or shrank a lot since the frequent tokens were chosen), then catch them up to the end
   * of the log; in slices of ANN_SLICE_MS with the event loop free between them, so a gateway
   * keeps answering (with FTS5 alone, or the old postings) meanwhile.
   */
  private postingsInBackground(): void {
    const st = this.kwPost;
    st.busy = true;
    const slice = () => new Promise<void>((resolve) => setImmediate(resolve));
    const run = async (): Promise<void> => {
      let p = st.post;
      if (!p || p.stale) {
        const b = this.newPostingsBuild(this.stmts.countChunks.get()!.n);
        for (;;) {
          if (this.closed) return;
          const until = performance.now() + ANN_SLICE_MS;
          if (this.db.transaction(() => this.postingsBuildStep(b, until))()) break;
          await slice();
        }
        p = b.post!;
        this.keywordCounts.builds++;
      } else {
        this.keywordCounts.catchUps++;
      }
      for (;;) {
        if (this.closed) return;
        const until = performance.now() + ANN_SLICE_MS;
        const caughtUp = this.db.transaction(() => {
          while (performance.now() < until) if (this.applyPostingChanges(p, 256) < 256) return true;
          return false;
        })();
        if (caughtUp) break;
        await slice();
      }
      st.post = p;
    };
    run()
      .catch(() => {
        // Postings that cannot be built or caught up are dropped: searches use FTS5 alone, and
        // the next one starts over.
        st.post = null;
      })
      .finally(() => {
        st.busy = false;
      });
  }

  /**
   * Build (or catch up) the keyword postings now and resolve when done (not part of the port):
   * bench/search.ts calls it before timing searches, as prepareAnn. False when the index is
   * below `postingsMinRows` (keyword search then uses FTS5 alone).
   */
  async prepareKeyword(): Promise<boolean> {
    this.assertOpen();
    for (;;) {
      const state = this.db.transaction(() => {
        const token = `${this.db.pragma('data_version', { simple: true }) as number}:${this.writeSeq}`;
        const stats = this.keywordStats(token);
        if (this.postings(token, stats.total)) return 'ready';
        return !this.kwPost.busy && !this.kwPost.post && stats.total < this.postingsMinRows ? 'small' : 'wait';
      })();
      if (state !== 'wait') return state === 'ready';
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  /**
   * Diagnostics (not part of the port): keyword searches answered with the postings and by FTS5
   * alone, postings builds and background catch-ups, the work done (postings entries scored,
   * rows FTS5 returned for rare tokens, summed over searches), and the postings held.
   */
  keywordPathStats(): {
    postings: number;
    fts: number;
    builds: number;
    catchUps: number;
    entries: number;
    rareRows: number;
    frequentTokens: number;
    rows: number;
    minDocs: number;
    bytes: number;
  } {
    const p = this.kwPost.post;
    return { ...this.keywordCounts, frequentTokens: p?.tokenCount ?? 0, rows: p?.live ?? 0, minDocs: p?.minDocs ?? 0, bytes: p?.bytes ?? 0 };
  }

  /** BM25's statistics of the snapshot `token` (row count, rows per stem as asked), made again after any commit. */
  private keywordStats(token: string): KeywordStats {
    if (this.kwStats?.token !== token) {
      const averages = ftsAverages(this.stmts.ftsAverages.get());
      this.kwStats = { token, total: this.stmts.countChunks.get()!.n, ...averages, docs: new Map(), otherModel: new Map(), allowed: new Map() };
    }
    return this.kwStats;
  }

  private holdsOtherModel(stats: KeywordStats, model: string): boolean {
    let other = stats.otherModel.get(model);
    if (other === undefined) {
      other = this.stmts.otherModel.get(model, model)!.other === 1;
      stats.otherModel.set(model, other);
    }
    return other;
  }

  /** The rowids passing a restriction (and the model, when it matters) in this snapshot. */
  private allowedRows(stats: KeywordStats, model: string | undefined, modelMatters: boolean, restrict: Sql): Set<number> {
    const key = JSON.stringify([modelMatters ? model : null, restrict.sql, restrict.params]);
    let ids = stats.allowed.get(key);
    if (!ids) {
      const stmt = this.cached(`SELECT c.rowid FROM chunks c WHERE ${modelMatters ? 'c.model = ? AND ' : ''}${restrict.sql}`);
      ids = new Set(stmt.pluck(true).all(...(modelMatters ? [model] : []), ...restrict.params) as number[]);
      if (stats.allowed.size >= RESTRICTED_ROWS_CACHE) stats.allowed.delete(stats.allowed.keys().next().value!);
      stats.allowed.set(key, ids);
    }
    return ids;
  }

  private cached(sql: string): Database.Statement<unknown[], unknown> {
    let stmt = this.searchStmts.get(sql);
    if (!stmt) {
      // Filters compile to SQL of unbounded variety; keep the cache from growing without bound.
      if (this.searchStmts.size >= 256) this.searchStmts.clear();
      stmt = this.db.prepare<unknown[], unknown>(sql);
      this.searchStmts.set(sql, stmt);
    }
    return stmt;
  }

  /**
   * Fetch text and payload for scored rowids, keeping their order; null when one of them is not
   * in this snapshot (it was scored from a matrix that is out of date).
   */
  private hydrate(scored: { id: number; score: number }[]): SearchHit[] | null {
    if (scored.length === 0) return [];
    const byRowid = new Map(this.stmts.hitsByRowid.all(JSON.stringify(scored.map((x) => x.id))).map((r) => [r.rowid, r]));
    const out: SearchHit[] = [];
    for (const { id, score } of scored) {
      const r = byRowid.get(id);
      if (!r) return null;
      out.push(toHit(r, score));
    }
    return out;
  }
}

/**
 * FTS5's "averages" record (the row with id 1 of its data table): the row count, then the total
 * tokens of each column, as SQLite varints. The average row length is over all columns, as bm25().
 */
function ftsAverages(row: { block: Buffer } | undefined): { ftsRows: number; ftsAvgLen: number } {
  if (!row) return { ftsRows: 0, ftsAvgLen: 0 };
  const b = row.block;
  let at = 0;
  const varint = (): number => {
    let v = 0;
    for (let i = 0; i < 9 && at < b.length; i++) {
      const byte = b[at++]!;
      if (i === 8) return v * 256 + byte;
      v = v * 128 + (byte & 0x7f);
      if ((byte & 0x80) === 0) return v;
    }
    return v;
  };
  const rows = varint();
  let tokens = 0;
  while (at < b.length) tokens += varint();
  return { ftsRows: rows, ftsAvgLen: rows > 0 ? tokens / rows : 0 };
}

/** FTS5 ranks (bm25() negated) as BM25 scores, higher is better. */
function* negatedRanks(rows: IterableIterator<[number, number]>): Generator<[number, number]> {
  for (const [id, rank] of rows) yield [id, -rank];
}

/** A build of the frequent-token postings in progress (see postingsBuildStep). */
interface PostingsBuild {
  phase: 'tokens' | 'rows';
  /** Chunks when started, and the row count from which a token is frequent. */
  total: number;
  minDocs: number;
  tokens: Map<string, number>;
  /** The last vocabulary term and chunk rowid read. */
  after: string;
  rowAfter: number;
  post?: FrequentPostings;
  /** The change-log position before the first chunk was read. */
  seq?: number;
}

function toHit(r: HitRow, score: number): SearchHit {
  return {
    documentId: r.document_id,
    index: r.idx,
    text: r.text,
    score,
    containerTags: JSON.parse(r.container_tags) as string[],
    metadata: JSON.parse(r.metadata) as Metadata,
  };
}

/** Take a row out of a matrix: the last row moves into its place. */
function removeRow(m: VectorMatrix, dim: number, rowid: number): void {
  const row = m.pos.get(rowid);
  if (row === undefined) return;
  const last = m.size - 1;
  if (row !== last) {
    m.data.copyWithin(row * dim, last * dim, (last + 1) * dim);
    const moved = m.rowids[last]!;
    m.rowids[row] = moved;
    m.pos.set(moved, row);
  }
  m.pos.delete(rowid);
  m.size = last;
}

/** Add a row, growing the arrays by doubling; false when that would pass the cache budget. */
function appendRow(m: VectorMatrix, dim: number, rowid: number, vector: Float32Array, budgetBytes: number): boolean {
  if (m.size === m.rowids.length) {
    const capacity = Math.max(16, m.rowids.length * 2);
    if (capacity * dim * 4 > budgetBytes) return false;
    const rowids = new Float64Array(capacity);
    rowids.set(m.rowids.subarray(0, m.size));
    const data = new Float32Array(capacity * dim);
    data.set(m.data.subarray(0, m.size * dim));
    m.rowids = rowids;
    m.data = data;
  }
  m.data.set(vector, m.size * dim);
  m.rowids[m.size] = rowid;
  m.pos.set(rowid, m.size);
  m.size++;
  return true;
}
