import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import type { MemoryCommit } from '@memstream/contracts';
import { firstVersion } from '../resolve.js';
import { contractEmbedder, describeMemoryStoreContract } from './contract.js';
import { SqliteMemoryStore } from './sqlite.js';

describeMemoryStoreContract('SqliteMemoryStore', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'memory-store-'));
  const store = SqliteMemoryStore.open(join(dir, 'memories.sqlite'), contractEmbedder);
  let k = 0;
  return {
    store,
    fresh: async () => SqliteMemoryStore.open(join(dir, `fresh-${k++}.sqlite`), contractEmbedder),
    cleanup: async () => {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});

describe('SqliteMemoryStore on a file made before the lookup columns', () => {
  it('adds them, filled from each record, so related and chain find what was stored', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'memory-store-old-'));
    const file = join(dir, 'memories.sqlite');
    const m = firstVersion('mem_oldrecord1', 'a', { memory: 'Priya lives in Lisbon.', isStatic: true, metadata: {}, attribute: { subject: 'user', key: 'lives_in', value: 'Lisbon' }, sources: [], extractor: 'x' }, '2026-01-01T00:00:00.000Z');
    const db = new Database(file);
    db.exec(`CREATE TABLE memories (id TEXT PRIMARY KEY, tag TEXT NOT NULL, is_latest INTEGER NOT NULL, is_forgotten INTEGER NOT NULL, forget_after TEXT,
      created_at TEXT NOT NULL, updated_at TEXT NOT NULL, text TEXT NOT NULL, record TEXT NOT NULL, vector BLOB)`);
    db.prepare('INSERT INTO memories VALUES (?, ?, 1, 0, NULL, ?, ?, ?, ?, NULL)').run(m.id, 'a', m.createdAt, m.updatedAt, m.memory, JSON.stringify(m));
    db.close();
    const store = SqliteMemoryStore.open(file, contractEmbedder);
    try {
      const liveAt = new Date('2026-02-01T00:00:00.000Z');
      expect((await store.related('a', { attributes: [{ subject: 'user', key: 'lives_in' }], statements: [], ids: [], liveAt })).map((x) => x.id)).toEqual([m.id]);
      expect((await store.chain(m.id)).map((x) => x.id)).toEqual([m.id]);
      expect((await store.recent('a', { liveAt, limit: 5 })).map((x) => x.id)).toEqual([m.id]);
    } finally {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('SqliteMemoryStore keyword index', () => {
  const at = '2026-01-01T00:00:00.000Z';
  const created = (id: string, text: string) => ({
    type: 'memory.created.v1' as const,
    memory: firstVersion(id, 'a', { memory: text, isStatic: false, metadata: {}, sources: [{ documentId: `src-${id}`, text: null }], extractor: 'direct' }, at),
  });
  const commit = (seq: number, changes: MemoryCommit['changes']): MemoryCommit => ({
    id: `c${seq}`,
    type: 'memory.committed.v1',
    containerTag: 'a',
    occurredAt: at,
    correlationId: `c${seq}`,
    cause: { kind: 'direct-write', documentId: `doc${seq}` },
    changes,
  });
  /** What FTS5 has written: its segment and structure records. */
  const ftsData = (file: string) => {
    const db = new Database(file, { readonly: true });
    try {
      return db.prepare('SELECT count(*) AS n, sum(length(block)) AS bytes FROM memories_fts_data').get();
    } finally {
      db.close();
    }
  };

  it('is not rewritten when a memory changes but its text does not (a file made with the earlier trigger too)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'memory-store-fts-'));
    const file = join(dir, 'memories.sqlite');
    // The earlier trigger, without WHEN: the store replaces it at open.
    const old = new Database(file);
    old.exec(`CREATE TABLE memories (id TEXT PRIMARY KEY, tag TEXT NOT NULL, is_latest INTEGER NOT NULL, is_forgotten INTEGER NOT NULL, forget_after TEXT,
      created_at TEXT NOT NULL, updated_at TEXT NOT NULL, text TEXT NOT NULL, record TEXT NOT NULL, vector BLOB);
      CREATE VIRTUAL TABLE memories_fts USING fts5 (text, content = 'memories', content_rowid = 'rowid', tokenize = 'porter unicode61');
      CREATE TRIGGER memories_fts_update AFTER UPDATE OF text ON memories BEGIN
        INSERT INTO memories_fts (memories_fts, rowid, text) VALUES ('delete', old.rowid, old.text);
        INSERT INTO memories_fts (rowid, text) VALUES (new.rowid, new.text);
      END;`);
    old.close();
    const store = SqliteMemoryStore.open(file, contractEmbedder);
    try {
      const ids = Array.from({ length: 12 }, (_, i) => `mem_fts${String(i).padStart(7, '0')}`);
      await store.apply(commit(1, ids.map((id, i) => created(id, `Note ${i}: the greenhouse needs watering on day ${i}.`))), 1);
      const before = ftsData(file);
      // Updates that leave every text as it is: forgotten, a source added, linked.
      await store.apply(commit(2, [{ type: 'memory.forgotten.v1', memoryId: ids[0]!, reason: 'asked', cause: 'user' }]), 2);
      await store.apply(commit(3, ids.slice(1).map((id) => ({ type: 'memory.source-added.v1' as const, memoryId: id, source: { documentId: 'd9', text: 'again' } }))), 3);
      await store.apply(commit(4, [{ type: 'memory.linked.v1', memoryId: ids[2]!, to: ids[1]!, relation: 'extends' }]), 4);
      expect(ftsData(file)).toEqual(before);
      const hits = await store.search({ containerTags: ['a'], text: 'greenhouse watering', vector: (await contractEmbedder.embed(['greenhouse watering']))[0]!, limit: 20, now: new Date(at) });
      expect(hits.map((h) => h.memory.id).sort()).toEqual(ids.slice(1));
    } finally {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
