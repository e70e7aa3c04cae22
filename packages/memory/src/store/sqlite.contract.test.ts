import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
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
