import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { describeDocumentViewsContract } from './contract.js';
import { SqliteDocumentViews } from './sqlite.js';
import type { DocumentView, DocumentViews } from './port.js';

/** The contract with selections by tags read from the tag index (small tags, as in the fixtures) and by a scan of every document's tags. */
for (const [name, tagIndexMax] of [
  ['SqliteDocumentViews', undefined],
  ['SqliteDocumentViews, tags by scan', -1],
] as const) {
  describeDocumentViewsContract(name, async () => {
    const dir = await mkdtemp(join(tmpdir(), 'memstream-views-'));
    const path = join(dir, 'views.sqlite');
    let views: SqliteDocumentViews;
    try {
      views = SqliteDocumentViews.open(path, { tagIndexMax });
    } catch (err) {
      await rm(dir, { recursive: true, force: true });
      throw err;
    }
    const opened: DocumentViews[] = [views];
    return {
      views,
      reopen: async () => {
        const another = SqliteDocumentViews.open(path, { tagIndexMax });
        opened.push(another);
        return another;
      },
      cleanup: async () => {
        for (const v of opened) await v.close();
        await rm(dir, { recursive: true, force: true });
      },
    };
  });
}

describe('SqliteDocumentViews: the file', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'memstream-views-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('keeps a content with a lone surrogate exactly, as JSON does', async () => {
    const path = join(dir, 'views.sqlite');
    const content = 'half a pair \ud800 then \udc00 and a whole 😀';
    const views = SqliteDocumentViews.open(path);
    await views.put(view('d1', { content }), 0);
    await views.close();
    const reopened = SqliteDocumentViews.open(path);
    expect((await reopened.get('d1'))?.content).toBe(content);
    await reopened.close();
  });

  it('a view with a long content (not kept in memory) moves on through writes like any other', async () => {
    const views = SqliteDocumentViews.open(join(dir, 'views.sqlite'));
    const content = 'a long extracted text. '.repeat(10_000);
    await views.put(view('big', { content }), 0);
    expect(await views.put(view('big', { content, status: 'chunking', version: 1 }), 1)).toBe(true);
    expect(await views.put(view('big', { content, status: 'done', chunkCount: 3, version: 2 }), 2)).toBe(true);
    expect(await views.put(view('big', { content, status: 'queued', version: 1 }), 1)).toBe(false);
    expect(await views.get('big')).toMatchObject({ status: 'done', chunkCount: 3, version: 3, content });
    await views.close();
  });

  it('opens a schema 1 file: each content moves out of the body, every tag is indexed, every view reads as before', async () => {
    const path = join(dir, 'views.sqlite');
    const db = new Database(path);
    db.exec(`
      CREATE TABLE documents (id TEXT PRIMARY KEY NOT NULL, custom_id TEXT, status TEXT NOT NULL, created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL, version INTEGER NOT NULL, revision INTEGER NOT NULL, container_tags TEXT NOT NULL,
        metadata TEXT NOT NULL, body TEXT NOT NULL);
      CREATE INDEX documents_status_created ON documents (status, created_at, id);
      CREATE INDEX documents_created ON documents (created_at, id);
      CREATE INDEX documents_updated ON documents (updated_at, id);
      CREATE INDEX documents_custom_id ON documents (custom_id);
      PRAGMA user_version = 1;`);
    // Rows as schema 1 wrote them: the content inside the body JSON. More than one page of the migration.
    const insert = db.prepare('INSERT INTO documents VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)');
    const expected: DocumentView[] = [];
    db.exec('BEGIN');
    for (let i = 0; i < 1203; i++) {
      const v = view(`d${String(i).padStart(5, '0')}`, {
        content: i % 7 === 0 ? null : `text ${i} "quoted" \u0000 \ud800 😀`,
        status: i % 2 ? 'done' : 'extracting',
        metadata: { i, list: ['a', String(i)] },
        containerTags: [`t${i % 3}`],
        customId: i % 5 ? null : `c${i}`,
        error: i % 11 ? null : { stage: 'chunking', reason: `r${i}`, class: 'exhausted' },
        version: 3,
      });
      const { id, customId, status, createdAt, updatedAt, version, revision, containerTags, metadata, ...rest } = v;
      const body = { title: rest.title, type: rest.type, content: rest.content, summary: rest.summary, url: rest.url, filepath: rest.filepath, source: rest.source, taskType: rest.taskType, contentHash: rest.contentHash, error: rest.error, chunkCount: rest.chunkCount, metadataVersion: rest.metadataVersion };
      insert.run(id, customId, status, createdAt, updatedAt, version, revision, JSON.stringify(containerTags), JSON.stringify(metadata), JSON.stringify(body));
      expected.push(v);
    }
    db.exec('COMMIT');
    db.close();

    const views = SqliteDocumentViews.open(path);
    try {
      const all: DocumentView[] = [];
      for await (const v of views.all()) all.push(v);
      expect(all).toStrictEqual(expected);
      expect(await views.get('d00001')).toStrictEqual(expected[1]);
      // Written on as any schema 2 view: the compare-and-set holds, the content follows.
      expect(await views.put(view('d00001', { content: 'new text', status: 'done', version: 9 }), 3)).toBe(true);
      expect(await views.put(view('d00001', { content: 'stale' }), 3)).toBe(false);
      expect(await views.get('d00001')).toStrictEqual(view('d00001', { content: 'new text', status: 'done', version: 4 }));
    } finally {
      await views.close();
    }
    // Schema 3's tag index holds every document already there, and a selection reads the same both ways.
    for (const tagIndexMax of [undefined, -1]) {
      const reopened = SqliteDocumentViews.open(path, { tagIndexMax });
      const t1 = await reopened.list({ containerTags: ['t1'], sort: 'createdAt', order: 'asc', limit: 2, offset: 0 });
      // 401 were made with t1; d00001 was written on above without tags.
      expect(t1.total).toBe(400);
      expect(t1.items.map((v) => v.id)).toStrictEqual(['d00004', 'd00007']);
      await reopened.close();
    }
    const check = new Database(path, { readonly: true });
    expect(check.pragma('user_version', { simple: true })).toBe(3);
    expect(check.prepare('SELECT count(*) FROM document_tags').pluck().get()).toBe(1202);
    expect(check.prepare("SELECT count(*) FROM documents WHERE json_extract(body, '$.content') IS NOT NULL OR body LIKE '%\"content\"%'").pluck().get()).toBe(0);
    expect(check.prepare('SELECT count(*) FROM document_content').pluck().get()).toBe(expected.filter((v) => v.content !== null).length);
    check.close();
  });
});

function view(id: string, overrides: Partial<DocumentView> = {}): DocumentView {
  return {
    id,
    customId: null,
    revision: 1,
    status: 'queued',
    title: 'a title',
    type: 'text',
    content: 'content',
    summary: null,
    url: null,
    filepath: null,
    source: null,
    metadata: {},
    containerTags: [],
    taskType: 'superrag',
    contentHash: 'ab'.repeat(32),
    error: null,
    chunkCount: 0,
    metadataVersion: 0,
    createdAt: '2024-03-01T00:00:00.000Z',
    updatedAt: '2024-03-01T00:00:01.000Z',
    version: 0,
    ...overrides,
  };
}
