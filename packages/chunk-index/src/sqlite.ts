import { mkdirSync } from 'node:fs';
import { endianness } from 'node:os';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import type { FilterExpr, Metadata } from '@memstream/contracts';
import type { ChunkIndex, ReplaceDocumentInput, SearchHit, SearchQuery, StoredChunk } from './port.js';
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

const SCHEMA_VERSION = 3;
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
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5 (
  terms, bigrams, content = '', contentless_delete = 1, tokenize = "unicode61 remove_diacritics 2 tokenchars '_'"
);
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts_vocab USING fts5vocab (chunks_fts, 'row');
CREATE TRIGGER IF NOT EXISTS chunks_fts_insert AFTER INSERT ON chunks BEGIN
  INSERT INTO chunks_fts (rowid, terms, bigrams) VALUES (new.rowid, ms_terms(new.text), ms_bigrams(new.text));
END;
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

/** One analysis per text although the triggers ask for terms and bigrams separately. */
let lastAnalysed: { text: string; terms: string; bigrams: string } | null = null;
function analysed(text: string): { terms: string; bigrams: string } {
  if (lastAnalysed?.text !== text) {
    const a = documentTerms(text);
    lastAnalysed = { text, terms: a.terms.join(' '), bigrams: a.bigrams.join(' ') };
  }
  return lastAnalysed;
}

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
  restricted: Map<string, Int32Array>;
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

  private constructor(
    private readonly db: Database.Database,
    private readonly vectorCacheBytes: number,
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
      docChunks: db.prepare<[string], { idx: number; hash: string; text: string; model: string; dim: number }>(
        'SELECT idx, hash, text, model, dim FROM chunks WHERE document_id = ? ORDER BY idx',
      ),
      countDocs: db.prepare<[], { n: number }>('SELECT count(*) AS n FROM documents'),
      countChunks: db.prepare<[], { n: number }>('SELECT count(*) AS n FROM chunks'),
      termRows: db.prepare<[string], { doc: number }>('SELECT doc FROM chunks_fts_vocab WHERE term = ?'),
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
      hitsByRowid: db.prepare<[string], HitRow>(
        `SELECT c.rowid AS rowid, c.document_id AS document_id, c.idx AS idx, c.text AS text,
                d.container_tags AS container_tags, d.metadata AS metadata
         FROM chunks c JOIN documents d ON d.document_id = c.document_id
         WHERE c.rowid IN (SELECT value FROM json_each(?))`,
      ),
    };
  }

  /**
   * Open (creating if needed) the index file at `path`; ':memory:' gives a private in-memory index.
   * `vectorCacheBytes` bounds the in-memory copy of one model's vectors that makes dense scans fast
   * (default 256 MiB; 0 disables it, and every dense query then streams the blobs from SQLite).
   */
  static open(path: string, opts: { vectorCacheBytes?: number } = {}): SqliteChunkIndex {
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
          db.pragma(`user_version = ${SCHEMA_VERSION}`);
        }
      }).immediate();
    } catch (err) {
      db.close();
      throw err;
    }
    return new SqliteChunkIndex(db, opts.vectorCacheBytes ?? DEFAULT_VECTOR_CACHE_BYTES);
  }

  async replaceDocument(input: ReplaceDocumentInput): Promise<{ upserted: number; removed: number; stale: boolean }> {
    this.assertOpen();
    validateReplace(input);
    const s = this.stmts;
    const run = this.db.transaction((): { upserted: number; removed: number; stale: boolean } => {
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
          removed++;
        }
      }
      let upserted = 0;
      for (const c of input.chunks) {
        if (kept.has(c.index)) continue;
        s.insertChunk.run(input.documentId, c.index, c.hash, c.text, input.model, input.dim, vectorBlob(c.vector));
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
    });
    // IMMEDIATE takes the write lock up front, so a concurrent writer waits (busy_timeout)
    // instead of failing when a read transaction tries to upgrade.
    try {
      return run.immediate();
    } finally {
      this.writeSeq++;
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
    if (q.mode === 'keyword') return this.keyword(q.text!, q.model, restrict, limit);
    const depth = hybridDepth(limit);
    const keyword = this.keyword(q.text!, q.model, restrict, depth);
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

  async ping(): Promise<void> {
    this.assertOpen();
    this.db.prepare('SELECT 1').get();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
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

  /** Top rows from the in-memory matrix; null when a row that passes the restriction is not in it. */
  private denseFromMatrix(m: VectorMatrix, model: string, vector: Float32Array, restrict: Sql, limit: number): { id: number; score: number }[] | null {
    const n = vector.length;
    const { data, rowids } = m;
    const top = new TopK(limit);
    let threshold = top.threshold;
    if (restrict.sql === '1') {
      for (let row = 0; row < m.size; row++) {
        const s = dotAt(data, row * n, vector);
        if (s >= threshold) {
          top.push(s, rowids[row]!);
          threshold = top.threshold;
        }
      }
    } else {
      const key = JSON.stringify([restrict.sql, restrict.params]);
      let rows = m.restricted.get(key);
      if (!rows) {
        const found: number[] = [];
        const stmt = this.cached(`SELECT c.rowid FROM chunks c WHERE c.model = ? AND c.dim = ? AND ${restrict.sql}`);
        for (const rowid of stmt.pluck(true).iterate(model, n, ...restrict.params) as IterableIterator<number>) {
          const row = m.pos.get(rowid);
          if (row === undefined) return null;
          found.push(row);
        }
        rows = Int32Array.from(found);
        if (m.restricted.size >= RESTRICTED_ROWS_CACHE) m.restricted.delete(m.restricted.keys().next().value!);
        m.restricted.set(key, rows);
      }
      for (const row of rows) {
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
  private keyword(text: string, model: string | undefined, restrict: Sql, limit: number): { id: number; score: number }[] {
    const { terms } = analyseQuery(text);
    if (terms.length === 0) return [];
    const match = toStemmedFtsQuery(text)!;
    const total = this.stmts.countChunks.get()!.n;
    let best = 0;
    for (const t of terms) best += bm25Idf(total, this.stmts.termRows.get(t)?.doc ?? 0);
    const modelSql = model === undefined ? '' : 'AND c.model = ?';
    const stmt = this.cached(
      `SELECT c.rowid AS rowid, bm25(chunks_fts, 1.0, ${BIGRAM_WEIGHT}) AS rank
         FROM chunks_fts JOIN chunks c ON c.rowid = chunks_fts.rowid
         WHERE chunks_fts MATCH ? ${modelSql} AND ${restrict.sql}
         ORDER BY rank, c.rowid LIMIT ?`,
    );
    const rows = stmt.all(match, ...(model === undefined ? [] : [model]), ...restrict.params, limit) as { rowid: number; rank: number }[];
    return rows.map((r) => ({ id: r.rowid, score: best > 0 ? Math.tanh(-r.rank / best) : 0 }));
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
