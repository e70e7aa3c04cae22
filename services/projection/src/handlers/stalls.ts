import { IN_PROGRESS_STATUSES, stageOfStatus, waitingOn, type DocumentEvent, type EventKind, type Stage } from '@memstream/contracts';
import { newId } from '@memstream/kit';
import type { DocumentView, DocumentViews } from '@memstream/views';

export interface StallPorts {
  views: DocumentViews;
  /** The last event of a kind for a document, from the log. */
  lastEvent(documentId: string, kind: EventKind): Promise<DocumentEvent | null>;
  publish(event: DocumentEvent): Promise<void>;
  now(): Date;
}

export interface StallPolicy {
  /** A document whose status has not moved for this long is stalled. */
  leaseMs: number;
  /** Re-drives per document before it is failed as exhausted. */
  maxRedrives: number;
}

/**
 * Finds documents stuck in a non-terminal status past the lease and re-drives them: the event
 * that should move them on is published again under a new id, so the next stage sees it anew
 * (every stage is idempotent). Past `maxRedrives` the document is failed as exhausted with the
 * reason, so nothing sits in progress for ever. Returns what it did, for the log and the counts.
 */
export function createStallDetector(ports: StallPorts, policy: StallPolicy) {
  const redrives = new Map<string, { revision: number; count: number; at: number }>();
  let total = 0;

  async function redrive(v: DocumentView): Promise<'redriven' | 'failed' | 'skipped'> {
    const now = ports.now().getTime();
    const seen = redrives.get(v.id);
    const state = seen && seen.revision === v.revision ? seen : { revision: v.revision, count: 0, at: 0 };
    // One re-drive per lease: give it time to move before trying again.
    if (now - state.at < policy.leaseMs) return 'skipped';
    if (state.count >= policy.maxRedrives) {
      const cause = await ports.lastEvent(v.id, 'submitted');
      if (!cause || cause.revision !== v.revision) return 'skipped';
      const id = newId();
      await ports.publish({
        id,
        type: 'document.failed.v1',
        documentId: v.id,
        revision: v.revision,
        occurredAt: ports.now().toISOString(),
        correlationId: cause.correlationId,
        causationId: cause.id,
        data: {
          stage: stageOfStatus(v.status) as Stage,
          reason: `stalled: no progress in ${v.status} after ${state.count} re-drives ${Math.round(policy.leaseMs / 1000)} s apart`,
          class: 'exhausted',
        },
      });
      redrives.delete(v.id);
      return 'failed';
    }
    // What the document waits on comes from the pipeline table: its stage's input, or the next one's.
    for (const kind of waitingOn(v.status)) {
      const e = await ports.lastEvent(v.id, kind);
      if (!e || e.revision !== v.revision) continue;
      await ports.publish({ ...e, id: `${e.id.slice(0, 100)}.r${state.count + 1}`, occurredAt: ports.now().toISOString() });
      redrives.set(v.id, { revision: v.revision, count: state.count + 1, at: now });
      total++;
      return 'redriven';
    }
    return 'skipped';
  }

  return {
    /** Scan once: the oldest non-terminal documents first. */
    async scan(): Promise<{ stalled: number; redriven: number; failed: number }> {
      const cutoff = new Date(ports.now().getTime() - policy.leaseMs).toISOString();
      const { items } = await ports.views.list({ statuses: IN_PROGRESS_STATUSES, sort: 'updatedAt', order: 'asc', limit: 200, offset: 0 });
      const stalled = items.filter((v) => v.updatedAt < cutoff);
      let redriven = 0;
      let failed = 0;
      for (const v of stalled) {
        const r = await redrive(v);
        if (r === 'redriven') redriven++;
        if (r === 'failed') failed++;
      }
      return { stalled: stalled.length, redriven, failed };
    },
    /** Re-drives since start. */
    total: () => total,
  };
}
