import type { BatchHandler } from '@memstream/bus';
import type { DocumentEvent, DocumentSubmitted } from '@memstream/contracts';
import { RetryableError } from '@memstream/kit';
import { evolve, sameView, type DocumentView, type DocumentViews, type ViewWrite } from '@memstream/views';

export interface ProjectionPorts {
  /** The latest submission of a document, read from the log. */
  lastSubmitted?: (documentId: string) => Promise<DocumentSubmitted | null>;
  /** The revision of the document's tombstone, 0 when it was never deleted. */
  tombstoneRevision?: (documentId: string) => Promise<number>;
}

/**
 * A stage event can arrive before the submission of its revision: the submission was delivered
 * to a projection that died, and comes back only after the ack wait. Dropping the stage event
 * then would leave the document queued for ever, so the submission is read from the log and
 * applied first. In log order (replay) this never triggers.
 */
async function withSubmission(before: DocumentView | null, event: DocumentEvent, ports: ProjectionPorts): Promise<DocumentView | null> {
  if (event.type === 'document.submitted.v1' || event.type === 'document.deleted.v1' || !ports.lastSubmitted) return before;
  if (before && event.revision <= before.revision) return before;
  const sub = await ports.lastSubmitted(event.documentId);
  return sub && sub.revision === event.revision ? evolve(before, sub) : before;
}

/**
 * The submission of an older revision, delivered after a newer one (its first delivery went to
 * a projection that died, and it came back only after the ack wait): the reducer ignores stale
 * revisions, but the document was created by the first one, so its time is the createdAt. In log
 * order this never triggers. A submission from before a deletion does not count: the document
 * was created anew after it.
 */
async function olderSubmission(before: DocumentView | null, event: DocumentEvent, ports: ProjectionPorts): Promise<DocumentView | null> {
  if (event.type !== 'document.submitted.v1' || !before || event.revision >= before.revision || event.occurredAt >= before.createdAt) return null;
  if (ports.tombstoneRevision && (await ports.tombstoneRevision(event.documentId)) >= event.revision) return null;
  return { ...before, createdAt: event.occurredAt };
}

/**
 * What one event makes of a document's view (null: it has none, or no longer has one). The reads
 * it may need (the submission, the tombstone) come from the log; the store is not touched.
 */
async function nextView(before: DocumentView | null, event: DocumentEvent, ports: ProjectionPorts): Promise<DocumentView | null> {
  // A submission redelivered after its document was deleted must not bring it back.
  if (before === null && event.type === 'document.submitted.v1' && ports.tombstoneRevision && (await ports.tombstoneRevision(event.documentId)) >= event.revision) {
    return null;
  }
  return (await olderSubmission(before, event, ports)) ?? evolve(await withSubmission(before, event, ports), event);
}

/** The write that turns `before` into `after`, or null when there is nothing to write. */
function writeOf(id: string, before: DocumentView | null, after: DocumentView | null): ViewWrite | null {
  if (after === null) return before === null ? null : { id, view: null, expectedVersion: before.version };
  if (before && sameView(before, after)) return null;
  return { id, view: after, expectedVersion: before?.version ?? 0 };
}

/**
 * Apply one event to the view store: read, evolve, compare-and-set. A lost race (another writer
 * moved the version) re-reads and re-applies, so replicas and redeliveries cannot lose an update.
 */
export async function applyEvent(views: DocumentViews, event: DocumentEvent, ports: ProjectionPorts = {}): Promise<'changed' | 'unchanged' | 'deleted'> {
  for (let attempt = 0; attempt < 8; attempt++) {
    const before = await views.get(event.documentId);
    const after = await nextView(before, event, ports);
    if (after === null) {
      if (before === null) return 'unchanged';
      await views.delete(event.documentId);
      return 'deleted';
    }
    if (before && sameView(before, after)) return 'unchanged';
    if (await views.put(after, before?.version ?? 0)) return 'changed';
  }
  throw new RetryableError(`view of ${event.documentId} kept changing under us`);
}

/**
 * A batch of events → the document views: the batch's documents read together, each document's
 * events applied in delivery order to its view in memory, and written in one store transaction
 * with one compare-and-set per document. A document whose write lost a race (another projection replica) has its events
 * applied again one by one, which re-reads and retries. Emits nothing.
 */
export function createProjectionHandler(views: DocumentViews, ports: ProjectionPorts = {}): BatchHandler {
  return async (items) => {
    const results: Array<PromiseSettledResult<DocumentEvent[]>> = new Array(items.length);
    const done = (ks: number[], r: PromiseSettledResult<DocumentEvent[]>) => ks.forEach((k) => (results[k] = r));
    const byDocument = new Map<string, number[]>();
    items.forEach(({ event }, k) => {
      const ks = byDocument.get(event.documentId);
      if (ks) ks.push(k);
      else byDocument.set(event.documentId, [k]);
    });
    const ids = [...byDocument.keys()];
    let befores: Array<DocumentView | null>;
    try {
      befores = await views.getMany(ids);
    } catch (reason) {
      return items.map(() => ({ status: 'rejected', reason }));
    }
    const planned = await Promise.all(
      ids.map(async (id, d) => {
        const ks = byDocument.get(id)!;
        try {
          const before = befores[d] ?? null;
          let after = before;
          for (const k of ks) after = await nextView(after, items[k]!.event, ports);
          return { ks, write: writeOf(id, before, after) };
        } catch (reason) {
          done(ks, { status: 'rejected', reason });
          return null;
        }
      }),
    );
    const writes = planned.filter((p): p is { ks: number[]; write: ViewWrite } => p !== null && p.write !== null);
    for (const p of planned) if (p && p.write === null) done(p.ks, { status: 'fulfilled', value: [] });
    let written: boolean[];
    try {
      written = await views.writeMany(writes.map((p) => p.write));
    } catch (reason) {
      for (const p of writes) done(p.ks, { status: 'rejected', reason });
      return results;
    }
    await Promise.all(
      writes.map(async (p, i) => {
        if (written[i]) return done(p.ks, { status: 'fulfilled', value: [] });
        // Lost a race: one event at a time, each read afresh.
        for (const k of p.ks) {
          try {
            await applyEvent(views, items[k]!.event, ports);
            results[k] = { status: 'fulfilled', value: [] };
          } catch (reason) {
            results[k] = { status: 'rejected', reason };
          }
        }
      }),
    );
    return results;
  };
}
