import { describe, expect, it } from 'vitest';
import { LaneBudget } from './pull-loop.js';

describe('LaneBudget: the capacity a stage shares between its normal and bulk lanes', () => {
  it('the bulk lane takes the whole capacity while the normal lane holds nothing', () => {
    const b = new LaneBudget(16);
    expect(b.room('bulk')).toBe(16);
    b.set('bulk', 16);
    expect(b.room('bulk')).toBe(0);
    // The normal lane keeps a pull open for the capacity less half of it, however much bulk work is held.
    expect(b.room('normal')).toBe(8);
  });

  it('while the normal lane holds any, the bulk lane gets at most half, and the normal lane the rest', () => {
    const b = new LaneBudget(16);
    b.set('normal', 1);
    expect(b.room('bulk')).toBe(8);
    b.set('bulk', 8);
    expect(b.room('bulk')).toBe(0);
    expect(b.room('normal')).toBe(7);
    b.set('normal', 8);
    expect(b.room('normal')).toBe(0);
    // A full bulk share drains to its half before it takes more.
    b.set('bulk', 12);
    expect(b.room('bulk')).toBe(-4);
    b.set('normal', 0);
    expect(b.room('bulk')).toBe(4);
  });

  it('neither lane starves at the smallest capacities', () => {
    const one = new LaneBudget(1);
    one.set('normal', 1);
    expect(one.room('bulk')).toBe(1);
    one.set('normal', 0);
    one.set('bulk', 1);
    expect(one.room('normal')).toBe(1);
    const three = new LaneBudget(3);
    three.set('normal', 3);
    expect(three.room('bulk')).toBe(1);
  });

  it('tells its listeners of every change, not of a report that changes nothing', () => {
    const b = new LaneBudget(4);
    let calls = 0;
    const off = b.onChange(() => calls++);
    b.set('bulk', 2);
    b.set('bulk', 2);
    b.set('normal', 1);
    expect(calls).toBe(2);
    off();
    b.set('normal', 0);
    expect(calls).toBe(2);
  });

  it('while the later stages are busy, the bulk lane holds one message at a time, and takes its share again when they drain', () => {
    const b = new LaneBudget(16);
    let calls = 0;
    b.onChange(() => calls++);
    b.admit(false);
    expect(calls).toBe(1);
    expect(b.room('bulk')).toBe(1);
    b.set('bulk', 1);
    expect(b.room('bulk')).toBe(0);
    // The normal lane is not affected.
    expect(b.room('normal')).toBe(15);
    b.admit(false);
    expect(calls).toBe(2);
    b.admit(true);
    expect(calls).toBe(3);
    expect(b.room('bulk')).toBe(15);
  });
});
