import type { DocumentEvent, DocumentSubmitted, EventOf, EventType } from '@memstream/contracts';
import { createLogger, newId, sha256Hex } from '@memstream/kit';
import type { HandlerContext } from './runner.js';
import { follow } from './events.js';

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

/**
 * One event of every type, all of `sub`'s revision: a new event type does not compile until it
 * has a sample here, and the readers' tests then check what they do with it.
 */
export function sampleEvents(sub: DocumentSubmitted, now: () => Date = () => new Date(Date.parse(sub.occurredAt) + 1_000)): { [T in EventType]: EventOf<T> } {
  return {
    'document.submitted.v1': sub,
    'document.stage-started.v1': follow(sub, 'document.stage-started.v1', { stage: 'chunking' }, 0, now),
    'document.extracted.v1': follow(sub, 'document.extracted.v1', { title: 'a title', type: 'webpage', text: 'other text', url: 'https://example.com/', format: 'plain' }, 0, now),
    'document.chunked.v1': follow(sub, 'document.chunked.v1', { tokenizer: 't', chunks: [{ index: 0, hash: 'h', text: 'other text', tokens: 2 }] }, 0, now),
    'document.embedded.v1': follow(sub, 'document.embedded.v1', { model: 'm', dim: 1, chunks: [{ index: 0, hash: 'h', text: 'other text', tokens: 2, vector: 'AACAPw==' }], computed: 1 }, 0, now),
    'document.indexed.v1': follow(sub, 'document.indexed.v1', { model: 'm', dim: 1, chunkCount: 1, removed: 0 }, 0, now),
    'document.failed.v1': follow(sub, 'document.failed.v1', { stage: 'chunking', reason: 'broken', class: 'permanent' }, 0, now),
    'document.metadata-updated.v1': follow(sub, 'document.metadata-updated.v1', { metadata: { k: 'changed' }, containerTags: ['other'], version: sub.data.metadataVersion + 1 }, 0, now),
    'document.deleted.v1': follow(sub, 'document.deleted.v1', { reason: 'api' }, 0, now),
  };
}
