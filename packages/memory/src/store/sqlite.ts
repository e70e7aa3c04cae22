import { createHash } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import { MemoryRecord, matchesFilter, type MemoryCommit } from '@memstream/contracts';
import { RRF_K, toFtsQuery } from '@memstream/chunk-index';
import type { Embedder } from '@memstream/embedder';
import { evolveMemories, isGone, memorizedBy, touchedIds } from '../evolve.js';
import { normalizeStatement } from '../resolve.js';
import type { MemoryHit, MemoryListQuery, MemorySearchQuery, MemoryStore, RelatedMemoriesQuery } from './port.js';

const SCHEMA = `
CREATE TABLE IF NOT EXISTS memories (
  id TEXT PRIMARY KEY,
  tag TEXT NOT NULL,
  is_latest INTEGER NOT NULL,
  is_forgotten INTEGER NOT NULL,
  forget_after TEXT,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  text TEXT NOT NULL,
  record TEXT NOT NULL,
  vector BLOB,
  root TEXT,
  attr TEXT,
  norm TEXT,
  is_static INTEGER
);
CREATE INDEX IF NOT EXISTS memories_tag ON memories (tag, is_latest, is_forgotten);
CREATE TABLE IF NOT EXISTS memory_documents (document_id TEXT NOT NULL, memory_id TEXT NOT NULL, PRIMARY KEY (document_id, memory_id));
CREATE TABLE IF NOT EXISTS memory_tags (tag TEXT PRIMARY KEY, seq INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS memorized (document_id TEXT NOT NULL, tag TEXT NOT NULL, revision INTEGER NOT NULL, PRIMARY KEY (document_id, tag));
CREATE VIRTUAL TABLE IF NOT EXISTS memories_fts USING fts5 (text, content = 'memories', content_rowid = 'rowid', tokenize = 'porter unicode61');
CREATE TRIGGER IF NOT EXISTS memories_fts_insert AFTER INSERT ON memories BEGIN
  INSERT INTO memories_fts (rowid, text) VALUES (new.rowid, new.text);
END;
CREATE TRIGGER IF NOT EXISTS memories_fts_delete AFTER DELETE ON memories BEGIN
  INSERT INTO memories_fts (memories_fts, rowid, text) VALUES ('delete', old.rowid, old.text);
END;
`;

// The keyword index follows a memory's text only when the text changes. The upsert names `text`
// in its SET list, and a trigger `AFTER UPDATE OF text` fires for that whatever the value: without
// the WHEN, every update of a memory (superseded, forgotten, linked, one more source) took its row
// out of FTS5 and put it back, writing new segment data each time for an index that had not
// changed (sqlite.contract.test.ts, "keyword index"). A file made before gets it at open
// (replaceUpdateTrigger).
const UPDATE_TRIGGER = `CREATE TRIGGER memories_fts_update AFTER UPDATE OF text ON memories WHEN old.text IS NOT new.text BEGIN
  INSERT INTO memories_fts (memories_fts, rowid, text) VALUES ('delete', old.rowid, old.text);
  INSERT INTO memories_fts (rowid, text) VALUES (new.rowid, new.text);
END`;

// The lookups the memorizer and the gateway make per document or request, so their cost does not
// grow with the tag's number of memories: by chain root, by (subject, attribute), by normalised
// statement, and the tag's newest live memories. Created after MIGRATE (older files lack the columns).
// Each lookup names its index (INDEXED BY): without statistics SQLite preferred memories_tag,
// which scans every live memory of the tag, and a sort column missing from an index made it sort
// them all; either made the cost per document grow with the tag again.
const INDEXES = `
DROP INDEX IF EXISTS memories_attr;
DROP INDEX IF EXISTS memories_norm;
DROP INDEX IF EXISTS memories_recent;
CREATE INDEX IF NOT EXISTS memories_root ON memories (root);
CREATE INDEX IF NOT EXISTS memories_by_attr ON memories (tag, attr, is_latest, is_forgotten);
CREATE INDEX IF NOT EXISTS memories_by_norm ON memories (tag, norm, is_latest, is_forgotten);
CREATE INDEX IF NOT EXISTS memories_by_recency ON memories (tag, is_latest, is_forgotten, is_static, updated_at, id);
`;
const LOOKUP_COLUMNS = ['root', 'attr', 'norm', 'is_static'] as const;

