import { IN_PROGRESS_STATUSES } from '@memstream/contracts';
import type { DocumentViews } from '@memstream/views';
import type { SubmissionLanes } from '../handlers/documents.js';

/**
 * The lane of each submission (docs/pipeline.md, "Fairness"): `bulk` when one of its tags
 * already has more than `threshold` documents not yet done, else `normal`.
 *
 * The counts are the view's (queued or in a stage), every tag's in one read, at most once per
 * `cacheMs` whichever tags ask: a count per tag read the whole backlog for every quiet tag (a
 * small tenant adding one document while a large import waited cost 8 ms of the event loop at
 * 24,000 waiting), so many small tenants at once would have taken the gateway's time from every
 * request. On top of the read, the submissions this gateway placed for each tag since the read
 * before it: the view lags the log by the projection's delay, and a burst of adds (or the items of
 * one batch) arrives faster than it, so a read alone would miss the newest. Those of the earlier
 * window the view already has are counted twice: the error is towards `bulk`, and only for a tag
 * that submits many documents in two windows. A document without tags (only the admin key makes
 * them) is not a tenant's backlog: always normal.
 */
export function viewLanes(views: Pick<DocumentViews, 'countByTag'>, opts: { threshold: number; cacheMs: number; now?: () => number }): SubmissionLanes {
  const now = opts.now ?? (() => performance.now());
  type Window = { at: number; counts: Promise<Map<string, number>>; since: Map<string, number>; before: Map<string, number> };
  let current: Window | null = null;
  const window = (): Window => {
    if (!current || now() - current.at >= opts.cacheMs) {
      // The previous window's submissions, if it was the one just before (else the view has them).
      const before = current && now() - current.at < 2 * opts.cacheMs ? current.since : new Map<string, number>();
      const w: Window = { at: now(), counts: views.countByTag(IN_PROGRESS_STATUSES), since: new Map(), before };
      current = w;
      // A failed read is not kept: the next submission reads again.
      w.counts.catch(() => current === w && (current = null));
    }
    return current;
  };
  return {
    async laneFor(containerTags) {
      if (containerTags.length === 0) return 'normal';
      const w = window();
      let lane: 'normal' | 'bulk' = 'normal';
      try {
        const counts = await w.counts;
        for (const tag of containerTags) {
          if ((counts.get(tag) ?? 0) + (w.before.get(tag) ?? 0) + (w.since.get(tag) ?? 0) > opts.threshold) lane = 'bulk';
        }
      } catch {
        // The view cannot be read: fairness is best effort, the submission is not refused for it.
      }
      // This submission counts for its tags from now on, for this window and the next.
      for (const tag of new Set(containerTags)) w.since.set(tag, (w.since.get(tag) ?? 0) + 1);
      return lane;
    },
  };
}
