import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import { DOCUMENT_STATUSES } from '@memstream/contracts';
import type { DocumentStatus, FilterCondition, FilterExpr } from '@memstream/contracts';
import { checkCount, type DocumentView, type DocumentViews, type ListQuery, type ListSelection, type ViewWrite } from './port.js';

const SCHEMA_VERSION = 3;
const PAGE_SIZE = 100;
/**
 * Documents per page of countByTag: each page is a short synchronous read (~0.5 ms), and the
 * event loop runs between pages, so a count over a backlog of tens of thousands never holds up
 * the requests of the gateway that asks it.
 */
const TAG_COUNT_PAGE = 1000;
/**
 * A selection by tags with at most this many documents reads their ids from document_tags and
 * sorts them (~1 µs a document); one with more scans the documents in the sort's order, testing
 * each one's tags (~0.2 µs a document, and a page stops early). Among 132,000 documents a tag
 * of 20 was listed in 0.07 ms instead of 68 ms, while a tag of 118,800 would take 117 ms
 * through the index against 24 ms by the scan.
 */
const TAG_INDEX_MAX = 5000;
/** Views kept in memory by the writer (see `cache`): the documents in flight, a few KB each. */
const CACHE_MAX = 4096;
/** A view whose content is longer than this is not kept (4096 extracted 50 MB uploads would not fit in memory): it is read again. */
const CACHE_MAX_CONTENT = 64 * 1024;

/** The record fields that live in the `body` JSON column rather than in their own column (content has its own table). */
type Body = Pick<
  DocumentView,
  | 'title'
  | 'type'
  | 'summary'
  | 'url'
  | 'filepath'
  | 'source'
  | 'taskType'
  | 'contentHash'
  | 'error'
  | 'chunkCount'
  | 'metadataVersion'
>;

interface Row {
  id: string;
  custom_id: string | null;
  status: string;
  created_at: string;
  updated_at: string;
  version: number;
  revision: number;
  container_tags: string;
  metadata: string;
  body: string;
  /** JSON of the content (document_content.content), null when it has none. */
  content: string | null;
}

/** A SQL fragment with its positional parameters, in the order their `?` appear. */
interface Sql {
  sql: string;
  params: unknown[];
}

const COLUMNS = 'd.id, d.custom_id, d.status, d.created_at, d.updated_at, d.version, d.revision, d.container_tags, d.metadata, d.body, c.content';
const FROM = 'documents d LEFT JOIN document_content c ON c.id = d.id';

/**
 * The columns of a document's row that a write sets (besides version), in the order of `fieldsOf`.
 * A write whose stored row is known sets only the ones that changed: SQLite rewrites the entries
 * of every index over a column an UPDATE sets, changed or not.
 */
const FIELD_COLUMNS = ['custom_id', 'status', 'created_at', 'updated_at', 'revision', 'container_tags', 'metadata', 'body'] as const;
const ALL_FIELDS = (1 << FIELD_COLUMNS.length) - 1;

/** A view as this connection last read or wrote it, with its row's stored values (`fieldsOf`). */
interface Cached {
  view: DocumentView;
  fields: unknown[];
}

/**
 * The document view store in one SQLite file, shared by one writer process and several reader
 * processes: WAL lets readers proceed while the writer commits, and busy_timeout makes the short
 * write locks wait rather than fail.
 *
 * The content lives in its own table, written when it changes (a new revision, the text of an
 * extracted file), so the writes of a document's status changes rewrite a row of a few hundred
 * bytes rather than one that carries the whole text.
 *
 * The projection reads each document of a batch, then writes it. The views this connection last
 * read or wrote are kept in memory while no other connection has committed (PRAGMA data_version
 * says so), so that read costs no query and no JSON parsing, and a write knows which columns
 * changed. A write is still a compare-and-set in SQL: the memory only saves work, it never
 * decides whether a write wins.
 */
