import type { DocumentEvent, DocumentSubmitted } from '@memstream/contracts';
import { createLogger, newId, sha256Hex } from '@memstream/kit';
import type { HandlerContext } from './runner.js';

/** A handler context that records what the handler emits, for given-events-then-events tests. */
export function recordingContext(): HandlerContext & { emitted: DocumentEvent[] } {
  const emitted: DocumentEvent[] = [];
  return {
    emitted,
    msg: { seq: 1, deliveryCount: 1, subject: 'doc.test.x' },
    log: createLogger('test', { level: 'silent' }),
    emit: async (e) => {
      emitted.push(e);
    },
  };
}

/** A valid submitted event for tests; `data` fields override the defaults. */
export function submittedEvent(content: string, over: Omit<Partial<DocumentSubmitted>, 'data'> & { data?: Partial<DocumentSubmitted['data']> } = {}): DocumentSubmitted {
  const id = newId();
  const { data, ...rest } = over;
  return {
    id,
    type: 'document.submitted.v1',
    documentId: 'doc' + id.slice(0, 10),
    revision: 1,
    occurredAt: new Date('2026-01-01T00:00:00Z').toISOString(),
    correlationId: id,
    causationId: null,
    ...rest,
    data: {
      input: { kind: 'text', content },
      contentHash: sha256Hex(content),
      customId: null,
      containerTags: [],
      metadata: {},
      entityContext: null,
      filterByMetadata: null,
      fileType: null,
      mimeType: null,
      filepath: null,
      taskType: 'memory',
      dreaming: 'dynamic',
      metadataVersion: 0,
      ...data,
    },
  };
}
