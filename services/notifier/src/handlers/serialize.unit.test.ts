import { describe, expect, it } from 'vitest';
import { keyedLimiter, keyedSerializer } from './serialize.js';

describe('keyedSerializer', () => {
  it('runs one key in order and other keys alongside, a failure not blocking the next', async () => {
    const serial = keyedSerializer();
    const log: string[] = [];
    const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));
    const p = [
      serial('a', async () => {
        await wait(30);
        log.push('a1');
      }),
      serial('a', async () => {
        log.push('a2');
        throw new Error('boom');
      }),
      serial('a', async () => void log.push('a3')),
      serial('b', async () => void log.push('b1')),
    ];
    const results = await Promise.allSettled(p);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled', 'fulfilled']);
    expect(log).toEqual(['b1', 'a1', 'a2', 'a3']);
  });
});

describe('keyedLimiter', () => {
  it('holds at most max tasks of one key at once, queues the rest in order (none dropped), and lets other keys by', async () => {
    const limit = keyedLimiter(2);
    let active = 0;
    let peak = 0;
    const started: string[] = [];
    const gates = new Map<string, () => void>();
    const task = (name: string) => () =>
      new Promise<string>((resolve, reject) => {
        started.push(name);
        active++;
        peak = Math.max(peak, active);
        gates.set(name, () => {
          active--;
          if (name === 'h3') reject(new Error('receiver down'));
          else resolve(name);
        });
      });
    const tick = () => new Promise((r) => setTimeout(r, 0));
    const runs = Promise.allSettled(['h1', 'h2', 'h3', 'h4', 'h5'].map((n) => limit('host-a', task(n))));
    const other = limit('host-b', task('b1'));
    await tick();
    expect(started).toEqual(['h1', 'h2', 'b1']);
    gates.get('b1')!();
    expect(await other).toBe('b1');
    gates.get('h2')!();
    await tick();
    expect(started).toEqual(['h1', 'h2', 'b1', 'h3']);
    gates.get('h3')!();
    gates.get('h1')!();
    await tick();
    expect(started.slice(4)).toEqual(['h4', 'h5']);
    gates.get('h4')!();
    gates.get('h5')!();
    const results = await runs;
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'fulfilled', 'fulfilled']);
    expect(peak).toBeLessThanOrEqual(3);
  });
});