export class SqliteDocumentViews implements DocumentViews {
  private readonly getStmt: Database.Statement<[string], Row>;
  private readonly insertStmt: Database.Statement<unknown[]>;
  /** UPDATE statements by the set of FIELD_COLUMNS they set (a bit each), made when first needed. */
  private readonly updateStmts = new Map<number, Database.Statement<unknown[]>>();
  private readonly listStmts = new Map<string, Database.Statement<unknown[], unknown>>();
  private readonly setContentStmt: Database.Statement<[string, string]>;
  private readonly deleteContentStmt: Database.Statement<[string]>;
  private readonly deleteStmt: Database.Statement<[string]>;
  private readonly deleteIfStmt: Database.Statement<[string, number]>;
  private readonly firstPageStmt: Database.Statement<[number], Row>;
  private readonly nextPageStmt: Database.Statement<[string, number], Row>;
  private readonly countStmt: Database.Statement<[], { status: string; n: number }>;
  private readonly taggedStmt: Database.Statement<[string, number], { n: number }>;
  private readonly pageEndStmt: Database.Statement<[string, string, string, number], { created_at: string; id: string }>;
  private readonly tagsToStmt: Database.Statement<[string, string, string, string, string], { tags: string; n: number }>;
  private readonly tagsFromStmt: Database.Statement<[string, string, string], { tags: string; n: number }>;
  private readonly dataVersionStmt: Database.Statement<[], number>;
  /** Views by id, least recently used first; valid while data_version is `cacheDataVersion`. */
  private readonly cache = new Map<string, Cached>();
  private cacheDataVersion = -1;

  private constructor(
    private readonly db: Database.Database,
    private readonly tagIndexMax: number,
  ) {
    this.getStmt = db.prepare(`SELECT ${COLUMNS} FROM ${FROM} WHERE d.id = ?`);
    this.insertStmt = db.prepare(
      `INSERT INTO documents (id, ${FIELD_COLUMNS.join(', ')}, version) VALUES (?, ${FIELD_COLUMNS.map(() => '?').join(', ')}, ?) ON CONFLICT(id) DO NOTHING`,
    );
    // Unchanged content is not written again: the WHERE leaves its page clean.
    this.setContentStmt = db.prepare(
      'INSERT INTO document_content (id, content) VALUES (?, ?) ON CONFLICT(id) DO UPDATE SET content = excluded.content WHERE content IS NOT excluded.content',
    );
    this.deleteContentStmt = db.prepare('DELETE FROM document_content WHERE id = ?');
    this.deleteStmt = db.prepare('DELETE FROM documents WHERE id = ?');
    this.deleteIfStmt = db.prepare('DELETE FROM documents WHERE id = ? AND version = ?');
    this.firstPageStmt = db.prepare(`SELECT ${COLUMNS} FROM ${FROM} ORDER BY d.id LIMIT ?`);
    this.nextPageStmt = db.prepare(`SELECT ${COLUMNS} FROM ${FROM} WHERE d.id > ? ORDER BY d.id LIMIT ?`);
    this.countStmt = db.prepare('SELECT status, count(*) AS n FROM documents GROUP BY status');
    this.taggedStmt = db.prepare('SELECT count(*) AS n FROM (SELECT 1 FROM document_tags WHERE tag IN (SELECT value FROM json_each(?)) LIMIT ?)');
    // countByTag: keyset pages of one status along documents_status_created (the page's last key
    // from the index alone, then its documents grouped by tag list), so no statement stays open
    // between pages and SQLite, not JavaScript, counts the rows (a row object each cost twice as much).
    this.pageEndStmt = db.prepare('SELECT created_at, id FROM documents WHERE status = ? AND (created_at, id) > (?, ?) ORDER BY created_at, id LIMIT 1 OFFSET ?');
    this.tagsToStmt = db.prepare(
      'SELECT container_tags AS tags, count(*) AS n FROM documents WHERE status = ? AND (created_at, id) > (?, ?) AND (created_at, id) <= (?, ?) GROUP BY container_tags',
    );
    this.tagsFromStmt = db.prepare('SELECT container_tags AS tags, count(*) AS n FROM documents WHERE status = ? AND (created_at, id) > (?, ?) GROUP BY container_tags');
    this.dataVersionStmt = db.prepare<[], number>('PRAGMA data_version').pluck();
  }

