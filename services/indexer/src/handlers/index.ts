import { follow, stageHandler, type Handler } from '@memstream/bus';
import { decodeVector, type Metadata } from '@memstream/contracts';
import type { ChunkIndex } from '@memstream/chunk-index';

export interface IndexerPorts {
  index: ChunkIndex;
  /** The document's current tags and metadata (from the log), which search filters on. */
  documentScope(documentId: string): Promise<{ containerTags: string[]; metadata: Metadata }>;
  /** Whether the document has been deleted since (its tombstone is the newest revision). */
  isDeleted(documentId: string): Promise<boolean>;
  /**
   * Whether this revision (or a newer one) of the document failed: a stage that timed out and
   * was failed may still finish late, and its output must not become searchable.
   */
  hasFailed?: (documentId: string, revision: number) => Promise<boolean>;
  /**
   * The index that holds vectors of this model, when models can be switched at run time (each
   * model has its own index: see `memstream replay embed`). Absent: `index`.
   */
  indexFor?: (model: string, dim: number) => Promise<ChunkIndex>;
  /** Every index whose tags and metadata must follow changes (the active one and a shadow being built). Absent: `index`. */
  liveIndexes?: () => Promise<ChunkIndex[]>;
}

/** embedded → indexed: the index holds exactly this revision's chunks; removed chunks leave it. */
export function createIndexHandler(ports: IndexerPorts): Handler {
  return stageHandler('indexer', {
    handle: async (event, ctx) => {
      if (await ports.hasFailed?.(event.documentId, event.revision)) {
        ctx.log.info('this revision failed: its chunks are not indexed');
        return [];
      }
      const scope = await ports.documentScope(event.documentId);
      const d = event.data;
      const index = (await ports.indexFor?.(d.model, d.dim)) ?? ports.index;
      const res = await index.replaceDocument({
        documentId: event.documentId,
        revision: event.revision,
        model: d.model,
        dim: d.dim,
        containerTags: scope.containerTags,
        metadata: scope.metadata,
        chunks: d.chunks.map((c) => ({ index: c.index, hash: c.hash, text: c.text, vector: decodeVector(c.vector) })),
      });
      if (res.stale) {
        ctx.log.info('index holds a newer revision: nothing to do');
        return [];
      }
      // Deleted or failed while we wrote (the gateway removed its chunks before our write landed): remove them again.
      if ((await ports.isDeleted(event.documentId)) || (await ports.hasFailed?.(event.documentId, event.revision))) {
        await index.deleteDocument(event.documentId);
        return [];
      }
      return [follow(event, 'document.indexed.v1', { model: d.model, dim: d.dim, chunkCount: d.chunks.length, removed: res.removed })];
    },
  });
}

/** metadata-updated → the chunks' tags and metadata changed in place, without re-embedding. */
export function createMetadataHandler(ports: IndexerPorts): Handler {
  return async (event) => {
    if (event.type !== 'document.metadata-updated.v1') return [];
    // Read the newest state rather than trust this event: updates may arrive out of order.
    const scope = await ports.documentScope(event.documentId);
    for (const index of (await ports.liveIndexes?.()) ?? [ports.index]) await index.updateDocumentMeta(event.documentId, scope);
    return [];
  };
}
