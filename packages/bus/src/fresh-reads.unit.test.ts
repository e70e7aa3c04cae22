import { describe, expect, it } from 'vitest';
import { freshReads } from './embedding-config.js';

describe('freshReads: concurrent reads shared, each started after its caller asked', () => {
  it('callers that arrive while a read is in flight share the next one, which starts after it', async () => {
    let value = 0;
    const started: number[] = [];
    const gates: Array<() => void> = [];
    // A read sees the value as of its start.
    const read = freshReads(async () => {
      const v = value;
      started.push(v);
      await new Promise<void>((r) => gates.push(r));
      return v;
    });
    const first = read();
    // The value changes after the first read began: later callers must not be answered by it.
    value = 1;
    const later = [read(), read(), read()];
    expect(started).toEqual([0]);
    gates.shift()!();
    expect(await first).toBe(0);
    await new Promise((r) => setImmediate(r));
    expect(started).toEqual([0, 1]);
    gates.shift()!();
    expect(await Promise.all(later)).toEqual([1, 1, 1]);
    // Nothing in flight: a read of its own.
    value = 2;
    const alone = read();
    gates.shift()!();
    expect(await alone).toBe(2);
    expect(started).toEqual([0, 1, 2]);
  });

  it('a failed read fails its callers only; the next one reads again', async () => {
    let fail = true;
    const read = freshReads(async () => {
      if (fail) throw new Error('broker away');
      return 'ok';
    });
    await expect(read()).rejects.toThrow('broker away');
    fail = false;
    expect(await read()).toBe('ok');
  });

  it('a read in flight for too long (the broker went away under it) is not waited for: a new one starts', async () => {
    let t = 0;
    const gates: Array<(v: string) => void> = [];
    const read = freshReads(() => new Promise<string>((r) => gates.push(r)), { patienceMs: 250, now: () => t });
    const stuck = read();
    t = 100;
    const joined = read();
    expect(gates).toHaveLength(1);
    t = 400;
    const fresh = read();
    expect(gates).toHaveLength(2);
    gates[1]!('after the reconnect');
    expect(await fresh).toBe('after the reconnect');
    gates[0]!('late');
    expect(await stuck).toBe('late');
    // The caller that joined while the first read was young still gets a read begun after it.
    await new Promise((r) => setImmediate(r));
    gates[2]!('next');
    expect(await joined).toBe('next');
  });
});
