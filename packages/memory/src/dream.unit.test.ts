import { describe, expect, it } from 'vitest';
import { HashedEmbedder } from '@memstream/embedder';
import type { MemoryCommit } from '@memstream/contracts';
import { DreamGroups } from './dream.js';
import { OfflineExtractor } from './extract/offline.js';
import type { MemoryLog } from './log.js';
import { memorizeDocument, memorizeGroup, type DocumentToMemorize, type MemorizeOutcome } from './memorize.js';
import { SqliteMemoryStore } from './store/sqlite.js';

let n = 0;
function doc(id: string, text: string, extra: Partial<DocumentToMemorize> = {}): DocumentToMemorize {
  n++;
  return {
    documentId: id,
    revision: 1,
    taskType: 'memory',
    containerTags: ['a'],
    metadata: {},
    entityContext: null,
    filterByMetadata: null,
    text,
    format: 'plain',
    documentDate: `2026-01-0${Math.min(9, n)}T00:00:00.000Z`,
    correlationId: `corr-${id}`,
    dreaming: 'dynamic',
    ...extra,
  };
}

/** Manual timers: `fire()` ends every window now. */
function clock() {
  const timers = new Map<number, () => void>();
  let k = 0;
  return {
    setTimer: (fn: () => void) => {
      timers.set(++k, fn);
      return k;
    },
    clearTimer: (t: unknown) => void timers.delete(t as number),
    fire: () => {
      const fns = [...timers.values()];
      timers.clear();
      fns.forEach((f) => f());
    },
    get armed() {
      return timers.size;
    },
  };
}

const tick = () => new Promise((r) => setTimeout(r, 0));

/** A grouper whose passes are recorded (tag and document ids), each completing when released. */
function recorder(opts: { maxDocs?: number; capacity?: number; fail?: boolean } = {}) {
  const c = clock();
  const passes: Array<{ tag: string; ids: string[] }> = [];
  const g = new DreamGroups({
    windowMs: 1500,
    maxDocs: opts.maxDocs ?? 8,
    capacity: opts.capacity ?? 16,
    setTimer: c.setTimer,
    clearTimer: c.clearTimer,
    run: async (tag, docs) => {
      passes.push({ tag, ids: docs.map((d) => d.documentId) });
      await tick();
      if (opts.fail) throw new Error('extractor down');
      return { containerTag: tag, commit: null } satisfies MemorizeOutcome;
    },
  });
  return { g, c, passes };
}

describe('dreaming groups', () => {
  it('dynamic: a tag\'s documents within the window make one pass, in arrival order; other tags their own', async () => {
    const { g, c, passes } = recorder();
    const settled: string[] = [];
    const p = [doc('d1', 'x'), doc('d2', 'x', { containerTags: ['b'] }), doc('d3', 'x')].map((d) => g.submit(d).then(() => settled.push(d.documentId)));
    await tick();
    expect(passes).toEqual([]);
    expect(settled).toEqual([]);
    expect(g.waitingDocuments).toBe(3);
    c.fire();
    await Promise.all(p);
    expect(passes).toEqual([
      { tag: 'a', ids: ['d1', 'd3'] },
      { tag: 'b', ids: ['d2'] },
    ]);
    expect(settled.sort()).toEqual(['d1', 'd2', 'd3']);
  });

  it('instant does not wait, and takes the tag\'s waiting documents with it so order holds', async () => {
    const { g, c, passes } = recorder();
    const first = g.submit(doc('d1', 'x'));
    const other = g.submit(doc('d2', 'x', { containerTags: ['b'] }));
    await g.submit(doc('d3', 'x', { dreaming: 'instant' }));
    await first;
    expect(passes).toEqual([{ tag: 'a', ids: ['d1', 'd3'] }]);
    expect(c.armed).toBe(1); // tag b still waits for its window
    c.fire();
    await other;
    await g.submit(doc('d4', 'x', { dreaming: 'instant' }));
    expect(passes.at(-1)).toEqual({ tag: 'a', ids: ['d4'] });
  });

  it('a full group goes at once; when every slot waits, the oldest group goes at once', async () => {
    const full = recorder({ maxDocs: 2 });
    await Promise.all([full.g.submit(doc('d1', 'x')), full.g.submit(doc('d2', 'x'))]);
    expect(full.passes).toEqual([{ tag: 'a', ids: ['d1', 'd2'] }]);
    expect(full.c.armed).toBe(0);

    // Two slots: d1 waits; d2 fills the last slot, so d1's group goes without waiting out its window.
    const busy = recorder({ capacity: 2 });
    const b1 = busy.g.submit(doc('d1', 'x'));
    const b2 = busy.g.submit(doc('d2', 'x', { containerTags: ['b'] }));
    await b1;
    expect(busy.passes.map((p) => p.ids)).toEqual([['d1']]);
    busy.c.fire();
    await b2;
    expect(busy.passes.map((p) => p.ids)).toEqual([['d1'], ['d2']]);
  });

  it('passes of one tag never overlap: the second group waits for the first', async () => {
    const c = clock();
    const log: string[] = [];
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const g = new DreamGroups({
      windowMs: 1500,
      maxDocs: 1,
      capacity: 16,
      setTimer: c.setTimer,
      clearTimer: c.clearTimer,
      run: async (tag, docs) => {
        log.push(`start ${docs[0]!.documentId}`);
        if (docs[0]!.documentId === 'd1') await gate;
        log.push(`end ${docs[0]!.documentId}`);
        return { containerTag: tag, commit: null };
      },
    });
    const a = g.submit(doc('d1', 'x'));
    const b = g.submit(doc('d2', 'x'));
    await tick();
    expect(log).toEqual(['start d1']);
    release();
    await Promise.all([a, b]);
    expect(log).toEqual(['start d1', 'end d1', 'start d2', 'end d2']);
  });

  it('a failed pass fails every document of the group (each message is redelivered), and the tag goes on', async () => {
    const { g, c } = recorder({ fail: true });
    const p = [g.submit(doc('d1', 'x')), g.submit(doc('d2', 'x'))];
    c.fire();
    for (const x of p) await expect(x).rejects.toThrow('extractor down');
    expect(g.waitingDocuments).toBe(0);
  });

  it('superrag documents are not grouped and make nothing', async () => {
    const { g, passes } = recorder();
    expect(await g.submit(doc('d1', 'x', { taskType: 'superrag' }))).toEqual([]);
    expect(passes).toEqual([]);
  });
});