  /** Open (creating if needed) the view store at `path`; safe to call from several processes at once. */
  /** `tagIndexMax`: see TAG_INDEX_MAX (the tests set it to read selections by tags both ways). */
  static open(path: string, opts: { tagIndexMax?: number } = {}): SqliteDocumentViews {
    if (path !== ':memory:' && !path.startsWith('file:')) mkdirSync(dirname(path), { recursive: true });
    const db = new Database(path);
    try {
      // busy_timeout first, so every later statement (the journal mode switch included) waits out another process's lock.
      db.pragma('busy_timeout = 5000');
      if (db.pragma('journal_mode', { simple: true }) !== 'wal') db.pragma('journal_mode = WAL');
      // In WAL mode NORMAL loses at most the last commits on power loss, never consistency; the projection can replay them.
      db.pragma('synchronous = NORMAL');
      registerFunctions(db);
      // IMMEDIATE takes the write lock up front, so two processes creating the schema serialise instead of deadlocking.
      db.transaction(() => migrate(db)).immediate();
      return new SqliteDocumentViews(db, opts.tagIndexMax ?? TAG_INDEX_MAX);
    } catch (err) {
      db.close();
      throw err;
    }
  }

  async get(id: string): Promise<DocumentView | null> {
    this.syncCache();
    return this.getNow(id);
  }

  async getMany(ids: string[]): Promise<Array<DocumentView | null>> {
    // One read transaction: one data_version check, and every row read from the same snapshot.
    return this.db.transaction(() => {
      this.syncCache();
      return ids.map((id) => this.getNow(id));
    })();
  }

  /** A remembered view, or the stored one (then remembered); syncCache has run. */
  private getNow(id: string): DocumentView | null {
    const hit = this.cache.get(id);
    if (hit) {
      this.remember(id, hit);
      return copyOf(hit.view, hit.view.version);
    }
    const row = this.getStmt.get(id);
    if (!row) return null;
    const view = fromRow(row);
    this.remember(id, { view: copyOf(view, view.version), fields: FIELD_COLUMNS.map((c) => row[c]) });
    return view;
  }

  async put(view: DocumentView, expectedVersion: number): Promise<boolean> {
    return (await this.writeMany([{ id: view.id, view, expectedVersion }]))[0]!;
  }

  async writeMany(writes: ViewWrite[]): Promise<boolean[]> {
    // What the writes leave in the store, remembered once they are committed (a rolled-back batch leaves the memory as it was).
    const after: Array<[string, Cached | null]> = [];
    // IMMEDIATE: no other connection commits between the data_version check and the writes, so a remembered row is the stored one.
    const results = this.db
      .transaction(() => {
        this.syncCache();
        return writes.map((w) => {
          if (w.view) return this.putNow(w.view, w.expectedVersion, after);
          const deleted = this.deleteIfStmt.run(w.id, w.expectedVersion).changes === 1;
          after.push([w.id, null]);
          return deleted;
        });
      })
      .immediate();
    for (const [id, cached] of after) {
      if (cached) this.remember(id, cached);
      else this.cache.delete(id);
    }
    return results;
  }

  /** One compare-and-set, inside the caller's transaction; what it leaves is pushed to `after` (null: not known). */
  private putNow(view: DocumentView, expectedVersion: number, after: Array<[string, Cached | null]>): boolean {
    if (!Number.isSafeInteger(expectedVersion) || expectedVersion < 0) {
      throw new RangeError(`expectedVersion must be a non-negative integer, got ${expectedVersion}`);
    }
    const fields = fieldsOf(view);
    const version = expectedVersion + 1;
    let written: boolean;
    let contentChanged = true;
    if (expectedVersion === 0) {
      written = this.insertStmt.run(view.id, ...fields, version).changes === 1;
    } else {
      // The remembered row at the expected version is the stored one whenever the compare-and-set succeeds.
      const known = this.cache.get(view.id);
      let mask = ALL_FIELDS;
      if (known && known.view.version === expectedVersion) {
        mask = 0;
        for (let i = 0; i < fields.length; i++) if (fields[i] !== known.fields[i]) mask |= 1 << i;
        contentChanged = known.view.content !== view.content;
      }
      const args: unknown[] = [version];
      for (let i = 0; i < fields.length; i++) if (mask & (1 << i)) args.push(fields[i]);
      args.push(view.id, expectedVersion);
      written = this.updateStmt(mask).run(...args).changes === 1;
    }
    if (written && contentChanged) {
      // JSON, as the rest of the record: SQLite's text would not keep a lone surrogate.
      if (view.content !== null) this.setContentStmt.run(view.id, JSON.stringify(view.content));
      else if (expectedVersion !== 0) this.deleteContentStmt.run(view.id);
    }
    after.push([view.id, written ? { view: copyOf(view, version), fields } : null]);
    return written;
  }

