import {
  AddDocumentRequest,
  DOCUMENT_ID_PATTERN,
  type DocumentEvent,
  type DocumentResponse,
  type DocumentSubmitted,
} from '@memstream/contracts';
import { NotFoundError, RetryableError, documentIdForCustomId, newId, sha256Hex } from '@memstream/kit';
import { evolve, type DocumentView, type DocumentViews } from '@memstream/views';

/** What the gateway needs of the event log. */
export interface EventLog {
  /** The newest submission of a document (with its stream sequence) and the newest revision, deleted or not. */
  head(documentId: string): Promise<{ submitted: DocumentSubmitted | null; submittedSeq: number; revision: number; deleted: boolean }>;
  /** Publish; with `expectLastSubmittedSeq`, only if no other submission of this document came in between. */
  publish(event: DocumentEvent, opts?: { expectLastSubmittedSeq?: number; headers?: Record<string, string> }): Promise<void>;
}

export interface GatewayPorts {
  views: DocumentViews;
  events: EventLog;
  now(): Date;
}

/** A publish refused because another submission of the same document won the race. */
export function isConcurrencyConflict(err: unknown): boolean {
  return /wrong last sequence/i.test(String((err as Error)?.message ?? err));
}

/**
 * Accept a document: validate, pick its id, and append `submitted` with the next revision.
 * Answers only after JetStream has acknowledged the event, so nothing accepted is lost.
 */
export async function addDocument(ports: GatewayPorts, body: unknown, headers: Record<string, string> = {}): Promise<{ id: string; status: 'queued' }> {
  const req = AddDocumentRequest.parse(body);
  const documentId = req.customId ? documentIdForCustomId(req.customId) : newId();
  const containerTags = [...new Set([...(req.containerTag ? [req.containerTag] : []), ...(req.containerTags ?? [])])];
  for (let attempt = 0; attempt < 5; attempt++) {
    const head = await ports.events.head(documentId);
    const id = newId();
    const event: DocumentSubmitted = {
      id,
      type: 'document.submitted.v1',
      documentId,
      revision: head.revision + 1,
      occurredAt: ports.now().toISOString(),
      correlationId: id,
      causationId: null,
      data: {
        input: { kind: 'text', content: req.content },
        contentHash: sha256Hex(req.content),
        customId: req.customId ?? null,
        containerTags,
        metadata: req.metadata ?? {},
        entityContext: req.entityContext ?? null,
        filterByMetadata: req.filterByMetadata ?? null,
        fileType: null,
        mimeType: null,
        filepath: req.filepath ?? null,
        taskType: req.taskType ?? 'memory',
        dreaming: req.dreaming ?? 'dynamic',
      },
    };
    try {
      await ports.events.publish(event, { expectLastSubmittedSeq: head.submittedSeq, headers });
      return { id: documentId, status: 'queued' };
    } catch (err) {
      if (!isConcurrencyConflict(err)) throw err;
    }
  }
  throw new RetryableError('the document is being changed by other requests right now');
}

/**
 * A document by id. The view store is a projection and may lag the log by a few milliseconds,
 * so a document the log has but the view does not yet is answered from its submission: GET right
 * after add never says 404.
 */
export async function getDocument(ports: GatewayPorts, id: string): Promise<DocumentView> {
  if (!DOCUMENT_ID_PATTERN.test(id)) throw new NotFoundError('Document not found', `no document with id ${id}`);
  const view = await ports.views.get(id);
  if (view) return view;
  const head = await ports.events.head(id);
  if (head.submitted && !head.deleted) {
    const v = evolve(null, head.submitted);
    if (v) return v;
  }
  throw new NotFoundError('Document not found', `no document with id ${id}`);
}

/** The wire form of a view: every field the official SDK names, null where unknown. */
export function toDocumentResponse(v: DocumentView): DocumentResponse {
  return {
    id: v.id,
    customId: v.customId,
    connectionId: null,
    title: v.title,
    summary: v.summary,
    type: v.type,
    status: v.status,
    content: v.content,
    metadata: v.metadata,
    containerTags: v.containerTags,
    filepath: v.filepath,
    source: v.source,
    url: v.url,
    ogImage: null,
    raw: null,
    spatialPoint: null,
    taskType: v.taskType,
    createdAt: v.createdAt,
    updatedAt: v.updatedAt,
    error: v.error,
    reason: v.error?.reason ?? null,
    chunkCount: v.chunkCount,
  };
}
