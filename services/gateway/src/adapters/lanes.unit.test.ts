import { describe, expect, it } from 'vitest';
import type { DocumentStatus } from '@memstream/contracts';
import { viewLanes } from './lanes.js';

/** A view that answers every tag's count of unfinished documents, and counts its reads. */
function fakeViews(unfinished: Record<string, number>) {
  const views = {
    reads: 0,
    unfinished,
    countByTag: async (statuses: readonly DocumentStatus[]) => {
      views.reads++;
      expect(statuses).toEqual(['queued', 'extracting', 'chunking', 'embedding']);
      return new Map(Object.entries(views.unfinished).filter(([, n]) => n > 0));
    },
  };
  return views;
}

describe('viewLanes: which lane a submission goes in', () => {
  it('bulk when one of its tags has more than the threshold unfinished; untagged always normal', async () => {
    const views = fakeViews({ busy: 65, calm: 64 });
    const lanes = viewLanes(views, { threshold: 64, cacheMs: 1000, now: () => 0 });
    expect(await lanes.laneFor(['busy'])).toBe('bulk');
    expect(await lanes.laneFor(['quiet', 'busy'])).toBe('bulk');
    expect(await lanes.laneFor(['calm'])).toBe('normal');
    expect(await lanes.laneFor([])).toBe('normal');
  });

  it('one read a window serves every tag: many quiet tags do not read the view again', async () => {
    let t = 0;
    const views = fakeViews({ huge: 30_000 });
    const lanes = viewLanes(views, { threshold: 64, cacheMs: 1000, now: () => t });
    const quiet = await Promise.all(Array.from({ length: 200 }, (_, i) => lanes.laneFor([`tenant-${i}`])));
    expect(new Set(quiet)).toEqual(new Set(['normal']));
    expect(await lanes.laneFor(['huge'])).toBe('bulk');
    expect(views.reads).toBe(1);
    t = 999;
    await lanes.laneFor(['tenant-x']);
    expect(views.reads).toBe(1);
    t = 1000;
    await lanes.laneFor(['tenant-x']);
    expect(views.reads).toBe(2);
  });

  it('counts its own submissions on top of a cached read, for that window and the next', async () => {
    let t = 0;
    const views = fakeViews({ t: 0 });
    const lanes = viewLanes(views, { threshold: 3, cacheMs: 1000, now: () => t });
    // A burst faster than the view: the first 4 are normal (0..3 before them), then bulk.
    const burst = [];
    for (let i = 0; i < 6; i++) burst.push(await lanes.laneFor(['t']));
    expect(burst).toEqual(['normal', 'normal', 'normal', 'normal', 'bulk', 'bulk']);
    // A tag named twice on one submission counts it once.
    expect(await lanes.laneFor(['u', 'u'])).toBe('normal');
    expect(views.reads).toBe(1);
    // The next window's read has not seen them yet (the projection lags): the last window's still count.
    t = 1000;
    expect(await lanes.laneFor(['t'])).toBe('bulk');
    expect(views.reads).toBe(2);
    // Later, with the view showing them done: the first submission starts a read and is decided on
    // the last one (which had not seen them), the next ones on the new read: normal again.
    t = 5000;
    expect(await lanes.laneFor(['t'])).toBe('bulk');
    await new Promise((r) => setImmediate(r));
    expect(views.reads).toBe(3);
    expect(await lanes.laneFor(['t'])).toBe('normal');
  });

  it('a submission does not wait for a read while an earlier one has landed; only the first ever waits', async () => {
    let t = 0;
    const pending: Array<(m: Map<string, number>) => void> = [];
    const views = { countByTag: () => new Promise<Map<string, number>>((resolve) => pending.push(resolve)) };
    const lanes = viewLanes(views, { threshold: 64, cacheMs: 1000, now: () => t });
    const first = lanes.laneFor(['busy']);
    let settled = false;
    void first.then(() => (settled = true));
    await new Promise((r) => setImmediate(r));
    expect(settled).toBe(false);
    pending[0]!(new Map([['busy', 100]]));
    expect(await first).toBe('bulk');
    // The next window's read never lands here: submissions go on, decided on the first read.
    t = 1000;
    expect(await lanes.laneFor(['busy'])).toBe('bulk');
    expect(await lanes.laneFor(['quiet'])).toBe('normal');
    expect(pending).toHaveLength(2);
  });

  it('a view that cannot be read makes a submission normal, and is read again next time', async () => {
    let fail = true;
    const views = {
      countByTag: async () => {
        if (fail) throw new Error('store away');
        return new Map([['x', 65]]);
      },
    };
    const lanes = viewLanes(views, { threshold: 64, cacheMs: 60_000, now: () => 0 });
    expect(await lanes.laneFor(['x'])).toBe('normal');
    fail = false;
    expect(await lanes.laneFor(['x'])).toBe('bulk');
  });

  it('a crowded normal lane lowers the threshold: only tags with almost nothing waiting stay normal', async () => {
    let t = 0;
    let normalBacklog = 300;
    let backlogReads = 0;
    const views = fakeViews({ mid: 5, small: 4, import: 10_000 });
    const crowding = { read: async () => (backlogReads++, normalBacklog), at: 256, threshold: 4 };
    const lanes = viewLanes(views, { threshold: 64, cacheMs: 1000, now: () => t, crowding });
    expect(await lanes.laneFor(['mid'])).toBe('bulk');
    expect(await lanes.laneFor(['small'])).toBe('normal');
    expect(await lanes.laneFor(['new-tenant'])).toBe('normal');
    expect(await lanes.laneFor(['import'])).toBe('bulk');
    // Read with the counts, once a window.
    expect(backlogReads).toBe(1);
    // Drained: the usual threshold again, from the next window's read on.
    normalBacklog = 100;
    t = 1000;
    await lanes.laneFor(['other']);
    await new Promise((r) => setImmediate(r));
    expect(backlogReads).toBe(2);
    expect(await lanes.laneFor(['mid'])).toBe('normal');
    expect(await lanes.laneFor(['import'])).toBe('bulk');
  });

  it('what it placed in the normal lane since the read counts: a burst crowds the lane before the next read sees it', async () => {
    const views = fakeViews({});
    const crowding = { read: async () => 250, at: 256, threshold: 1 };
    const lanes = viewLanes(views, { threshold: 64, cacheMs: 60_000, now: () => 0, crowding });
    // 250 read, then six placed here: 256, at the bound. Each tag's first two are normal below it.
    const placed = [];
    for (let i = 0; i < 3; i++) placed.push(await lanes.laneFor(['a']), await lanes.laneFor(['b']));
    expect(placed).toEqual(['normal', 'normal', 'normal', 'normal', 'normal', 'normal']);
    // Over it now: a tag with two waiting goes bulk, one with nothing stays normal.
    expect(await lanes.laneFor(['a'])).toBe('normal');
    expect(await lanes.laneFor(['a'])).toBe('bulk');
    expect(await lanes.laneFor(['c'])).toBe('normal');
    expect(views.reads).toBe(1);
  });

  it("the window before the read is in the broker's count already: its placements are not added again", async () => {
    let t = 0;
    const views = fakeViews({});
    const crowding = { read: async () => 0, at: 256, threshold: 1 };
    const lanes = viewLanes(views, { threshold: 64, cacheMs: 1000, now: () => t, crowding });
    // 300 small tenants in one second, each one document: all normal, and the lane crowded by the end.
    for (let i = 0; i < 300; i++) expect(await lanes.laneFor([`s-${i}`])).toBe('normal');
    // s-0 then has one waiting (normal), then two: bulk while crowded.
    expect(await lanes.laneFor(['s-0'])).toBe('normal');
    expect(await lanes.laneFor(['s-0'])).toBe('bulk');
    // The next second's read says the lane is empty (the pipeline kept up): not crowded, though the
    // window before it placed 301, and s-0's three (counted from that window) are under 64.
    t = 1000;
    await lanes.laneFor(['x']);
    await new Promise((r) => setImmediate(r));
    expect(await lanes.laneFor(['s-0'])).toBe('normal');
  });

  it('a backlog that cannot be read counts as not crowded; the counts still decide', async () => {
    const views = fakeViews({ mid: 5, import: 100 });
    const crowding = { read: async () => Promise.reject(new Error('broker away')), at: 0, threshold: 0 };
    const lanes = viewLanes(views, { threshold: 64, cacheMs: 60_000, now: () => 0, crowding });
    expect(await lanes.laneFor(['mid'])).toBe('normal');
    expect(await lanes.laneFor(['import'])).toBe('bulk');
  });
});
