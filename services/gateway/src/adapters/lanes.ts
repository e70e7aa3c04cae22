import { IN_PROGRESS_STATUSES } from '@memstream/contracts';
import type { DocumentViews } from '@memstream/views';
import type { SubmissionLanes } from '../handlers/documents.js';

/**
 * The lane of each submission (docs/pipeline.md, "Fairness"): `bulk` when one of its tags
 * already has more than `threshold` documents not yet done, else `normal`.
 *
 * The counts are the view's (queued or in a stage), every tag's in one read, started at most once
 * per `cacheMs` whichever tags ask: a count per tag read the whole backlog for every quiet tag (a
 * small tenant adding one document while a large import waited cost 8 ms of the event loop at
 * 24,000 waiting), so many small tenants at once would have taken the gateway's time from every
 * request. A read takes a while (in pages, ~12 ms at 24,000 waiting), and submissions do not wait
 * for it: while it runs they are decided on the read before it; only the first ever waits.
 *
 * On top of a read, the submissions this gateway placed for each tag since it started, and those
 * of the window before it when that one was just before: the view lags the log by the
 * projection's delay, and a burst of adds (or the items of one batch) arrives faster than it, so a
 * read alone would miss the newest. Some are then counted twice (the view already has them): the
 * error is towards `bulk`, and only for a tag that submits many documents in a few seconds. A
 * document without tags (only the admin key makes them) is not a tenant's backlog: always normal.
 *
 * A crowded normal lane (`crowding`): many tags, each under the threshold, can still put thousands
 * of documents in the normal lane together, and a small tenant's one document then waits behind
 * all of them (`bench load --tags 400`: 52 s). So in the same window the normal lane's own backlog
 * is read too (the documents not yet delivered to the entrance's normal durable, and those waiting
 * or in work after it), plus the normal submissions this gateway placed since (a burst fills the
 * lane faster than a read a second sees); while that is over `crowding.at`, the threshold is
 * `crowding.threshold`: only tags with almost nothing waiting stay normal, and the lane drains.
 */
export function viewLanes(
  views: Pick<DocumentViews, 'countByTag'>,
  opts: { threshold: number; cacheMs: number; now?: () => number; crowding?: { read: () => Promise<number>; at: number; threshold: number } },
): SubmissionLanes {
  const now = opts.now ?? (() => performance.now());
  type Window = {
    at: number;
    since: Map<string, number>;
    /** Submissions this gateway placed in the normal lane in this window. */
    normalSince: number;
    counts: Map<string, number> | null;
    /** The normal lane's backlog when read (null: not read). */
    backlog: number | null;
    failed: boolean;
    read: Promise<void>;
  };
  /** The newest windows, oldest first: enough to find the newest read that has landed and the window before it. */
  const windows: Window[] = [];
  const open = (): Window => {
    const newest = windows.at(-1);
    if (newest && !newest.failed && now() - newest.at < opts.cacheMs) return newest;
    const w: Window = { at: now(), since: new Map(), normalSince: 0, counts: null, backlog: null, failed: false, read: Promise.resolve() };
    // The backlog read is best effort too: unread, the lane counts as not crowded.
    const backlog = opts.crowding ? opts.crowding.read().catch(() => null) : Promise.resolve(null);
    w.read = Promise.all([views.countByTag(IN_PROGRESS_STATUSES), backlog]).then(
      ([counts, b]) => void ((w.counts = counts), (w.backlog = b)),
      // A failed read is not kept: the next submission starts another.
      () => void (w.failed = true),
    );
    windows.push(w);
    if (windows.length > 3) windows.shift();
    return w;
  };
  /** The newest window whose read has landed, waiting for the current one only if none has. */
  const landed = async (current: Window): Promise<number> => {
    for (let k = windows.length - 1; k >= 0; k--) if (windows[k]!.counts) return k;
    await current.read;
    return current.counts ? windows.indexOf(current) : -1;
  };
  return {
    async laneFor(containerTags) {
      if (containerTags.length === 0) return 'normal';
      const current = open();
      let lane: 'normal' | 'bulk' = 'normal';
      const k = await landed(current);
      // The view cannot be read (k < 0): fairness is best effort, the submission is not refused for it.
      if (k >= 0) {
        const read = windows[k]!;
        const before = k > 0 && read.at - windows[k - 1]!.at < 2 * opts.cacheMs ? [windows[k - 1]!] : [];
        const since = windows.slice(k);
        const counted = [...before, ...since];
        // The lane's backlog as read, plus what this gateway put in it since: from the read's own
        // window on only, since the broker's count, unlike the view, does not lag the publishes.
        const crowded = read.backlog !== null && since.reduce((sum, w) => sum + w.normalSince, read.backlog) > opts.crowding!.at;
        const threshold = crowded ? Math.min(opts.threshold, opts.crowding!.threshold) : opts.threshold;
        for (const tag of containerTags) {
          const n = counted.reduce((sum, w) => sum + (w.since.get(tag) ?? 0), read.counts!.get(tag) ?? 0);
          if (n > threshold) lane = 'bulk';
        }
      }
      // This submission counts for its tags from now on, in the window it arrived in.
      for (const tag of new Set(containerTags)) current.since.set(tag, (current.since.get(tag) ?? 0) + 1);
      if (lane === 'normal') current.normalSince++;
      return lane;
    },
  };
}
