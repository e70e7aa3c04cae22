import { DOCUMENT_STATUSES, STATUS_ON_ARRIVAL, type DocumentEvent, type DocumentStatus, type DocumentType } from '@memstream/contracts';
import type { DocumentView } from './port.js';

/** How far a status is along the pipeline (DOCUMENT_STATUSES is in pipeline order); done and failed are both the end. */
const RANK = Object.fromEntries(DOCUMENT_STATUSES.map((s, i) => [s, s === 'failed' ? DOCUMENT_STATUSES.indexOf('done') : i])) as Record<DocumentStatus, number>;

function isTerminal(s: DocumentStatus): boolean {
  return s === 'done' || s === 'failed';
}

function typeFromSubmission(e: Extract<DocumentEvent, { type: 'document.submitted.v1' }>): DocumentType {
  if (e.data.fileType) return e.data.fileType;
  return 'text';
}

/**
 * The projection's reducer: the view after `event`, given the view before it (null: none).
 * Returns null when the document is gone. Pure: time comes from the events, so replaying the
 * log gives back exactly the same views. Rules: a stale revision never overwrites a newer one;
 * within a revision the status only moves forward; done and failed are terminal for a revision.
 */
export function evolve(view: DocumentView | null, event: DocumentEvent): DocumentView | null {
  // updatedAt never moves backwards, so events redelivered out of order give the same view as log order.
  const at = view && view.updatedAt > event.occurredAt ? view.updatedAt : event.occurredAt;
  switch (event.type) {
    case 'document.submitted.v1': {
      if (view && event.revision <= view.revision) return view;
      const d = event.data;
      return {
        id: event.documentId,
        customId: d.customId,
        revision: event.revision,
        status: 'queued',
        title: view?.title ?? null,
        type: view?.type ?? typeFromSubmission(event),
        content: d.input.kind === 'text' ? d.input.content : null,
        summary: null,
        url: null,
        filepath: d.filepath,
        source: view?.source ?? null,
        // A metadata update newer than the one this submission was based on keeps its values.
        ...(view && view.metadataVersion > d.metadataVersion
          ? { metadata: view.metadata, containerTags: view.containerTags, metadataVersion: view.metadataVersion }
          : { metadata: d.metadata, containerTags: d.containerTags, metadataVersion: d.metadataVersion }),
        taskType: d.taskType,
        contentHash: d.contentHash,
        error: null,
        chunkCount: view?.chunkCount ?? 0,
        createdAt: view?.createdAt ?? event.occurredAt,
        updatedAt: at,
        version: view?.version ?? 0,
      };
    }
    case 'document.stage-started.v1':
      return advance(view, event, event.data.stage, at);
    case 'document.extracted.v1': {
      if (!view || event.revision !== view.revision) return view;
      const d = event.data;
      // Extracted: the chunker is next (STATUS_ON_ARRIVAL).
      return advance(
        {
          ...view,
          title: d.title ?? view.title,
          type: d.type,
          url: d.url ?? view.url,
          content: view.content ?? d.text,
          updatedAt: at,
        },
        event,
        STATUS_ON_ARRIVAL.extracted,
        at,
      );
    }
    case 'document.chunked.v1':
      // Chunked: the embedder is next.
      return advance(view, event, STATUS_ON_ARRIVAL.chunked, at);
    case 'document.embedded.v1':
      return view;
    case 'document.indexed.v1': {
      if (!view || event.revision !== view.revision || view.status === 'failed' || view.status === 'done') return view;
      return { ...view, status: 'done', chunkCount: event.data.chunkCount, error: null, updatedAt: at };
    }
    case 'document.failed.v1': {
      if (!view || event.revision !== view.revision || view.status === 'done' || view.status === 'failed') return view;
      return { ...view, status: 'failed', error: { ...event.data }, updatedAt: at };
    }
    case 'document.metadata-updated.v1': {
      if (!view || event.data.version <= view.metadataVersion) return view;
      return { ...view, metadata: event.data.metadata, containerTags: event.data.containerTags, metadataVersion: event.data.version, updatedAt: at };
    }
    case 'document.deleted.v1': {
      if (!view) return null;
      return event.revision >= view.revision ? null : view;
    }
  }
}

/** The view moved forward to `status` by an event of its revision; never backwards, never out of done or failed. */
function advance(view: DocumentView | null, event: DocumentEvent, status: DocumentStatus | undefined, at: string): DocumentView | null {
  if (!view || !status || event.revision !== view.revision || isTerminal(view.status)) return view;
  if (RANK[status] <= RANK[view.status]) return view;
  return { ...view, status, updatedAt: at };
}

/**
 * Two views describe the same document state (the concurrency token aside): their canonical JSON
 * is equal. Decided field by field, so a view that moved on (the usual case) differs at its first
 * changed field without serialising its content, and an unchanged field is one `===`.
 */
export function sameView(a: DocumentView | null, b: DocumentView | null): boolean {
  if (a === null || b === null) return a === b;
  const x = a as unknown as Record<string, unknown>;
  const y = b as unknown as Record<string, unknown>;
  for (const k in x) if (k !== 'version' && !sameJson(x[k], y[k])) return false;
  // A field only b has (a lacks it, so its value there is undefined): equal only when undefined in b too.
  for (const k in y) if (k !== 'version' && !(k in x) && y[k] !== undefined) return false;
  return true;
}

/** canonical(u) === canonical(v), without serialising when the answer is plain. */
function sameJson(u: unknown, v: unknown): boolean {
  if (u === v) return true;
  // Two different strings never have the same JSON: the content is never serialised to tell them apart.
  if (typeof u === 'string' && typeof v === 'string') return false;
  return canonical(u) === canonical(v);
}

/** JSON with object keys sorted, so two stores that return fields in another order compare equal. */
export function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v && typeof v === 'object') {
    const o = v as Record<string, unknown>;
    return `{${Object.keys(o).sort().filter((k) => o[k] !== undefined).map((k) => `${JSON.stringify(k)}:${canonical(o[k])}`).join(',')}}`;
  }
  return JSON.stringify(v);
}