/** The key a memory's (subject, attribute) is looked up by. */
const attrKey = (a: { subject: string; key: string }) => `${a.subject}\u001f${a.key}`;

interface Row {
  rowid: number;
  id: string;
  record: string;
  vector: Buffer | null;
}

const BEST_RRF = 2 / (RRF_K + 1);

function toBlob(v: Float32Array): Buffer {
  return Buffer.from(v.buffer, v.byteOffset, v.byteLength);
}
function fromBlob(b: Buffer): Float32Array {
  const out = new Float32Array(b.byteLength >> 2);
  new Uint8Array(out.buffer).set(b);
  return out;
}

/**
 * The memory store in one SQLite file (`memories.sqlite` beside the other stores): records as
 * JSON with the columns search restricts on, FTS5 over the statement, and the statement's vector
 * for an exact dense scan. Metadata filters are applied in JS with `matchesFilter` to the tag's
 * rows before ranking (a tag's memories are few compared with its chunks). Writers: the
 * memorizer and the gateway (direct writes), each applying the commits it published; WAL and a
 * busy timeout let them and the readers share the file.
 */
export class SqliteMemoryStore implements MemoryStore {
  readonly model: string;
  private readonly s;

  private constructor(
    private readonly db: Database.Database,
    private readonly embedder: Embedder,
  ) {
    this.model = embedder.model;
    this.s = {
      get: db.prepare<[string], Row>('SELECT rowid, id, record, vector FROM memories WHERE id = ?'),
      upsert: db.prepare<[string, string, number, number, string | null, string, string, string, string, Buffer | null, string, string | null, string, number]>(
        `INSERT INTO memories (id, tag, is_latest, is_forgotten, forget_after, created_at, updated_at, text, record, vector, root, attr, norm, is_static)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (id) DO UPDATE SET is_latest = excluded.is_latest, is_forgotten = excluded.is_forgotten,
           forget_after = excluded.forget_after, updated_at = excluded.updated_at, record = excluded.record,
           text = excluded.text, vector = coalesce(excluded.vector, memories.vector), root = excluded.root,
           attr = excluded.attr, norm = excluded.norm, is_static = excluded.is_static`,
      ),
      byRoot: db.prepare<[string], Row>('SELECT rowid, id, record, NULL AS vector FROM memories INDEXED BY memories_root WHERE root = ?'),
      liveByAttr: db.prepare<[string, string], Row>(
        'SELECT rowid, id, record, NULL AS vector FROM memories INDEXED BY memories_by_attr WHERE tag = ? AND attr = ? AND is_latest = 1 AND is_forgotten = 0',
      ),
      liveByNorm: db.prepare<[string, string], Row>(
        'SELECT rowid, id, record, NULL AS vector FROM memories INDEXED BY memories_by_norm WHERE tag = ? AND norm = ? AND is_latest = 1 AND is_forgotten = 0',
      ),
      recentLive: db.prepare<[string, number, string, number], Row>(
        `SELECT rowid, id, record, NULL AS vector FROM memories INDEXED BY memories_by_recency
         WHERE tag = ? AND is_latest = 1 AND is_forgotten = 0 AND is_static = ? AND (forget_after IS NULL OR forget_after > ?)
         ORDER BY updated_at DESC, id DESC LIMIT ?`,
      ),
      linkDoc: db.prepare<[string, string]>('INSERT OR IGNORE INTO memory_documents (document_id, memory_id) VALUES (?, ?)'),
      tagSeq: db.prepare<[string], { seq: number }>('SELECT seq FROM memory_tags WHERE tag = ?'),
      setTagSeq: db.prepare<[string, number]>('INSERT INTO memory_tags (tag, seq) VALUES (?, ?) ON CONFLICT (tag) DO UPDATE SET seq = excluded.seq'),
      memorize: db.prepare<[string, string, number]>(
        'INSERT INTO memorized (document_id, tag, revision) VALUES (?, ?, ?) ON CONFLICT (document_id, tag) DO UPDATE SET revision = max(revision, excluded.revision)',
      ),
      memorized: db.prepare<[string, string], { revision: number }>('SELECT revision FROM memorized WHERE document_id = ? AND tag = ?'),
      byTag: db.prepare<[string], Row>('SELECT rowid, id, record, vector FROM memories WHERE tag = ? ORDER BY created_at, id'),
      byDoc: db.prepare<[string], Row>(
        'SELECT m.rowid, m.id, m.record, m.vector FROM memory_documents d JOIN memories m ON m.id = d.memory_id WHERE d.document_id = ? ORDER BY m.created_at, m.id',
      ),
      all: db.prepare<[], Row>('SELECT rowid, id, record, vector FROM memories ORDER BY id'),
      allTags: db.prepare<[], { tag: string; seq: number }>('SELECT tag, seq FROM memory_tags ORDER BY tag'),
      fts: db.prepare<[string, string], { rowid: number; rank: number }>(
        `SELECT m.rowid AS rowid, bm25(memories_fts) AS rank FROM memories_fts JOIN memories m ON m.rowid = memories_fts.rowid
         WHERE memories_fts MATCH ? AND m.tag IN (SELECT value FROM json_each(?)) ORDER BY rank LIMIT 1000`,
      ),
      ftsAll: db.prepare<[string], { rowid: number; rank: number }>(
        'SELECT rowid, bm25(memories_fts) AS rank FROM memories_fts WHERE memories_fts MATCH ? ORDER BY rank LIMIT 1000',
      ),
    };
  }

