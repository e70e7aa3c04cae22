import { IN_PROGRESS_STATUSES } from '@memstream/contracts';
import type { DocumentViews } from '@memstream/views';
import type { SubmissionLanes } from '../handlers/documents.js';

/**
 * The lane of each submission (docs/pipeline.md, "Fairness"): `bulk` when one of its tags
 * already has more than `threshold` documents not yet done, else `normal`. The count is the view's
 * (queued or in a stage), read at most once per `cacheMs` per tag, plus the submissions this
 * gateway placed for the tag since the read before it: the view lags the log by the projection's
 * delay, and a burst of adds (or the items of one batch) arrives faster than it, so a read alone
 * would miss the newest. Those of the earlier window the view already has are counted twice: the
 * error is towards `bulk`, and only for a tag that submits many documents in two windows. A document without tags (only the admin key makes them)
 * is not a tenant's backlog: always normal.
 */
export function viewLanes(views: Pick<DocumentViews, 'countAtMost'>, opts: { threshold: number; cacheMs: number; now?: () => number }): SubmissionLanes {
  const now = opts.now ?? (() => performance.now());
  const counts = new Map<string, { at: number; total: Promise<number>; since: number; before: number }>();
  const count = async (tag: string): Promise<number> => {
    let c = counts.get(tag);
    if (!c || now() - c.at >= opts.cacheMs) {
      // The previous window's submissions, if it was the one just before (else the view has them).
      const before = c && now() - c.at < 2 * opts.cacheMs ? c.since : 0;
      // Only "more than the threshold?" matters, so the count stops one past it: an exact count of a
      // large backlog blocked the event loop for tens of milliseconds per tag and second in SQLite
      // (44 ms at 30,000 documents), which every add waiting behind it paid.
      const total = views.countAtMost({ containerTags: [tag], statuses: [...IN_PROGRESS_STATUSES] }, opts.threshold + 1);
      c = { at: now(), total, since: 0, before };
      counts.set(tag, c);
      // A failed read is not cached: the next submission reads again.
      total.catch(() => counts.get(tag) === c && counts.delete(tag));
      // Bounded: the oldest tags' counts go first.
      if (counts.size > 10_000) counts.delete(counts.keys().next().value!);
    }
    return (await c.total) + c.before + c.since;
  };
  return {
    async laneFor(containerTags) {
      let lane: 'normal' | 'bulk' = 'normal';
      for (const tag of containerTags) {
        try {
          if ((await count(tag)) > opts.threshold) lane = 'bulk';
        } catch {
          // The view cannot be read: fairness is best effort, the submission is not refused for it.
        }
        // This submission counts for the tag from now on, for this window and the next.
        const c = counts.get(tag);
        if (c) c.since++;
      }
      return lane;
    },
  };
}
