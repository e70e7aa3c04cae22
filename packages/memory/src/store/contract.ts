import { afterEach, describe, expect, it } from 'vitest';
import { Filters, type MemoryChange, type MemoryCommit, type MemoryRecord } from '@memstream/contracts';
import { HashedEmbedder } from '@memstream/embedder';
import { firstVersion, nextVersion } from '../resolve.js';
import type { MemoryStore } from './port.js';

/** What an adapter's test file hands the suite: a fresh store (hashed embeddings) and how to drop it. */
export interface MemoryStoreHandle {
  store: MemoryStore;
  /** A second, empty store of the same kind, for replay comparisons. */
  fresh: () => Promise<MemoryStore>;
  cleanup: () => Promise<void>;
}

export const contractEmbedder = new HashedEmbedder({ dim: 64 });

const T0 = '2026-01-01T00:00:00.000Z';
let n = 0;
function commit(tag: string, changes: MemoryChange[], at = T0): MemoryCommit {
  n++;
  return { id: `c${n}`, type: 'memory.committed.v1', containerTag: tag, occurredAt: at, correlationId: `c${n}`, cause: { kind: 'direct-write', documentId: `doc${n}` }, changes };
}
function mem(id: string, tag: string, text: string, extra: Partial<MemoryRecord> = {}): MemoryRecord {
  return { ...firstVersion(id, tag, { memory: text, isStatic: false, metadata: {}, sources: [{ documentId: `src-${id}`, text: null }], extractor: 'direct' }, T0), ...extra };
}
const created = (m: MemoryRecord): MemoryChange => ({ type: 'memory.created.v1', memory: m });
const vec = async (q: string) => (await contractEmbedder.embed([q]))[0]!;

/**
 * The MemoryStore contract: every adapter passes it. Given commits, then these records and
 * these hits; applying a commit twice changes nothing; a store fed the same commits in the same
 * order is equal (the replay guarantee).
 */
