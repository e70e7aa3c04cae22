import { describe, expect, it } from 'vitest';
import type { KV, KvEntry } from '@nats-io/kv';
import { kvReadCache } from './kv-cache.js';

/** A bucket whose reads are answered by hand, and whose watch never reports anything. */
function handBucket() {
  const pending: Array<(e: KvEntry | null) => void> = [];
  const kv = {
    get: () => new Promise<KvEntry | null>((r) => pending.push(r)),
    watch: () => new Promise(() => {}),
  } as unknown as KV;
  return { kv, pending };
}

describe('KV read cache: reads in flight', () => {
  it('shares a young read, but not one left waiting by a broker that went away', async () => {
    let t = 0;
    const { kv, pending } = handBucket();
    const cache = kvReadCache<string | null>(kv, { decode: (e) => (e ? 'value' : null), now: () => t, closed: () => true });
    const stuck = cache.get('tag');
    t = 100;
    const joined = cache.get('tag');
    expect(pending).toHaveLength(1);
    // 10 s would pass before the first read's request timed out: a get a moment later reads again.
    t = 400;
    const fresh = cache.get('tag');
    expect(pending).toHaveLength(2);
    pending[1]!({ revision: 2 } as KvEntry);
    expect(await fresh).toBe('value');
    pending[0]!(null);
    expect(await Promise.all([stuck, joined])).toEqual([null, null]);
    cache.close();
  });
});