  /** Open (creating) the store at `path` (':memory:' for a private one); vectors are made with `embedder`. */
  static open(path: string, embedder: Embedder): SqliteMemoryStore {
    if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
    const db = new Database(path);
    db.pragma('busy_timeout = 5000');
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = NORMAL');
    db.exec(SCHEMA);
    migrate(db);
    db.exec(INDEXES);
    replaceUpdateTrigger(db);
    return new SqliteMemoryStore(db, embedder);
  }

  private parse(row: Row): MemoryRecord {
    return MemoryRecord.parse(JSON.parse(row.record));
  }

  async apply(commit: MemoryCommit, seq: number): Promise<boolean> {
    if (seq <= (this.s.tagSeq.get(commit.containerTag)?.seq ?? 0)) return false;
    // Vectors first (the embedder is async; the transaction is not).
    const texts = commit.changes.flatMap((c) => (c.type === 'memory.created.v1' || c.type === 'memory.versioned.v1' ? [c.memory] : []));
    const vectors = texts.length ? await this.embedder.embed(texts.map((m) => m.memory)) : [];
    const vectorOf = new Map(texts.map((m, i) => [m.id, vectors[i]]));
    return this.db.transaction(() => {
      // Checked again inside the transaction: another writer may have applied it meanwhile.
      if (seq <= (this.s.tagSeq.get(commit.containerTag)?.seq ?? 0)) return false;
      const before = new Map<string, MemoryRecord>();
      for (const id of touchedIds(commit)) {
        const row = this.s.get.get(id);
        if (row) before.set(id, this.parse(row));
      }
      const after = evolveMemories(before, commit);
      for (const [id, m] of after) {
        if (before.get(id) === m) continue;
        const v = vectorOf.get(id);
        this.s.upsert.run(id, m.containerTag, m.isLatest ? 1 : 0, m.isForgotten ? 1 : 0, m.forgetAfter, m.createdAt, m.updatedAt, m.memory, JSON.stringify(m), v ? toBlob(v) : null, ...lookupColumns(m));
        for (const d of m.documentIds) this.s.linkDoc.run(d, id);
      }
      this.s.setTagSeq.run(commit.containerTag, seq);
      for (const d of memorizedBy(commit)) this.s.memorize.run(d.documentId, commit.containerTag, d.revision);
      return true;
    })();
  }

