import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import { DOCUMENT_STATUSES } from '@memstream/contracts';
import type { DocumentStatus, FilterCondition, FilterExpr } from '@memstream/contracts';
import type { DocumentView, DocumentViews, ListQuery, ViewWrite } from './port.js';

const SCHEMA_VERSION = 1;
const PAGE_SIZE = 100;

/** The record fields that live in the `body` JSON column rather than in their own column. */
type Body = Pick<
  DocumentView,
  | 'title'
  | 'type'
  | 'content'
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
}

/** A SQL fragment with its positional parameters, in the order their `?` appear. */
interface Sql {
  sql: string;
  params: unknown[];
}

const COLUMNS = 'id, custom_id, status, created_at, updated_at, version, revision, container_tags, metadata, body';

/**
 * The document view store in one SQLite file, shared by one writer process and several reader
 * processes: WAL lets readers proceed while the writer commits, and busy_timeout makes the short
 * write locks wait rather than fail.
 */
export class SqliteDocumentViews implements DocumentViews {
  private readonly getStmt: Database.Statement<[string], Row>;
  private readonly insertStmt: Database.Statement<unknown[]>;
  private readonly updateStmt: Database.Statement<unknown[]>;
  private readonly deleteStmt: Database.Statement<[string]>;
  private readonly deleteIfStmt: Database.Statement<[string, number]>;
  private readonly firstPageStmt: Database.Statement<[number], Row>;
  private readonly nextPageStmt: Database.Statement<[string, number], Row>;
  private readonly countStmt: Database.Statement<[], { status: string; n: number }>;

  private constructor(private readonly db: Database.Database) {
    this.getStmt = db.prepare(`SELECT ${COLUMNS} FROM documents WHERE id = ?`);
    this.insertStmt = db.prepare(
      `INSERT INTO documents (${COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO NOTHING`,
    );
    this.updateStmt = db.prepare(
      `UPDATE documents SET custom_id = ?, status = ?, created_at = ?, updated_at = ?, version = ?, revision = ?,
         container_tags = ?, metadata = ?, body = ?
       WHERE id = ? AND version = ?`,
    );
    this.deleteStmt = db.prepare('DELETE FROM documents WHERE id = ?');
    this.deleteIfStmt = db.prepare('DELETE FROM documents WHERE id = ? AND version = ?');
    this.firstPageStmt = db.prepare(`SELECT ${COLUMNS} FROM documents ORDER BY id LIMIT ?`);
    this.nextPageStmt = db.prepare(`SELECT ${COLUMNS} FROM documents WHERE id > ? ORDER BY id LIMIT ?`);
    this.countStmt = db.prepare('SELECT status, count(*) AS n FROM documents GROUP BY status');
  }

  /** Open (creating if needed) the view store at `path`; safe to call from several processes at once. */
  static open(path: string): SqliteDocumentViews {
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
      return new SqliteDocumentViews(db);
    } catch (err) {
      db.close();
      throw err;
    }
  }

  async get(id: string): Promise<DocumentView | null> {
    const row = this.getStmt.get(id);
    return row ? fromRow(row) : null;
  }

  async put(view: DocumentView, expectedVersion: number): Promise<boolean> {
    return this.putNow(view, expectedVersion);
  }

  async writeMany(writes: ViewWrite[]): Promise<boolean[]> {
    return this.db.transaction(() =>
      writes.map((w) => (w.view ? this.putNow(w.view, w.expectedVersion) : this.deleteIfStmt.run(w.id, w.expectedVersion).changes === 1)),
    )();
  }

  private putNow(view: DocumentView, expectedVersion: number): boolean {
    if (!Number.isSafeInteger(expectedVersion) || expectedVersion < 0) {
      throw new RangeError(`expectedVersion must be a non-negative integer, got ${expectedVersion}`);
    }
    const fields = [
      view.customId,
      view.status,
      view.createdAt,
      view.updatedAt,
      expectedVersion + 1,
      view.revision,
      JSON.stringify(view.containerTags),
      JSON.stringify(view.metadata),
      JSON.stringify(toBody(view)),
    ];
    const result =
      expectedVersion === 0
        ? this.insertStmt.run(view.id, ...fields)
        : this.updateStmt.run(...fields, view.id, expectedVersion);
    return result.changes === 1;
  }

  async delete(id: string): Promise<boolean> {
    return this.deleteStmt.run(id).changes === 1;
  }

  async list(query: ListQuery): Promise<{ items: DocumentView[]; total: number }> {
    checkPaging(query.limit, query.offset);
    const where: Sql[] = [];
    if (query.containerTags && query.containerTags.length > 0) {
      // One JSON-array parameter however many tags are asked for, so no query nears SQLite's parameter limit.
      where.push({
        sql: 'EXISTS (SELECT 1 FROM json_each(d.container_tags) t WHERE t.value IN (SELECT value FROM json_each(?)))',
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
    const column = query.sort === 'createdAt' ? 'd.created_at' : 'd.updated_at';
    const dir = query.order === 'asc' ? 'ASC' : 'DESC';
    const countStmt = this.db.prepare<unknown[], { n: number }>(`SELECT count(*) AS n FROM documents d ${whereSql}`);
    const pageStmt = this.db.prepare<unknown[], Row>(
      `SELECT ${COLUMNS} FROM documents d ${whereSql} ORDER BY ${column} ${dir}, d.id ${dir} LIMIT ? OFFSET ?`,
    );
    // One read transaction: the page and the total come from the same snapshot even while the writer commits.
    return this.db.transaction(() => {
      const total = countStmt.get(...params)?.n ?? 0;
      const items = pageStmt.all(...params, query.limit, query.offset).map(fromRow);
      return { items, total };
    })();
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
  }
}

function migrate(db: Database.Database): void {
  const version = db.pragma('user_version', { simple: true }) as number;
  if (version > SCHEMA_VERSION) {
    throw new Error(`document view store has schema version ${version}; this build knows up to ${SCHEMA_VERSION}`);
  }
  db.exec(`
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
  `);
  db.pragma(`user_version = ${SCHEMA_VERSION}`);
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

function checkPaging(limit: number, offset: number): void {
  if (!Number.isSafeInteger(limit) || limit < 0) throw new RangeError(`limit must be a non-negative integer, got ${limit}`);
  if (!Number.isSafeInteger(offset) || offset < 0) throw new RangeError(`offset must be a non-negative integer, got ${offset}`);
}

function toBody(view: DocumentView): Body {
  return {
    title: view.title,
    type: view.type,
    content: view.content,
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
    content: body.content,
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