  /**
   * A list query's statement, prepared once per distinct SQL text (the filters a caller combines,
   * the sort), the newest LIST_STATEMENTS kept: two prepared per call made the gateway's
   * `GET /v3/documents/processing` 0.67 CPU-ms against 0.59 with them kept (1,000/s for 10 s).
   */
  private listStmt<R>(sql: string): Database.Statement<unknown[], R> {
    let stmt = this.listStmts.get(sql);
    if (stmt) this.listStmts.delete(sql);
    else stmt = this.db.prepare<unknown[], R>(sql);
    this.listStmts.set(sql, stmt);
    if (this.listStmts.size > LIST_STATEMENTS) this.listStmts.delete(this.listStmts.keys().next().value!);
    return stmt as Database.Statement<unknown[], R>;
  }

  private updateStmt(mask: number): Database.Statement<unknown[]> {
    let stmt = this.updateStmts.get(mask);
    if (!stmt) {
      const set = ['version = ?', ...FIELD_COLUMNS.filter((_, i) => mask & (1 << i)).map((c) => `${c} = ?`)];
      stmt = this.db.prepare(`UPDATE documents SET ${set.join(', ')} WHERE id = ? AND version = ?`);
      this.updateStmts.set(mask, stmt);
    }
    return stmt;
  }

  /** Forget every remembered view when another connection has committed since they were read. */
  private syncCache(): void {
    const dataVersion = this.dataVersionStmt.get()!;
    if (dataVersion !== this.cacheDataVersion) {
      this.cache.clear();
      this.cacheDataVersion = dataVersion;
    }
  }

  private remember(id: string, cached: Cached): void {
    this.cache.delete(id);
    if ((cached.view.content?.length ?? 0) > CACHE_MAX_CONTENT) return;
    this.cache.set(id, cached);
    if (this.cache.size > CACHE_MAX) this.cache.delete(this.cache.keys().next().value!);
  }

  async delete(id: string): Promise<boolean> {
    // The trigger documents_content_delete removes the content in the same statement.
    const deleted = this.deleteStmt.run(id).changes === 1;
    this.cache.delete(id);
    return deleted;
  }

  async list(query: ListQuery): Promise<{ items: DocumentView[]; total: number }> {
    checkCount('limit', query.limit);
    checkCount('offset', query.offset);
    const column = query.sort === 'createdAt' ? 'd.created_at' : 'd.updated_at';
    const dir = query.order === 'asc' ? 'ASC' : 'DESC';
    // One read transaction: the page and the total come from the same snapshot even while the writer commits.
    return this.db.transaction(() => {
      const { whereSql, params } = whereOf(query, this.fewTagged(query.containerTags));
      const countStmt = this.listStmt<{ n: number }>(`SELECT count(*) AS n FROM documents d ${whereSql}`);
      const pageStmt = this.listStmt<Row>(`SELECT ${COLUMNS} FROM ${FROM} ${whereSql} ORDER BY ${column} ${dir}, d.id ${dir} LIMIT ? OFFSET ?`);
      const total = countStmt.get(...params)?.n ?? 0;
      const items = pageStmt.all(...params, query.limit, query.offset).map(fromRow);
      return { items, total };
    })();
  }