  async tagSeq(tag: string): Promise<number> {
    return this.s.tagSeq.get(tag)?.seq ?? 0;
  }

  async get(id: string): Promise<MemoryRecord | null> {
    const row = this.s.get.get(id);
    return row ? this.parse(row) : null;
  }

  async chain(id: string): Promise<MemoryRecord[]> {
    const m = await this.get(id);
    if (!m) return [];
    return this.s.byRoot
      .all(m.rootMemoryId ?? m.id)
      .map((r) => this.parse(r))
      .sort((a, b) => a.version - b.version);
  }

  async related(tag: string, q: RelatedMemoriesQuery): Promise<MemoryRecord[]> {
    const rows = [
      ...q.attributes.flatMap((a) => this.s.liveByAttr.all(tag, attrKey(a))),
      ...q.statements.flatMap((t) => this.s.liveByNorm.all(tag, normalizeStatement(t))),
      ...q.ids.flatMap((id) => this.s.get.all(id)),
    ];
    const byId = new Map<string, MemoryRecord>();
    for (const r of rows) if (!byId.has(r.id)) byId.set(r.id, this.parse(r));
    return [...byId.values()].filter((m) => m.containerTag === tag && m.isLatest && !isGone(m, q.liveAt));
  }

  async recent(tag: string, q: { liveAt: Date; limit: number }): Promise<MemoryRecord[]> {
    const now = q.liveAt.toISOString();
    return [1, 0].flatMap((isStatic) => this.s.recentLive.all(tag, isStatic, now, q.limit).map((r) => this.parse(r)));
  }

  async tagMemories(tag: string, opts: { liveAt?: Date } = {}): Promise<MemoryRecord[]> {
    const all = this.s.byTag.all(tag).map((r) => this.parse(r));
    return opts.liveAt ? all.filter((m) => m.isLatest && !isGone(m, opts.liveAt!)) : all;
  }

  async documentMemories(documentId: string): Promise<MemoryRecord[]> {
    return this.s.byDoc.all(documentId).map((r) => this.parse(r));
  }

  async memorized(documentId: string, tag: string): Promise<{ revision: number } | null> {
    return this.s.memorized.get(documentId, tag) ?? null;
  }

  async list(q: MemoryListQuery): Promise<{ items: MemoryRecord[]; total: number }> {
    const tags = q.containerTags ?? this.s.allTags.all().map((t) => t.tag);
    let items = tags.flatMap((t) => this.s.byTag.all(t).map((r) => this.parse(r)));
    if (q.filter) items = items.filter((m) => matchesFilter(m.metadata, q.filter!));
    const dir = q.order === 'asc' ? 1 : -1;
    items.sort((a, b) => dir * (a[q.sort] < b[q.sort] ? -1 : a[q.sort] > b[q.sort] ? 1 : a.id < b.id ? -1 : 1));
    return { items: items.slice(q.offset, q.offset + q.limit), total: items.length };
  }