/** A MemoryLog over a store without a broker: commits get sequence numbers in order and are applied. */
function localLog(store: SqliteMemoryStore) {
  let seq = 0;
  const commits: Array<[MemoryCommit, number]> = [];
  const log = {
    store,
    commit: async (_tag: string, decide: () => Promise<MemoryCommit | null>) => {
      const c = await decide();
      if (!c) return null;
      seq++;
      commits.push([c, seq]);
      await store.apply(c, seq);
      return { commit: c, seq };
    },
  } as unknown as MemoryLog;
  return { log, commits };
}

describe('memorizeGroup: one pass over a burst', () => {
  const embedder = new HashedEmbedder({ dim: 64 });
  const now = () => new Date('2026-02-01T00:00:00.000Z');

  it('one commit for the burst; a later document of it updates an earlier one\'s memory; all are memorized; a replay gives the same store', async () => {
    const store = SqliteMemoryStore.open(':memory:', embedder);
    const { log, commits } = localLog(store);
    const ports = { log, extractor: new OfflineExtractor(), now };
    const burst = [
      doc('m1', 'My name is Priya Raman.', { documentDate: '2026-01-01T00:00:00.000Z' }),
      doc('m2', 'I live in Lisbon.', { documentDate: '2026-01-02T00:00:00.000Z' }),
      doc('m3', 'I moved to Berlin last month.', { documentDate: '2026-01-20T00:00:00.000Z' }),
    ];
    const out = await memorizeGroup(ports, 'a', burst);
    expect(commits).toHaveLength(1);
    const cause = out.commit!.cause;
    expect(cause.kind).toBe('extraction-group');
    if (cause.kind !== 'extraction-group') return;
    expect(cause.documents.map((d) => d.documentId)).toEqual(['m1', 'm2', 'm3']);
    // Each document's share of the changes, in order (the notifier names each change's document by it).
    expect(cause.documents.reduce((s, d) => s + d.changes!, 0)).toBe(out.commit!.changes.length);
    expect(cause.documents.every((d) => d.changes! > 0)).toBe(true);
    for (const d of burst) expect(await store.memorized(d.documentId, 'a')).toEqual({ revision: 1 });
    const live = await store.tagMemories('a', { liveAt: now() });
    expect(live.map((m) => m.memory).sort()).toEqual(['Priya Raman lives in Berlin.', "The user's name is Priya Raman."]);
    const berlin = live.find((m) => /Berlin/.test(m.memory))!;
    expect(berlin).toMatchObject({ version: 2, documentIds: ['m3'] });
    expect((await store.get(berlin.parentMemoryId!))?.memory).toMatch(/^Priya Raman lives in Lisbon\.$/);
    // Redelivered (a crash after the commit): nothing more.
    expect((await memorizeGroup(ports, 'a', burst)).commit).toBeNull();
    const rebuilt = SqliteMemoryStore.open(':memory:', embedder);
    for (const [c, s] of commits) await rebuilt.apply(c, s);
    expect(await rebuilt.digest()).toBe(await store.digest());
  });

  it('the same documents one by one end in the same memories (a group changes how many commits, not what is learned)', async () => {
    const texts = ['My name is Priya Raman.', 'I live in Lisbon. I work as a nurse.', 'I moved to Berlin last month.', 'I work as a nurse.'];
    const docsOf = () => texts.map((t, i) => doc(`s${i}`, t, { documentDate: `2026-01-1${i}T00:00:00.000Z` }));
    const grouped = SqliteMemoryStore.open(':memory:', embedder);
    await memorizeGroup({ log: localLog(grouped).log, extractor: new OfflineExtractor(), now }, 'a', docsOf());
    const single = SqliteMemoryStore.open(':memory:', embedder);
    const singleLog = localLog(single).log;
    for (const d of docsOf()) await memorizeDocument({ log: singleLog, extractor: new OfflineExtractor(), now }, d);
    const shape = async (s: SqliteMemoryStore) =>
      (await s.tagMemories('a')).map((m) => `${m.memory}|v${m.version}|latest=${m.isLatest}|${m.documentIds.join(',')}`).sort();
    expect(await shape(grouped)).toEqual(await shape(single));
  });

  it('a group leaves out documents already memorized and older revisions of one in the group', async () => {
    const store = SqliteMemoryStore.open(':memory:', embedder);
    const { log, commits } = localLog(store);
    const ports = { log, extractor: new OfflineExtractor(), now };
    await memorizeDocument(ports, doc('k1', 'I live in Lisbon.'));
    await memorizeGroup(ports, 'a', [doc('k1', 'I live in Lisbon.'), doc('k2', 'I speak Portuguese.'), doc('k2', 'I speak Portuguese and German.', { revision: 2 })]);
    const last = commits.at(-1)![0];
    // One document left: the single-document commit, exactly as without groups.
    expect(last.cause).toMatchObject({ kind: 'extraction', documentId: 'k2', revision: 2 });
    expect(last.id).toBe('mem:k2:2:a');
  });
});
