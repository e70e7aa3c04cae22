import { describe, expect, it } from 'vitest';
import type { QdrantClient } from '@qdrant/js-client-rest';
import type { MemoryChange, MemoryCommit, MemoryRecord } from '@memstream/contracts';
import { FakeQdrant } from '@memstream/chunk-index/qdrant-fake';
import { firstVersion, nextVersion } from '../resolve.js';
import { contractEmbedder } from './contract.js';
import { QdrantMemoryStore } from './qdrant.js';

const T0 = '2026-01-01T00:00:00.000Z';
const commit = (id: string, changes: MemoryChange[], at = T0): MemoryCommit => ({
  id,
  type: 'memory.committed.v1',
  containerTag: 'a',
  occurredAt: at,
  correlationId: id,
  cause: { kind: 'direct-write', documentId: `doc-${id}` },
  changes,
});
const v1: MemoryRecord = firstVersion('mem_aaaaaaaaaa1', 'a', { memory: 'Priya lives in Lisbon.', isStatic: true, metadata: {}, sources: [{ documentId: 'd1', text: null }], extractor: 'direct' }, T0);
const v2 = nextVersion('mem_aaaaaaaaaa2', v1, { memory: 'Priya lives in Berlin.', isStatic: true, metadata: {}, sources: [{ documentId: 'd2', text: null }], extractor: 'direct' }, T0);
const log: Array<[MemoryCommit, number]> = [
  [commit('c1', [{ type: 'memory.created.v1', memory: v1 }]), 1],
  [commit('c2', [{ type: 'memory.source-added.v1', memoryId: v1.id, source: { documentId: 'd9', text: null } }], '2026-01-01T00:00:01.000Z'), 2],
  [commit('c3', [{ type: 'memory.versioned.v1', memory: v2 }], '2026-01-01T00:00:02.000Z'), 3],
];

async function reference(): Promise<string> {
  const s = await QdrantMemoryStore.fromClient(new FakeQdrant().asClient(), contractEmbedder, { collection: 'ref' });
  for (const [c, seq] of log) await s.apply(c, seq);
  return s.digest();
}

/** A client over `fake` whose calls can be held: `hold(method)` makes the next such call wait for the returned release. */
function holdable(fake: FakeQdrant) {
  const held = new Map<string, Promise<void>>();
  const client = new Proxy(fake, {
    get(target, prop, recv) {
      const v = Reflect.get(target, prop, recv) as unknown;
      if (typeof v !== 'function') return v;
      return async (...args: unknown[]) => {
        const gate = held.get(String(prop));
        if (gate) {
          held.delete(String(prop));
          await gate;
        }
        return (v as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  }) as unknown as QdrantClient;
  return {
    client,
    hold(method: string): () => void {
      let release!: () => void;
      held.set(method, new Promise<void>((r) => (release = r)));
      return release;
    },
  };
}

describe('QdrantMemoryStore without transactions', () => {
  it('a crash between a commit\'s writes and its tag sequence: applying it again gives the same store', async () => {
    const fake = new FakeQdrant();
    const store = await QdrantMemoryStore.fromClient(fake.asClient(), contractEmbedder, { collection: 'crash' });
    await store.apply(...log[0]!);
    await store.apply(...log[1]!);
    // The third commit writes its points, then "dies" before the tag's sequence is written.
    const upsert = fake.upsert.bind(fake);
    let n = 0;
    fake.upsert = async (name, args) => {
      if (name.endsWith('_state') && n++ === 0) throw new Error('killed');
      return upsert(name, args);
    };
    await expect(store.apply(...log[2]!)).rejects.toThrow('killed');
    expect(await store.tagSeq('a')).toBe(2);
    expect(await store.apply(...log[2]!)).toBe(true);
    expect(await store.digest()).toBe(await reference());
  });

  it('a writer that read before a later commit was applied by another never overwrites it', async () => {
    const fake = new FakeQdrant();
    const h = holdable(fake);
    const late = await QdrantMemoryStore.fromClient(h.client, contractEmbedder, { collection: 'race' });
    const quick = await QdrantMemoryStore.fromClient(fake.asClient(), contractEmbedder, { collection: 'race' });
    await quick.apply(...log[0]!);
    // `late` reads v1 for commit 2, then stalls before writing; `quick` applies commits 2 and 3.
    const release = h.hold('setPayload');
    const stalled = late.apply(...log[1]!);
    await new Promise((r) => setTimeout(r, 20));
    await quick.apply(...log[1]!);
    await quick.apply(...log[2]!);
    release();
    await stalled;
    // v1 stays superseded (commit 3's write), and the tag's sequence stays at 3.
    expect(await quick.get(v1.id)).toMatchObject({ isLatest: false, documentIds: ['d1', 'd9'] });
    expect(await quick.tagSeq('a')).toBe(3);
    expect(await quick.digest()).toBe(await reference());
  });

  it('the digest equals the SQLite store\'s for the same commits (one record format)', async () => {
    const { SqliteMemoryStore } = await import('./sqlite.js');
    const sqlite = SqliteMemoryStore.open(':memory:', contractEmbedder);
    for (const [c, seq] of log) await sqlite.apply(c, seq);
    expect(await sqlite.digest()).toBe(await reference());
    await sqlite.close();
  });
});