  async search(q: MemorySearchQuery): Promise<MemoryHit[]> {
    const tags = q.containerTags ?? this.s.allTags.all().map((t) => t.tag);
    const rows = tags.flatMap((t) => this.s.byTag.all(t));
    const eligible = new Map<number, { m: MemoryRecord; vector: Buffer | null }>();
    for (const r of rows) {
      const m = this.parse(r);
      if (!q.includeSuperseded && !m.isLatest) continue;
      if (!q.includeForgotten && isGone(m, q.now)) continue;
      if (q.filter && !matchesFilter(m.metadata, q.filter)) continue;
      eligible.set(r.rowid, { m, vector: r.vector });
    }
    if (eligible.size === 0) return [];
    const depth = Math.max(q.limit * 4, 50);
    // Dense: exact dot products (vectors are L2-normalised).
    const dense = [...eligible]
      .filter(([, e]) => e.vector && e.vector.byteLength === q.vector.byteLength)
      .map(([rowid, e]) => {
        const v = fromBlob(e.vector!);
        let dot = 0;
        for (let i = 0; i < v.length; i++) dot += v[i]! * q.vector[i]!;
        return { rowid, dot };
      })
      .sort((a, b) => b.dot - a.dot)
      .slice(0, depth);
    const fts = toFtsQuery(q.text);
    const keyword = fts ? (q.containerTags ? this.s.fts.all(fts, JSON.stringify(tags)) : this.s.ftsAll.all(fts)).filter((r) => eligible.has(r.rowid)).slice(0, depth) : [];
    const scores = new Map<number, number>();
    dense.forEach((d, i) => scores.set(d.rowid, (scores.get(d.rowid) ?? 0) + 1 / (RRF_K + i + 1)));
    keyword.forEach((k, i) => scores.set(k.rowid, (scores.get(k.rowid) ?? 0) + 1 / (RRF_K + i + 1)));
    return [...scores]
      .map(([rowid, s]) => ({ memory: eligible.get(rowid)!.m, score: Math.min(1, s / BEST_RRF) }))
      .sort((a, b) => b.score - a.score || (a.memory.id < b.memory.id ? -1 : 1))
      .slice(0, q.limit);
  }

  async digest(): Promise<string> {
    const h = createHash('sha256');
    for (const r of this.s.all.all()) h.update(r.record).update('\n');
    for (const t of this.s.allTags.all()) h.update(`${t.tag}=${t.seq}\n`);
    return h.digest('hex');
  }

  async ping(): Promise<void> {
    this.db.prepare('SELECT 1').get();
  }

  async close(): Promise<void> {
    if (this.db.open) this.db.close();
  }
}

/** The lookup columns of a record: chain root, (subject, attribute), normalised statement, static. */
function lookupColumns(m: MemoryRecord): [string, string | null, string, number] {
  return [m.rootMemoryId ?? m.id, m.attribute ? attrKey(m.attribute) : null, normalizeStatement(m.memory), m.isStatic ? 1 : 0];
}

/**
 * The update trigger as UPDATE_TRIGGER has it, whatever an earlier version created. In one
 * IMMEDIATE transaction: the gateway and the memorizer may open the file at the same moment.
 */
function replaceUpdateTrigger(db: Database.Database): void {
  db.transaction(() => {
    const have = db.prepare<[], { sql: string }>("SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = 'memories_fts_update'").get();
    if (have?.sql === UPDATE_TRIGGER) return;
    db.exec('DROP TRIGGER IF EXISTS memories_fts_update');
    db.exec(UPDATE_TRIGGER);
  }).immediate();
}

/** A file made before the lookup columns existed gets them, filled from each record (once). */
function migrate(db: Database.Database): void {
  const have = new Set((db.prepare('PRAGMA table_info(memories)').all() as { name: string }[]).map((c) => c.name));
  const missing = LOOKUP_COLUMNS.filter((c) => !have.has(c));
  if (missing.length === 0) return;
  db.transaction(() => {
    for (const c of missing) db.exec(`ALTER TABLE memories ADD COLUMN ${c} ${c === 'is_static' ? 'INTEGER' : 'TEXT'}`);
    const set = db.prepare<[string, string | null, string, number, string]>('UPDATE memories SET root = ?, attr = ?, norm = ?, is_static = ? WHERE id = ?');
    for (const r of db.prepare('SELECT id, record FROM memories').all() as { id: string; record: string }[]) {
      set.run(...lookupColumns(MemoryRecord.parse(JSON.parse(r.record))), r.id);
    }
  })();
}
