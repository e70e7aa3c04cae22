import { STATUS_ON_ARRIVAL, type DocumentEvent } from '@memstream/contracts';
import { NotFoundError } from '@memstream/kit';
import { getDocument, type GatewayPorts } from './documents.js';
import type { TagScope } from './scope.js';

/** One event of a document's life, as GET /v3/documents/{id}/timeline shows it. */
export interface TimelineEntry {
  seq: number;
  at: string;
  type: string;
  revision: number;
  /** The status this event moves the document to, if it moves it. */
  status: string | null;
  stage: string | null;
  /** Milliseconds since the previous entry: where the time went. */
  sincePreviousMs: number | null;
  detail: Record<string, unknown> | null;
}

function describe(e: DocumentEvent): Pick<TimelineEntry, 'status' | 'stage' | 'detail'> {
  switch (e.type) {
    case 'document.submitted.v1':
      return { status: 'queued', stage: null, detail: { input: e.data.input.kind, customId: e.data.customId } };
    case 'document.stage-started.v1':
      return { status: e.data.stage, stage: e.data.stage, detail: null };
    // A later stage's input moves the document to that stage's status (STATUS_ON_ARRIVAL).
    case 'document.extracted.v1':
      return { status: STATUS_ON_ARRIVAL.extracted ?? null, stage: 'extracting', detail: { type: e.data.type, format: e.data.format, characters: e.data.text.length } };
    case 'document.chunked.v1':
      return { status: STATUS_ON_ARRIVAL.chunked ?? null, stage: 'chunking', detail: { chunks: e.data.chunks.length, tokenizer: e.data.tokenizer } };
    case 'document.embedded.v1':
      return { status: null, stage: 'embedding', detail: { model: e.data.model, chunks: e.data.chunks.length, computed: e.data.computed } };
    case 'document.indexed.v1':
      return { status: 'done', stage: 'indexing', detail: { chunkCount: e.data.chunkCount, removed: e.data.removed } };
    case 'document.failed.v1':
      return { status: 'failed', stage: e.data.stage, detail: { reason: e.data.reason, class: e.data.class } };
    case 'document.metadata-updated.v1':
      return { status: null, stage: null, detail: { version: e.data.version } };
    case 'document.deleted.v1':
      return { status: null, stage: null, detail: { reason: e.data.reason } };
  }
}

/** Every event of a document, in log order, with the time between them: where the time went. */
export async function documentTimeline(ports: GatewayPorts, idOrCustomId: string, scope: TagScope = null): Promise<{ id: string; events: TimelineEntry[] }> {
  // A document outside a scoped key's tags is 404, as for GET.
  const view = await getDocument(ports, idOrCustomId, scope);
  const history = await ports.events.history(view.id);
  if (history.length === 0) throw new NotFoundError('Document not found', `no events for ${JSON.stringify(idOrCustomId)}`);
  let prev: number | null = null;
  const events = history.map(({ event, seq }) => {
    const t = Date.parse(event.occurredAt);
    const entry: TimelineEntry = { seq, at: event.occurredAt, type: event.type, revision: event.revision, sincePreviousMs: prev === null ? null : t - prev, ...describe(event) };
    prev = t;
    return entry;
  });
  return { id: view.id, events };
}
