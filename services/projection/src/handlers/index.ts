import type { Handler } from '@memstream/bus';
import type { DocumentEvent, DocumentSubmitted } from '@memstream/contracts';
import { RetryableError } from '@memstream/kit';
import { evolve, sameView, type DocumentView, type DocumentViews } from '@memstream/views';

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
 * Apply one event to the view store: read, evolve, compare-and-set. A lost race (another writer
 * moved the version) re-reads and re-applies, so replicas and redeliveries cannot lose an update.
 */
export async function applyEvent(views: DocumentViews, event: DocumentEvent, ports: ProjectionPorts = {}): Promise<'changed' | 'unchanged' | 'deleted'> {
  for (let attempt = 0; attempt < 8; attempt++) {
    const before = await views.get(event.documentId);
    // A submission redelivered after its document was deleted must not bring it back.
    if (before === null && event.type === 'document.submitted.v1' && ports.tombstoneRevision && (await ports.tombstoneRevision(event.documentId)) >= event.revision) {
      return 'unchanged';
    }
    const after = (await olderSubmission(before, event, ports)) ?? evolve(await withSubmission(before, event, ports), event);
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

/** Every document event → the document view. Emits nothing. */
export function createProjectionHandler(views: DocumentViews, ports: ProjectionPorts = {}): Handler {
  return async (event) => {
    await applyEvent(views, event, ports);
    return [];
  };
}
