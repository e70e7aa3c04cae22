import type { Handler } from '@memstream/bus';
import { forgetDocument, memorizeDocument, type DocumentToMemorize, type DreamGroups, type MemoryExtractor, type MemoryLog } from '@memstream/memory';

export interface MemorizerPorts {
  log: MemoryLog;
  extractor: MemoryExtractor;
  document(documentId: string, revision: number, correlationId: string): Promise<DocumentToMemorize | null>;
  now: () => Date;
  /** `dreaming: "dynamic"` grouping (packages/memory/src/dream.ts); without it every document is memorized at once. */
  groups?: DreamGroups;
  /** Told what each commit did, for metrics. */
  onCommitted?: (summary: { containerTag: string; created: number; updated: number; forgotten: number; tokens: number; ms: number }) => void;
}

/** indexed → memory commits (MEMORY stream). Emits no document event: the document's status keeps meaning "searchable". */
export function createMemorizeHandler(ports: MemorizerPorts): Handler {
  return async (event, ctx) => {
    if (event.type !== 'document.indexed.v1') return [];
    const doc = await ports.document(event.documentId, event.revision, event.correlationId);
    if (!doc) {
      ctx.log.debug('no current revision or extracted text: nothing to memorize');
      return [];
    }
    const outcomes = ports.groups ? await ports.groups.submit(doc) : await memorizeDocument(ports, doc);
    for (const { containerTag, commit } of outcomes) {
      if (!commit) continue;
      const cause = commit.cause;
      // A group's commit reaches the handler of each of its documents: counted once, by its first.
      const parts = cause.kind === 'extraction' ? [cause] : cause.kind === 'extraction-group' ? cause.documents : [];
      if (parts[0]?.documentId !== doc.documentId) continue;
      const count = (t: string) => commit.changes.filter((c) => c.type === t).length;
      const summary = {
        containerTag,
        created: count('memory.created.v1'),
        updated: count('memory.versioned.v1'),
        forgotten: count('memory.forgotten.v1'),
        tokens: parts.reduce((s, p) => s + p.tokens, 0),
        ms: parts.reduce((s, p) => s + p.ms, 0),
      };
      ports.onCommitted?.(summary);
      ctx.log.info({ ...summary, documents: parts.length, candidates: parts.reduce((s, p) => s + p.candidates.length, 0) }, 'memorized');
    }
    return [];
  };
}

/** deleted → what the document alone taught is forgotten. */
export function createForgetHandler(ports: Pick<MemorizerPorts, 'log' | 'now'>): Handler {
  return async (event, ctx) => {
    if (event.type !== 'document.deleted.v1') return [];
    const n = await forgetDocument(ports, event.documentId, event.correlationId);
    if (n) ctx.log.info({ forgotten: n }, 'memories of a deleted document forgotten');
    return [];
  };
}
