import { describe, expect, it } from 'vitest';
import type { ListSelection } from '@memstream/views';
import { viewLanes } from './lanes.js';

/** A view that answers each tag's count of unfinished documents, and records its reads. */
function fakeViews(unfinished: Record<string, number>) {
  const reads: string[] = [];
  const caps: number[] = [];
  return {
    reads,
    caps,
    unfinished,
    countAtMost: async (q: ListSelection, atMost: number) => {
      const tag = q.containerTags![0]!;
      reads.push(tag);
      caps.push(atMost);
      expect(q.statuses).toEqual(['queued', 'extracting', 'chunking', 'embedding']);
      return Math.min(unfinished[tag] ?? 0, atMost);
    },
  };
}

describe('viewLanes: which lane a submission goes in', () => {
  it('bulk when one of its tags has more than the threshold unfinished; untagged always normal', async () => {
    const views = fakeViews({ busy: 65, calm: 64 });
    const lanes = viewLanes(views, { threshold: 64, cacheMs: 1000, now: () => 0 });
    expect(await lanes.laneFor(['busy'])).toBe('bulk');
    expect(await lanes.laneFor(['quiet', 'busy'])).toBe('bulk');
    expect(await lanes.laneFor(['calm'])).toBe('normal');
    expect(await lanes.laneFor([])).toBe('normal');
    // One past the threshold is all a read needs to count.
    expect(new Set(views.caps)).toEqual(new Set([65]));
  });

  it('a tag far over the threshold is bulk from a count that stops one past it', async () => {
    const views = fakeViews({ huge: 30_000 });
    const lanes = viewLanes(views, { threshold: 64, cacheMs: 1000, now: () => 0 });
    expect(await lanes.laneFor(['huge'])).toBe('bulk');
    expect(views.caps).toEqual([65]);
  });

  it('counts its own submissions on top of a cached read, for that window and the next', async () => {
    let t = 0;
    const views = fakeViews({ t: 0 });
    const lanes = viewLanes(views, { threshold: 3, cacheMs: 1000, now: () => t });
    // A burst faster than the view: the first 4 are normal (0..3 before them), then bulk.
    const burst = [];
    for (let i = 0; i < 6; i++) burst.push(await lanes.laneFor(['t']));
    expect(burst).toEqual(['normal', 'normal', 'normal', 'normal', 'bulk', 'bulk']);
    expect(views.reads).toEqual(['t']);
    // The next window's read has not seen them yet (the projection lags): the last window's still count.
    t = 1000;
    expect(await lanes.laneFor(['t'])).toBe('bulk');
    expect(views.reads).toEqual(['t', 't']);
    // Two windows on, with the view showing them done: normal again.
    t = 5000;
    expect(await lanes.laneFor(['t'])).toBe('normal');
  });

  it('a view that cannot be read makes a submission normal, and is read again next time', async () => {
    let fail = true;
    const views = {
      countAtMost: async () => {
        if (fail) throw new Error('store away');
        return 65;
      },
    };
    const lanes = viewLanes(views, { threshold: 64, cacheMs: 60_000, now: () => 0 });
    expect(await lanes.laneFor(['x'])).toBe('normal');
    fail = false;
    expect(await lanes.laneFor(['x'])).toBe('bulk');
  });
});