export function describeMemoryStoreContract(name: string, open: () => Promise<MemoryStoreHandle>): void {
  describe(`MemoryStore contract: ${name}`, () => {
    let h: MemoryStoreHandle | undefined;
    afterEach(async () => {
      await h?.cleanup();
      h = undefined;
    });

    it('applies a commit once per tag sequence: a redelivered or replayed commit changes nothing', async () => {
      h = await open();
      const c = commit('a', [created(mem('mem_aaaaaaaaaa1', 'a', 'Priya lives in Lisbon.'))]);
      expect(await h.store.apply(c, 5)).toBe(true);
      expect(await h.store.apply(c, 5)).toBe(false);
      expect(await h.store.apply(c, 3)).toBe(false);
      expect(await h.store.tagSeq('a')).toBe(5);
      expect(await h.store.tagSeq('b')).toBe(0);
      expect((await h.store.tagMemories('a')).map((m) => m.memory)).toEqual(['Priya lives in Lisbon.']);
    });

    it('a new version retires its parent; search leaves superseded versions out unless asked', async () => {
      h = await open();
      const v1 = mem('mem_aaaaaaaaaa1', 'a', 'Priya lives in Lisbon.');
      await h.store.apply(commit('a', [created(v1)]), 1);
      const v2 = nextVersion('mem_aaaaaaaaaa2', v1, { memory: 'Priya lives in Berlin.', isStatic: true, metadata: {}, sources: [{ documentId: 'd2', text: null }], extractor: 'direct' }, T0);
      await h.store.apply(commit('a', [{ type: 'memory.versioned.v1', memory: v2 }]), 2);
      expect(await h.store.get(v1.id)).toMatchObject({ isLatest: false });
      expect(await h.store.get(v2.id)).toMatchObject({ isLatest: true, version: 2, parentMemoryId: v1.id, rootMemoryId: v1.id });
      expect((await h.store.chain(v2.id)).map((m) => m.version)).toEqual([1, 2]);
      const now = new Date(T0);
      const hits = await h.store.search({ containerTags: ['a'], text: 'where does Priya live', vector: await vec('where does Priya live'), limit: 10, now });
      expect(hits.map((x) => x.memory.id)).toEqual([v2.id]);
      const all = await h.store.search({ containerTags: ['a'], text: 'Priya', vector: await vec('Priya'), limit: 10, now, includeSuperseded: true });
      expect(all.map((x) => x.memory.id).sort()).toEqual([v1.id, v2.id]);
    });

    it('forgotten and expired memories are left out unless asked; source-added and links accumulate once', async () => {
      h = await open();
      await h.store.apply(
        commit('a', [
          created(mem('mem_aaaaaaaaaa1', 'a', 'Exam on chemistry tomorrow.', { forgetAfter: '2026-01-02T00:00:00.000Z' })),
          created(mem('mem_aaaaaaaaaa2', 'a', 'Likes chemistry and hiking.')),
          created(mem('mem_aaaaaaaaaa3', 'a', 'Chemistry teacher is Ana.')),
        ]),
        1,
      );
      await h.store.apply(
        commit('a', [
          { type: 'memory.forgotten.v1', memoryId: 'mem_aaaaaaaaaa3', reason: 'asked', cause: 'user' },
          { type: 'memory.source-added.v1', memoryId: 'mem_aaaaaaaaaa2', source: { documentId: 'd9', text: 'again' } },
          { type: 'memory.source-added.v1', memoryId: 'mem_aaaaaaaaaa2', source: { documentId: 'd9', text: 'again' } },
          { type: 'memory.linked.v1', memoryId: 'mem_aaaaaaaaaa2', to: 'mem_aaaaaaaaaa1', relation: 'extends' },
        ]),
        2,
      );
      const q = { containerTags: ['a'], text: 'chemistry', vector: await vec('chemistry'), limit: 10 };
      const before = await h.store.search({ ...q, now: new Date('2026-01-01T12:00:00.000Z') });
      expect(before.map((x) => x.memory.id).sort()).toEqual(['mem_aaaaaaaaaa1', 'mem_aaaaaaaaaa2']);
      const after = await h.store.search({ ...q, now: new Date('2026-01-03T00:00:00.000Z') });
      expect(after.map((x) => x.memory.id)).toEqual(['mem_aaaaaaaaaa2']);
      const forgotten = await h.store.search({ ...q, now: new Date('2026-01-03T00:00:00.000Z'), includeForgotten: true });
      expect(forgotten).toHaveLength(3);
      const m2 = await h.store.get('mem_aaaaaaaaaa2');
      expect(m2).toMatchObject({ documentIds: ['src-mem_aaaaaaaaaa2', 'd9'], relations: [{ memoryId: 'mem_aaaaaaaaaa1', relation: 'extends' }] });
      expect((await h.store.documentMemories('d9')).map((m) => m.id)).toEqual(['mem_aaaaaaaaaa2']);
    });

    it('never returns a memory of another tag, and filters by the carried metadata', async () => {
      h = await open();
      await h.store.apply(commit('a', [created(mem('mem_aaaaaaaaaa1', 'a', 'Berlin is home.', { metadata: { source: 'chat' } }))]), 1);
      await h.store.apply(commit('a', [created(mem('mem_aaaaaaaaaa3', 'a', 'Berlin winters are cold.', { metadata: { source: 'mail' } }))]), 2);
      await h.store.apply(commit('b', [created(mem('mem_aaaaaaaaaa2', 'b', 'Berlin is home.'))]), 3);
      const q = { text: 'Berlin home', vector: await vec('Berlin home'), limit: 10, now: new Date(T0) };
      expect((await h.store.search({ ...q, containerTags: ['b'] })).map((x) => x.memory.id)).toEqual(['mem_aaaaaaaaaa2']);
      const filtered = await h.store.search({ ...q, containerTags: ['a'], filter: Filters.parse({ AND: [{ key: 'source', value: 'mail' }] }) });
      expect(filtered.map((x) => x.memory.id)).toEqual(['mem_aaaaaaaaaa3']);
      const listed = await h.store.list({ containerTags: ['a'], sort: 'createdAt', order: 'asc', limit: 1, offset: 1 });
      expect(listed.total).toBe(2);
      expect(listed.items).toHaveLength(1);
    });

    it('related: the live latest memories of the tag with a named attribute, statement or id; recent: newest static, then others', async () => {
      h = await open();
      const at = (subject: string, key: string, value: string) => ({ attribute: { subject, key, value }, isStatic: true });
      const home1 = mem('mem_aaaaaaaaaa1', 'a', 'Priya lives in Lisbon.', at('user', 'lives_in', 'Lisbon'));
      await h.store.apply(
        commit('a', [
          created(home1),
          created(mem('mem_aaaaaaaaaa2', 'a', 'Priya likes  tea!', { updatedAt: '2026-01-01T00:00:01.000Z' })),
          created(mem('mem_aaaaaaaaaa3', 'a', 'Priya works at Acme.', at('user', 'works_at', 'Acme'))),
          created(mem('mem_aaaaaaaaaa4', 'a', 'Old exam.', { forgetAfter: '2026-01-01T00:00:00.500Z' })),
        ]),
        1,
      );
      await h.store.apply(commit('b', [created(mem('mem_bbbbbbbbbb1', 'b', 'Priya likes tea.', at('user', 'lives_in', 'Porto')))]), 2);
      const home2 = nextVersion('mem_aaaaaaaaaa5', home1, { memory: 'Priya lives in Berlin.', isStatic: true, metadata: {}, attribute: { subject: 'user', key: 'lives_in', value: 'Berlin' }, sources: [{ documentId: 'd2', text: null }], extractor: 'direct' }, '2026-01-01T00:00:01.500Z');
      await h.store.apply(commit('a', [{ type: 'memory.versioned.v1', memory: home2 }]), 3);
      const liveAt = new Date('2026-01-01T00:00:02.000Z');
      const ids = async (q: Partial<Parameters<MemoryStore['related']>[1]>) =>
        (await h!.store.related('a', { attributes: [], statements: [], ids: [], liveAt, ...q })).map((m) => m.id).sort();
      expect(await ids({ attributes: [{ subject: 'user', key: 'lives_in' }] })).toEqual([home2.id]);
      expect(await ids({ statements: ['priya likes tea'] })).toEqual(['mem_aaaaaaaaaa2']);
      expect(await ids({ ids: ['mem_aaaaaaaaaa3', 'mem_bbbbbbbbbb1', home1.id, 'mem_aaaaaaaaaa4'] })).toEqual(['mem_aaaaaaaaaa3']);
      const recent = await h.store.recent('a', { liveAt, limit: 1 });
      expect(recent.map((m) => m.id)).toEqual([home2.id, 'mem_aaaaaaaaaa2']);
      expect((await h.store.recent('a', { liveAt, limit: 10 })).map((m) => m.id).sort()).toEqual(['mem_aaaaaaaaaa2', 'mem_aaaaaaaaaa3', home2.id].sort());
    });

    it('recent cuts ties of one time by id, newest id first; a relaxed metadata filter still finds a match past many others', async () => {
      h = await open();
      const ids = Array.from({ length: 6 }, (_, i) => `mem_tie${String(i).padStart(8, '0')}`);
      await h.store.apply(commit('a', ids.map((id, i) => created(mem(id, 'a', `Tied fact number ${i} about gardening.`, { metadata: { note: i === 2 ? 'the Needle here' : 'hay' } })))), 1);
      const liveAt = new Date('2026-01-02T00:00:00.000Z');
      expect((await h.store.recent('a', { liveAt, limit: 2 })).map((m) => m.id)).toEqual([ids[5], ids[4]]);
      const hits = await h.store.search({
        containerTags: ['a'],
        text: 'gardening',
        vector: await vec('gardening'),
        limit: 1,
        now: liveAt,
        filter: Filters.parse({ AND: [{ key: 'note', value: 'needle', filterType: 'string_contains', ignoreCase: true }] }),
      });
      expect(hits.map((x) => x.memory.id)).toEqual([ids[2]]);
    });

        it('memorized: an extraction marks its document revision, a group each of its documents; an older revision never replaces a newer', async () => {
      h = await open();
      const part = (documentId: string, revision: number) => ({ documentId, revision, candidates: [], tokens: 0, ms: 0 });
      const extraction = (documentId: string, revision: number): MemoryCommit => ({
        ...commit('a', []),
        cause: { kind: 'extraction', documentId, revision, extractor: 'x', candidates: [], tokens: 0, ms: 0 },
      });
      await h.store.apply(extraction('d1', 2), 1);
      await h.store.apply({ ...commit('a', [created(mem('mem_aaaaaaaaaa1', 'a', 'Grouped fact.'))]), cause: { kind: 'extraction-group', extractor: 'x', documents: [part('d2', 1), part('d3', 4), part('d1', 1)] } }, 2);
      expect(await h.store.memorized('d1', 'a')).toEqual({ revision: 2 });
      expect(await h.store.memorized('d2', 'a')).toEqual({ revision: 1 });
      expect(await h.store.memorized('d3', 'a')).toEqual({ revision: 4 });
      expect(await h.store.memorized('d3', 'b')).toBeNull();
      expect(await h.store.memorized('d4', 'a')).toBeNull();
    });

    it('a second store fed the same commits in order is equal (digest), whatever was applied twice', async () => {
      h = await open();
      const v1 = mem('mem_aaaaaaaaaa1', 'a', 'Works at Acme.');
      const log: Array<[MemoryCommit, number]> = [
        [commit('a', [created(v1)]), 1],
        [commit('a', [{ type: 'memory.versioned.v1', memory: nextVersion('mem_aaaaaaaaaa2', v1, { memory: 'Works at Initech.', isStatic: true, metadata: {}, sources: [{ documentId: 'x', text: null }], extractor: 'direct' }, T0) }]), 2],
        [commit('b', [created(mem('mem_aaaaaaaaaa3', 'b', 'Speaks Portuguese.'))]), 3],
      ];
      for (const [c, s] of log) await h.store.apply(c, s);
      await h.store.apply(log[0]![0], log[0]![1]);
      const other = await h.fresh();
      for (const [c, s] of log) await other.apply(c, s);
      expect(await other.digest()).toBe(await h.store.digest());
      await other.apply(commit('b', [{ type: 'memory.forgotten.v1', memoryId: 'mem_aaaaaaaaaa3', reason: null, cause: 'user' }]), 4);
      expect(await other.digest()).not.toBe(await h.store.digest());
      await other.close();
    });
  });
}
