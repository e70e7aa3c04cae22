import { createHash } from 'node:crypto';
import { cpSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { describeChunkIndexContract } from './contract.js';
import type { ReplaceDocumentInput } from './port.js';
import { SqliteChunkIndex } from './sqlite.js';
import { annDir, annFile } from './ann.js';

function tempIndex(opts: { vectorCacheBytes?: number; annMinRows?: number; postingsMinRows?: number } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'chunk-index-'));
  const path = join(dir, 'chunks.db');
  const index = SqliteChunkIndex.open(path, opts);
  const reopened: SqliteChunkIndex[] = [];
  return {
    path,
    index,
    reopen: async () => {
      const again = SqliteChunkIndex.open(path, opts);
      reopened.push(again);
      return again;
    },
    cleanup: async () => {
      await index.close();
      for (const r of reopened) await r.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

describeChunkIndexContract('SqliteChunkIndex', async () => tempIndex());
// The same suite with the in-memory vector matrix disabled: every dense query streams blobs.
describeChunkIndexContract('SqliteChunkIndex without vector cache', async () => tempIndex({ vectorCacheBytes: 0 }));
// The same suite with every dense search answered by the nearest-neighbour graph (at any size).
describeChunkIndexContract('SqliteChunkIndex through the ANN graph', async () => tempIndex({ annMinRows: 0 }));
// The same suite with every keyword search scored from the in-memory postings (at any size).
describeChunkIndexContract('SqliteChunkIndex through the keyword postings', async () => tempIndex({ postingsMinRows: 0 }));

function unit(seed: number, dim: number): Float32Array {
  let a = seed;
  const v = new Float32Array(dim);
  let norm = 0;
  for (let i = 0; i < dim; i++) {
    a = (Math.imul(a, 1103515245) + 12345) >>> 0;
    v[i] = a / 4294967296 - 0.5;
    norm += v[i]! * v[i]!;
  }
  for (let i = 0; i < dim; i++) v[i] = v[i]! / Math.sqrt(norm);
  return v;
}

function doc(id: string, revision: number, vectors: Float32Array[], tags = ['t']): ReplaceDocumentInput {
  return {
    documentId: id,
    revision,
    model: 'm',
    dim: vectors[0]?.length ?? 8,
    containerTags: tags,
    metadata: {},
    chunks: vectors.map((vector, index) => {
      const text = `${id} chunk ${index} rev ${revision}`;
      return { index, hash: createHash('sha256').update(text).digest('hex'), text, vector };
    }),
  };
}

describe('SqliteChunkIndex across processes sharing one file', () => {
  const handles: ReturnType<typeof tempIndex>[] = [];
  afterEach(async () => {
    for (const h of handles.splice(0)) await h.cleanup();
  });

  it("a reader's cached vectors follow the writer's commits (insert, change, delete)", async () => {
    const h = tempIndex();
    handles.push(h);
    const writer = h.index;
    const reader = await h.reopen();
    const dim = 16;
    await writer.replaceDocument(doc('a', 1, [unit(1, dim), unit(2, dim)]));
    await writer.replaceDocument(doc('b', 1, [unit(3, dim)]));
    const q = unit(4, dim);
    // Warm the reader's matrix.
    expect((await reader.search({ mode: 'dense', vector: q, model: 'm', limit: 10 })).length).toBe(3);

    // A new chunk that is the query itself must come first at once.
    await writer.replaceDocument(doc('c', 1, [q]));
    const afterInsert = await reader.search({ mode: 'dense', vector: q, model: 'm', limit: 10 });
    expect(afterInsert.map((x) => `${x.documentId}#${x.index}`)[0]).toBe('c#0');
    expect(afterInsert).toHaveLength(4);

    // Changing a chunk (new hash, new vector) replaces its row; the old vector must not linger.
    await writer.replaceDocument({ ...doc('a', 2, [unit(1, dim), q]) });
    const afterChange = await reader.search({ mode: 'dense', vector: q, model: 'm', limit: 2 });
    expect(afterChange.map((x) => `${x.documentId}#${x.index}`).sort()).toEqual(['a#1', 'c#0']);
    expect(afterChange.every((x) => Math.abs(x.score - 1) < 1e-6)).toBe(true);

    // Restricted queries use the rowid list of the new snapshot.
    await writer.deleteDocument('c');
    const restricted = await reader.search({ mode: 'dense', vector: q, model: 'm', containerTags: ['t'], limit: 10 });
    expect(restricted.map((x) => x.documentId).sort()).toEqual(['a', 'a', 'b']);
    expect(await reader.stats()).toEqual({ documents: 2, chunks: 3 });
  });

  it.each([
    ['an exact scan', Number.POSITIVE_INFINITY],
    ['the ANN graph', 0],
  ])('a reader that catches up from the change log answers like a brute-force scan, through many interleaved writes (%s)', async (_, annMinRows) => {
    // The reader keeps its matrix (and graph) and applies chunk_changes; every answer is checked
    // against the exact top-k of the chunks the store holds at that moment. Deleting the newest
    // document makes SQLite reuse its rowids (no AUTOINCREMENT on chunks), the case a "rowid >
    // last seen" shortcut would get wrong.
    const h = tempIndex({ annMinRows });
    handles.push(h);
    const writer = h.index;
    const reader = await h.reopen();
    const dim = 8;
    let seed = 1;
    let rnd = 7;
    const next = () => (rnd = (Math.imul(rnd, 1103515245) + 12345) >>> 0) / 4294967296;
    const live = new Map<string, { tags: string[]; vectors: Float32Array[] }>();
    const put = async (id: string, revision: number, tags: string[]) => {
      const vectors = Array.from({ length: 1 + Math.floor(next() * 4) }, () => unit(seed++, dim));
      await writer.replaceDocument(doc(id, revision, vectors, tags));
      live.set(id, { tags, vectors });
    };
    const check = async (tag?: string) => {
      const q = unit(seed++, dim);
      const expected = [...live.entries()]
        .filter(([, d]) => !tag || d.tags.includes(tag))
        .flatMap(([id, d]) => d.vectors.map((v, i) => ({ key: `${id}#${i}`, s: v.reduce((a, x, k) => a + x * q[k]!, 0) })))
        .sort((a, b) => b.s - a.s)
        .slice(0, 5);
      const got = await reader.search({ mode: 'dense', vector: q, model: 'm', limit: 5, ...(tag ? { containerTags: [tag] } : {}) });
      expect(got.map((x) => `${x.documentId}#${x.index}`)).toEqual(expected.map((e) => e.key));
    };
    for (let i = 0; i < 20; i++) await put(`d${i}`, 1, [`t${i % 3}`]);
    await check();
    for (let step = 0; step < 150; step++) {
      const r = next();
      const ids = [...live.keys()];
      const id = ids[Math.floor(next() * ids.length)]!;
      if (r < 0.35) await put(`n${step}`, 1, [`t${step % 3}`]);
      else if (r < 0.6) await put(id, 2 + step, live.get(id)!.tags);
      else if (r < 0.75 && live.size > 5) {
        await writer.deleteDocument(id);
        live.delete(id);
      } else if (r < 0.85) {
        // The newest document goes and comes back: its rowids are handed out again.
        const newest = ids.at(-1)!;
        await writer.deleteDocument(newest);
        live.delete(newest);
        await put(newest, 1, [`t${step % 3}`]);
      } else {
        const tags = [`t${step % 3}`];
        await writer.updateDocumentMeta(id, { containerTags: tags });
        live.get(id)!.tags = tags;
      }
      await check();
      await check(`t${step % 3}`);
    }
    // Every answer above came from catching up, not from reading all vectors again (a wrong
    // catch-up could otherwise hide behind the reload that follows a failed lookup).
    expect(reader.vectorCacheStats()).toEqual({ loads: 1, catchUps: 150 });
    const { ann, exact } = (reader as SqliteChunkIndex).annStats();
    if (annMinRows === 0) expect({ ann, exact }).toEqual({ ann: 301, exact: 0 });
    else expect(ann).toBe(0);
  });

  it('dense search over 10k chunks × 256 dims stays fast', async () => {
    const h = tempIndex();
    handles.push(h);
    const dim = 256;
    for (let d = 0; d < 1000; d++) {
      await h.index.replaceDocument(doc(`p${d}`, 1, Array.from({ length: 10 }, (_, i) => unit(d * 10 + i + 1, dim)), [`t${d % 10}`]));
    }
    expect(await h.index.stats()).toEqual({ documents: 1000, chunks: 10_000 });
    const times: number[] = [];
    for (let i = 0; i < 25; i++) {
      const q = unit(99_999 + i, dim);
      const t = performance.now();
      const hits = await h.index.search({ mode: 'dense', vector: q, model: 'm', limit: 10 });
      times.push(performance.now() - t);
      expect(hits).toHaveLength(10);
    }
    times.sort((a, b) => a - b);
    const median = times[12]!;
    // The target is well under 50 ms; the bound is loose because test machines are shared.
    expect(median).toBeLessThan(150);
  }, 120_000);
});

describe('SqliteChunkIndex keyword entries of a batch', () => {
  it('a batch naming one document twice: the chunks the second version deleted leave no words behind for a later row', async () => {
    // Keyword entries are written after the batch's other statements (addTerms): a chunk the
    // second version deleted must not get one, or the rowid, given out again, carries its words.
    const h = tempIndex();
    try {
      const doc = (documentId: string, revision: number, texts: string[]): ReplaceDocumentInput => ({
        documentId,
        revision,
        model: 'm',
        dim: 4,
        containerTags: [],
        metadata: {},
        chunks: texts.map((text, index) => ({ index, hash: createHash('sha256').update(text).digest('hex'), text, vector: unit(revision * 10 + index, 4) })),
      });
      await h.index.replaceDocuments([doc('d1', 1, ['apple one', 'cherry two']), doc('d1', 2, ['banana three'])]);
      await h.index.replaceDocument(doc('d2', 1, ['plain four']));
      expect(await h.index.search({ mode: 'keyword', text: 'cherry', limit: 5 })).toEqual([]);
      expect(await h.index.search({ mode: 'keyword', text: 'apple', limit: 5 })).toEqual([]);
      expect((await h.index.search({ mode: 'keyword', text: 'plain', limit: 5 })).map((x) => x.text)).toEqual(['plain four']);
      expect((await h.index.search({ mode: 'keyword', text: 'banana', limit: 5 })).map((x) => x.text)).toEqual(['banana three']);
    } finally {
      await h.cleanup();
    }
  });
});

describe('SqliteChunkIndex keyword postings', () => {
  it('give FTS5\'s BM25 ranking and scores, through interleaved writes by another connection, with and without tags', async () => {
    // A reader scoring from the postings (caught up from the change log), and one asking FTS5 for
    // the whole query, over the same file: every answer must agree (same chunks, same scores).
    const h = tempIndex({ postingsMinRows: 0 });
    const fts = SqliteChunkIndex.open(h.path, { postingsMinRows: Number.POSITIVE_INFINITY });
    try {
      const writer = h.index;
      const reader = await h.reopen();
      let rnd = 11;
      const next = () => (rnd = (Math.imul(rnd, 1103515245) + 12345) >>> 0) / 4294967296;
      // Zipf-like: a few words in most chunks (frequent, in the postings), a long tail in few (FTS5).
      const words = Array.from({ length: 300 }, (_, i) => `w${i.toString(36)}x${'abcdefghij'[i % 10]}`);
      const word = () => words[Math.floor(words.length * next() ** 3)]!;
      const text = () => Array.from({ length: 4 + Math.floor(next() * 30) }, word).join(' ');
      const put = async (id: string, revision: number) => {
        const chunks = Array.from({ length: 1 + Math.floor(next() * 4) }, (_, index) => {
          const t = `${text()} ${id}`;
          return { index, hash: createHash('sha256').update(t).digest('hex'), text: t, vector: unit(revision * 10 + index + 1, 8) };
        });
        await writer.replaceDocument({ documentId: id, revision, model: 'm', dim: 8, containerTags: [`t${Math.floor(next() * 3)}`], metadata: {}, chunks });
      };
      const same = async () => {
        for (let qn = 0; qn < 3; qn++) {
          const q = Array.from({ length: 2 + Math.floor(next() * 6) }, word).join(' ');
          for (const tags of [undefined, ['t1']]) {
            const query = { mode: 'keyword' as const, text: q, limit: 8, ...(tags ? { containerTags: tags } : {}) };
            const got = await reader.search(query);
            const want = await fts.search(query);
            expect(got.map((x) => x.score)).toEqual(want.map((x) => expect.closeTo(x.score, 9)));
            // Same chunks, except that ties at the same score may come in another order.
            const key = (x: { score: number; documentId: string; index: number }) => `${x.score.toFixed(9)} ${x.documentId}#${x.index}`;
            const last = want.at(-1)?.score ?? 0;
            expect(got.filter((x) => x.score - last > 1e-9).map(key).sort()).toEqual(want.filter((x) => x.score - last > 1e-9).map(key).sort());
          }
        }
      };
      for (let i = 0; i < 60; i++) await put(`d${i}`, 1);
      await same();
      const ids = () => Array.from({ length: 80 }, (_, i) => `d${i}`);
      for (let step = 0; step < 80; step++) {
        const r = next();
        const id = ids()[Math.floor(next() * 80)]!;
        if (r < 0.5) await put(id, 2 + step);
        else if (r < 0.7) await writer.deleteDocument(id);
        else if (r < 0.8) await writer.updateDocumentMeta(id, { containerTags: ['t1'] });
        else {
          // Several writes at once (more than a search catches up in place only with many rows).
          for (let k = 0; k < 5; k++) await put(`b${step}-${k}`, 1);
        }
        await same();
      }
      const stats = reader.keywordPathStats();
      expect(stats.fts).toBe(0);
      expect(stats.postings).toBe(81 * 6);
      expect(stats.builds).toBe(1);
      expect(stats.frequentTokens).toBeGreaterThan(20);
    } finally {
      await fts.close();
      await h.cleanup();
    }
  }, 120_000);

  it('are built in the background past a few thousand chunks, FTS5 answering meanwhile', async () => {
    const h = tempIndex({ postingsMinRows: 0 });
    try {
      const docs = Array.from({ length: 600 }, (_, d) => ({
        documentId: `p${d}`,
        revision: 1,
        model: 'm',
        dim: 8,
        containerTags: ['t'],
        metadata: {},
        chunks: Array.from({ length: 5 }, (_, index) => {
          const t = `common words appear here, chunk ${index} of page ${d} about topic${d % 37} and topic${d % 11}`;
          return { index, hash: createHash('sha256').update(t).digest('hex'), text: t, vector: unit(d * 5 + index + 1, 8) };
        }),
      }));
      await h.index.replaceDocuments(docs);
      const q = { mode: 'keyword' as const, text: 'common words about topic5', limit: 10 };
      const first = await h.index.search(q);
      expect(h.index.keywordPathStats()).toMatchObject({ fts: 1, postings: 0 });
      expect(await h.index.prepareKeyword()).toBe(true);
      const second = await h.index.search(q);
      expect(h.index.keywordPathStats()).toMatchObject({ fts: 1, postings: 1, builds: 1, rows: 3000 });
      expect(second.map((x) => x.score)).toEqual(first.map((x) => expect.closeTo(x.score, 9)));
      expect(second.map((x) => `${x.documentId}#${x.index}`)).toEqual(first.map((x) => `${x.documentId}#${x.index}`));
    } finally {
      await h.cleanup();
    }
  }, 120_000);
});

describe('SqliteChunkIndex nearest-neighbour graph', () => {
  it('is built in the background, saved beside the file, loaded by the next process, and never used with another file', async () => {
    const h = tempIndex({ annMinRows: 0 });
    const other = tempIndex({ annMinRows: 0 });
    try {
      const dim = 16;
      // 1,500 chunks: more than a search builds in place, so the graph is built in the background.
      for (let d = 0; d < 300; d++) {
        await h.index.replaceDocument(doc(`g${d}`, 1, Array.from({ length: 5 }, (_, i) => unit(d * 5 + i + 1, dim)), [`t${d % 4}`]));
      }
      const q = unit(424242, dim);
      const exact = await h.index.search({ mode: 'dense', vector: q, model: 'm', limit: 10 });
      expect(h.index.annStats()).toMatchObject({ ann: 0, exact: 1 });
      expect(await h.index.prepareAnn()).toEqual([{ model: 'm', dim, points: 1500 }]);
      const viaGraph = await h.index.search({ mode: 'dense', vector: q, model: 'm', limit: 10 });
      expect(h.index.annStats()).toMatchObject({ ann: 1, exact: 1, builds: 1, loads: 0 });
      expect(viaGraph.map((x) => `${x.documentId}#${x.index}`)).toEqual(exact.map((x) => `${x.documentId}#${x.index}`));
      expect(existsSync(annFile(h.path, 'm', dim))).toBe(true);

      // A change after the save, then a new process: it loads the graph and catches it up from the log.
      await h.index.replaceDocument(doc('fresh', 1, [q]));
      const reader = await h.reopen();
      expect(await reader.prepareAnn()).toEqual([{ model: 'm', dim, points: 1501 }]);
      const hits = await reader.search({ mode: 'dense', vector: q, model: 'm', limit: 3, containerTags: ['t'] });
      expect(hits.map((x) => x.documentId)).toEqual(['fresh']);
      expect(reader.annStats()).toMatchObject({ ann: 1, exact: 0, builds: 0, loads: 1 });

      // Another index file with this file's graphs copied beside it: their identity differs, so it builds its own.
      await other.index.replaceDocument(doc('x', 1, Array.from({ length: 3 }, (_, i) => unit(900 + i, dim))));
      await other.index.close();
      cpSync(annDir(h.path), annDir(other.path), { recursive: true });
      const third = await other.reopen();
      expect(await third.prepareAnn()).toEqual([{ model: 'm', dim, points: 3 }]);
      expect(third.annStats()).toMatchObject({ builds: 1, loads: 0 });
      expect((await third.search({ mode: 'dense', vector: q, model: 'm', limit: 10 })).map((x) => x.documentId)).toEqual(['x', 'x', 'x']);
    } finally {
      await h.cleanup();
      await other.cleanup();
    }
  }, 120_000);
});

describe('SqliteChunkIndex schema upgrade', () => {
  it('opens a schema-4 file (keyword entries written by an insert trigger): every chunk keeps one entry, as in a new file', async () => {
    const text = (d: number, i: number, rev: number) => `document ${d} part ${i} revision ${rev}: ${['listing directories', 'cake recipes', 'file systems', 'ledger replay'][(d + i + rev) % 4]} and more words ${d * 7 + i}`;
    const input = (d: number, rev: number, n: number): ReplaceDocumentInput => ({
      ...doc(`k${d}`, rev, Array.from({ length: n }, (_, i) => unit(d * 10 + i + rev, 8))),
      chunks: Array.from({ length: n }, (_, i) => ({ index: i, hash: createHash('sha256').update(text(d, i, rev)).digest('hex'), text: text(d, i, rev), vector: unit(d * 10 + i + rev, 8) })),
    });
    const before = [input(1, 1, 3), input(2, 1, 2), input(3, 1, 1)];
    // A batch after the upgrade: a new revision (chunks removed and added), a new document, an unchanged one.
    const after = [input(2, 2, 3), input(4, 1, 2), input(3, 1, 1)];
    const old = tempIndex();
    const fresh = tempIndex();
    try {
      await old.index.replaceDocuments(before);
      await old.index.close();
      const Database = (await import('better-sqlite3')).default;
      const raw = new Database(old.path);
      raw.exec(`
        CREATE TRIGGER chunks_fts_insert AFTER INSERT ON chunks BEGIN
          INSERT INTO chunks_fts (rowid, terms, bigrams) VALUES (new.rowid, ms_terms(new.text), ms_bigrams(new.text));
        END;
        PRAGMA user_version = 4;`);
      raw.close();
      const upgraded = await old.reopen();
      await upgraded.replaceDocuments(after);
      await fresh.index.replaceDocuments(before);
      await fresh.index.replaceDocuments(after);
      for (const q of ['listing directories', 'cake', 'file systems ledger', 'document words', 'revision 2']) {
        const got = await upgraded.search({ mode: 'keyword', text: q, limit: 20 });
        expect(got.length, q).toBeGreaterThan(0);
        expect(got, q).toEqual(await fresh.index.search({ mode: 'keyword', text: q, limit: 20 }));
      }
      expect(await upgraded.stats()).toEqual({ documents: 4, chunks: 9 });
    } finally {
      await old.cleanup();
      await fresh.cleanup();
    }
  });

  it('converts a schema-2 file (FTS5 over raw text) to analysed keyword terms on open', async () => {
    const h = tempIndex();
    try {
      const texts = ['Listing the directories of a file system', 'a cake recipe'];
      await h.index.replaceDocument({
        ...doc('old', 1, [unit(1, 8), unit(2, 8)]),
        chunks: texts.map((text, index) => ({ index, hash: createHash('sha256').update(text).digest('hex'), text, vector: unit(index + 1, 8) })),
      });
      await h.index.close();
      // Put the file back the way schema 2 left it: FTS5 with external content over chunks.text.
      const Database = (await import('better-sqlite3')).default;
      const raw = new Database(h.path);
      raw.exec(`
        DROP TRIGGER IF EXISTS chunks_fts_insert; DROP TRIGGER chunks_fts_delete; DROP TRIGGER chunks_fts_update;
        DROP TABLE chunks_fts_vocab; DROP TABLE chunks_fts;
        CREATE VIRTUAL TABLE chunks_fts USING fts5 (text, content = 'chunks', content_rowid = 'rowid', tokenize = 'unicode61 remove_diacritics 2');
        INSERT INTO chunks_fts (chunks_fts) VALUES ('rebuild');
        PRAGMA user_version = 2;`);
      raw.close();
      const again = await h.reopen();
      // "list directory" only matches through stems: the converted index has them.
      const hits = await again.search({ mode: 'keyword', text: 'list directory', limit: 5 });
      expect(hits.map((x) => x.text)).toEqual([texts[0]]);
      // Writes after the upgrade go through the new triggers.
      await again.deleteDocument('old');
      expect(await again.search({ mode: 'keyword', text: 'cakes', limit: 5 })).toEqual([]);
    } finally {
      await h.cleanup();
    }
  });
});