  /**
   * Whether the asked tags have at most tagIndexMax documents between them (by document_tags,
   * reading no further than one past it): then a selection reads them from the tag index rather
   * than testing every document's tags.
   */
  private fewTagged(tags: string[] | undefined): boolean {
    if (!tags || tags.length === 0) return false;
    return (this.taggedStmt.get(JSON.stringify(tags), this.tagIndexMax + 1)?.n ?? 0) <= this.tagIndexMax;
  }

  async countByTag(statuses: readonly DocumentStatus[]): Promise<Map<string, number>> {
    const counts = new Map<string, number>();
    const add = (groups: Array<{ tags: string; n: number }>) => {
      for (const { tags, n } of groups) for (const t of new Set(JSON.parse(tags) as string[])) counts.set(t, (counts.get(t) ?? 0) + n);
    };
    for (const status of new Set(statuses)) {
      // Every key is after ('', ''): creation times are never empty.
      let after = { created_at: '', id: '' };
      for (;;) {
        const end = this.pageEndStmt.get(status, after.created_at, after.id, TAG_COUNT_PAGE - 1);
        if (!end) {
          add(this.tagsFromStmt.all(status, after.created_at, after.id));
          break;
        }
        add(this.tagsToStmt.all(status, after.created_at, after.id, end.created_at, end.id));
        after = end;
        await new Promise((r) => setImmediate(r));
        if (!this.db.open) throw new Error('the view store was closed during countByTag');
      }
    }
    return counts;
  }

  async countByStatus(): Promise<Record<DocumentStatus, number>> {
    const counts = Object.fromEntries(DOCUMENT_STATUSES.map((s) => [s, 0])) as Record<DocumentStatus, number>;
    for (const { status, n } of this.countStmt.all()) {
      if ((DOCUMENT_STATUSES as readonly string[]).includes(status)) counts[status as DocumentStatus] = n;
    }
    return counts;
  }

  async *all(): AsyncIterable<DocumentView> {
    // Keyset paging: no statement or read snapshot stays open between pages, so the writer's checkpoints are never held back.
    let after: string | null = null;
    for (;;) {
      const rows: Row[] = after === null ? this.firstPageStmt.all(PAGE_SIZE) : this.nextPageStmt.all(after, PAGE_SIZE);
      for (const row of rows) yield fromRow(row);
      const last = rows.at(-1);
      if (!last || rows.length < PAGE_SIZE) return;
      after = last.id;
    }
  }

  async ping(): Promise<void> {
    this.db.prepare('SELECT 1').get();
  }

  async close(): Promise<void> {
    if (this.db.open) this.db.close();
    this.cache.clear();
  }
}

/** How many list statements a connection keeps prepared (listStmt). */
const LIST_STATEMENTS = 64;

const SCHEMA = `
  CREATE TABLE IF NOT EXISTS documents (
    id TEXT PRIMARY KEY NOT NULL,
    custom_id TEXT,
    status TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    version INTEGER NOT NULL,
    revision INTEGER NOT NULL,
    container_tags TEXT NOT NULL,
    metadata TEXT NOT NULL,
    body TEXT NOT NULL
  );
  CREATE INDEX IF NOT EXISTS documents_status_created ON documents (status, created_at, id);
  CREATE INDEX IF NOT EXISTS documents_created ON documents (created_at, id);
  CREATE INDEX IF NOT EXISTS documents_updated ON documents (updated_at, id);
  CREATE INDEX IF NOT EXISTS documents_custom_id ON documents (custom_id);
  -- Schema 2: the content (as JSON), apart from the row the status changes rewrite; a document
  -- with no content has no row here.
  CREATE TABLE IF NOT EXISTS document_content (
    id TEXT PRIMARY KEY NOT NULL,
    content TEXT NOT NULL
  );
  CREATE TRIGGER IF NOT EXISTS documents_content_delete AFTER DELETE ON documents BEGIN
    DELETE FROM document_content WHERE id = old.id;
  END;
  -- Schema 3: every document's tags, for selections by a tag with few documents among many (see
  -- TAG_INDEX_MAX). Kept by triggers, so every writer keeps it (the projection, replay, a delete
  -- through the gateway); they fire when a document is made or deleted and when its tags change,
  -- not on the status changes that rewrite its row as it moves through the stages. A row is found
  -- by its (tag, id) key from the document's old tags: no second index to write.
  CREATE TABLE IF NOT EXISTS document_tags (
    tag TEXT NOT NULL,
    id TEXT NOT NULL,
    PRIMARY KEY (tag, id)
  ) WITHOUT ROWID;
  CREATE TRIGGER IF NOT EXISTS documents_tags_insert AFTER INSERT ON documents BEGIN
    INSERT OR IGNORE INTO document_tags (tag, id) SELECT value, new.id FROM json_each(new.container_tags);
  END;
  CREATE TRIGGER IF NOT EXISTS documents_tags_update AFTER UPDATE OF container_tags ON documents
  WHEN new.container_tags IS NOT old.container_tags BEGIN
    DELETE FROM document_tags WHERE tag IN (SELECT value FROM json_each(old.container_tags)) AND id = old.id;
    INSERT OR IGNORE INTO document_tags (tag, id) SELECT value, new.id FROM json_each(new.container_tags);
  END;
  CREATE TRIGGER IF NOT EXISTS documents_tags_delete AFTER DELETE ON documents BEGIN
    DELETE FROM document_tags WHERE tag IN (SELECT value FROM json_each(old.container_tags)) AND id = old.id;
  END;
`;

