import { describe, expect, it } from 'vitest';
import { keyedSerializer } from './serialize.js';

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