function migrate(db: Database.Database): void {
  const version = db.pragma('user_version', { simple: true }) as number;
  if (version > SCHEMA_VERSION) {
    throw new Error(`document view store has schema version ${version}; this build knows up to ${SCHEMA_VERSION}`);
  }
  if (version === SCHEMA_VERSION) return;
  db.exec(SCHEMA);
  if (version === 1) moveContentOut(db);
  // Schema 2 → 3: the tags of the documents already there (a new store has none).
  if (version >= 1 && version < 3) db.exec('INSERT OR IGNORE INTO document_tags (tag, id) SELECT t.value, d.id FROM documents d, json_each(d.container_tags) t');
  db.pragma(`user_version = ${SCHEMA_VERSION}`);
}

/** Schema 1 → 2: each content leaves the body JSON for document_content, a page of rows at a time. */
function moveContentOut(db: Database.Database): void {
  const page = db.prepare<[number], { rowid: number; id: string; body: string }>('SELECT rowid, id, body FROM documents WHERE rowid > ? ORDER BY rowid LIMIT 500');
  const setBody = db.prepare<[string, number]>('UPDATE documents SET body = ? WHERE rowid = ?');
  const insertContent = db.prepare<[string, string]>('INSERT OR REPLACE INTO document_content (id, content) VALUES (?, ?)');
  for (let after = 0; ; ) {
    const rows = page.all(after);
    for (const row of rows) {
      const { content, ...body } = JSON.parse(row.body) as Body & { content?: string | null };
      if (content !== undefined && content !== null) insertContent.run(row.id, JSON.stringify(content));
      setBody.run(JSON.stringify(body), row.rowid);
    }
    if (rows.length === 0) return;
    after = rows.at(-1)!.rowid;
  }
}

/**
 * JavaScript's own lowercasing and number parsing, callable from SQL: SQLite's lower() folds ASCII only
 * and its CAST accepts "12abc", so filters would otherwise disagree with `matchesFilter`.
 */
function registerFunctions(db: Database.Database): void {
  db.function('memstream_lower', { deterministic: true }, (s: unknown) => (typeof s === 'string' ? s.toLowerCase() : null));
  db.function('memstream_number', { deterministic: true }, (s: unknown) => {
    if (typeof s !== 'string' || s.trim() === '') return null;
    const n = Number(s);
    return Number.isNaN(n) ? null : n;
  });
}

/** The values a write stores in FIELD_COLUMNS, in that order. */
function fieldsOf(view: DocumentView): unknown[] {
  return [
    view.customId,
    view.status,
    view.createdAt,
    view.updatedAt,
    view.revision,
    JSON.stringify(view.containerTags),
    JSON.stringify(view.metadata),
    JSON.stringify(toBody(view)),
  ];
}

function toBody(view: DocumentView): Body {
  return {
    title: view.title,
    type: view.type,
    summary: view.summary,
    url: view.url,
    filepath: view.filepath,
    source: view.source,
    taskType: view.taskType,
    contentHash: view.contentHash,
    error: view.error,
    chunkCount: view.chunkCount,
    metadataVersion: view.metadataVersion,
  };
}

function fromRow(row: Row): DocumentView {
  const body = JSON.parse(row.body) as Body;
  return {
    id: row.id,
    customId: row.custom_id,
    revision: row.revision,
    status: row.status as DocumentStatus,
    title: body.title,
    type: body.type,
    content: row.content === null ? null : (JSON.parse(row.content) as string),
    summary: body.summary,
    url: body.url,
    filepath: body.filepath,
    source: body.source,
    metadata: JSON.parse(row.metadata) as DocumentView['metadata'],
    containerTags: JSON.parse(row.container_tags) as string[],
    taskType: body.taskType,
    contentHash: body.contentHash,
    error: body.error,
    chunkCount: body.chunkCount,
    metadataVersion: body.metadataVersion ?? 0,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    version: row.version,
  };
}

/**
 * A view of the same shape as `fromRow` gives, at `version`, sharing nothing mutable with `v`: what
 * is remembered cannot be changed by the caller that wrote it or by one that read it.
 */
function copyOf(v: DocumentView, version: number): DocumentView {
  return {
    id: v.id,
    customId: v.customId,
    revision: v.revision,
    status: v.status,
    title: v.title,
    type: v.type,
    content: v.content,
    summary: v.summary,
    url: v.url,
    filepath: v.filepath,
    source: v.source,
    metadata: Object.fromEntries(Object.entries(v.metadata).map(([k, x]) => [k, Array.isArray(x) ? [...x] : x])),
    containerTags: [...v.containerTags],
    taskType: v.taskType,
    contentHash: v.contentHash,
    error: v.error && { ...v.error },
    chunkCount: v.chunkCount,
    metadataVersion: v.metadataVersion,
    createdAt: v.createdAt,
    updatedAt: v.updatedAt,
    version,
  };
}

// Looked up rather than interpolated, so an operator that bypassed validation can never reach the SQL text.
const SQL_OPERATORS: Record<FilterCondition['numericOperator'], string> = { '>': '>', '<': '<', '>=': '>=', '<=': '<=', '=': '=' };

const TRUE: Sql = { sql: '1', params: [] };
const FALSE: Sql = { sql: '0', params: [] };

/**
 * Translate a filter into a boolean SQL expression over `d.metadata` with exactly `matchesFilter`'s semantics.
 * Each condition looks its key up with json_each and `key = ?` rather than a JSON path, so any key
 * (dots, quotes, brackets) is matched literally and only ever travels as a bound parameter.
 * Every fragment evaluates to 0 or 1, never NULL, so NOT gives the negation `matchesFilter` gives.
 */
function filterToSql(e: FilterExpr): Sql {
  if (e.op === 'and' || e.op === 'or') {
    if (e.items.length === 0) return e.op === 'and' ? TRUE : FALSE;
    const parts = e.items.map(filterToSql);
    return {
      sql: `(${parts.map((p) => p.sql).join(e.op === 'and' ? ' AND ' : ' OR ')})`,
      params: parts.flatMap((p) => p.params),
    };
  }
  const hit = conditionToSql(e);
  return e.negate ? { sql: `(NOT ${hit.sql})`, params: hit.params } : hit;
}

function norm(s: string, ignoreCase: boolean): string {
  return ignoreCase ? s.toLowerCase() : s;
}

/** Whether the metadata value under the condition's key exists (not null) and satisfies it. */
function conditionToSql(c: FilterCondition): Sql {
  const test = valueTest(c);
  if (test === null) return FALSE;
  return {
    sql: `EXISTS (SELECT 1 FROM json_each(d.metadata) m WHERE m.key = ? AND ${test.sql})`,
    params: [c.key, ...test.params],
  };
}

/** A predicate on the json_each row `m`, or null when no value can satisfy the condition. */
function valueTest(c: FilterCondition): Sql | null {
  const value = norm(c.value, c.ignoreCase);
  switch (c.filterType) {
    case 'numeric': {
      const target = Number(c.value);
      if (Number.isNaN(target)) return null;
      return {
        sql: `(CASE WHEN m.type IN ('integer', 'real') THEN m.value WHEN m.type = 'text' THEN memstream_number(m.value) END) ${SQL_OPERATORS[c.numericOperator]} ?`,
        params: [target],
      };
    }
    case 'array_contains':
      return anyElementEquals('m', value, c.ignoreCase);
    case 'string_contains': {
      const subject = c.ignoreCase ? 'memstream_lower(m.value)' : 'm.value';
      return { sql: `(m.type = 'text' AND instr(${subject}, ?) > 0)`, params: [value] };
    }
    case 'metadata': {
      const element = anyElementEquals('m', value, c.ignoreCase);
      const scalar = stringifiedEquals('m', value, c.ignoreCase);
      return { sql: `(${element.sql} OR ${scalar.sql})`, params: [...element.params, ...scalar.params] };
    }
  }
}

function anyElementEquals(alias: string, value: string, ignoreCase: boolean): Sql {
  const eq = stringifiedEquals('e', value, ignoreCase);
  return {
    sql: `(${alias}.type = 'array' AND EXISTS (SELECT 1 FROM json_each(${alias}.value) e WHERE ${eq.sql}))`,
    params: eq.params,
  };
}

/**
 * `norm(String(v)) === value` for the JSON value in json_each row `alias`, decided per JSON type:
 * a number equals `value` only when `value` is the number's canonical JavaScript spelling ("5", not "5.0"),
 * and a boolean only when `value` is "true" or "false". `value` is already normalised.
 */
function stringifiedEquals(alias: string, value: string, ignoreCase: boolean): Sql {
  const subject = ignoreCase ? `memstream_lower(${alias}.value)` : `${alias}.value`;
  const parts: string[] = [`(${alias}.type = 'text' AND ${subject} = ?)`];
  const params: unknown[] = [value];
  const n = Number(value);
  // String(n) is already lower case, so this also covers ignoreCase ("1E+21" normalised to "1e+21").
  if (Number.isFinite(n) && String(n) === value) {
    parts.push(`(${alias}.type IN ('integer', 'real') AND ${alias}.value = ?)`);
    params.push(n);
  }
  if (value === 'true') parts.push(`${alias}.type = 'true'`);
  if (value === 'false') parts.push(`${alias}.type = 'false'`);
  return { sql: `(${parts.join(' OR ')})`, params };
}

/** The WHERE clause of a list (its page and its total): tags, filepath, statuses and the metadata filter; tags through document_tags when `byTagIndex`. */
function whereOf(query: ListSelection, byTagIndex: boolean): { whereSql: string; params: unknown[] } {
  const where: Sql[] = [];
  if (query.containerTags && query.containerTags.length > 0) {
    // One JSON-array parameter however many tags are asked for, so no query nears SQLite's parameter limit.
    where.push({
      sql: byTagIndex
        ? 'd.id IN (SELECT id FROM document_tags WHERE tag IN (SELECT value FROM json_each(?)))'
        : 'EXISTS (SELECT 1 FROM json_each(d.container_tags) t WHERE t.value IN (SELECT value FROM json_each(?)))',
      params: [JSON.stringify(query.containerTags)],
    });
  }
  if (query.filepath !== undefined) {
    where.push(
      query.filepath.endsWith('/')
        ? { sql: "substr(json_extract(d.body, '$.filepath'), 1, length(?)) = ?", params: [query.filepath, query.filepath] }
        : { sql: "json_extract(d.body, '$.filepath') = ?", params: [query.filepath] },
    );
  }
  if (query.statuses && query.statuses.length > 0) {
    where.push({ sql: 'd.status IN (SELECT value FROM json_each(?))', params: [JSON.stringify(query.statuses)] });
  }
  if (query.filter) where.push(filterToSql(query.filter));
  const whereSql = where.length > 0 ? `WHERE ${where.map((w) => w.sql).join(' AND ')}` : '';
  const params = where.flatMap((w) => w.params);
  return { whereSql, params };
}
