import { follow, stageBatchHandler, type BatchHandler, type Handler, type HandlerContext, type StageBatchHandler } from '@memstream/bus';
import { decodeVector, type DocumentEvent, type EventOf, type Metadata } from '@memstream/contracts';
import type { ChunkIndex, ReplaceDocumentInput } from '@memstream/chunk-index';

export interface IndexerPorts {
  index: ChunkIndex;
  /**
   * The document as the log has it now (adapters/scope-from-log.ts): its newest submitted revision
   * (0: none, it was deleted), its current tags and metadata, which search filters on, and the
   * newest revision that failed (a stage that timed out and was failed may still finish late, and
   * its output must not become searchable).
   */
  documentState(documentId: string): Promise<{ revision: number; scope: { containerTags: string[]; metadata: Metadata }; failedRevision: number }>;
  /** Whether the document was deleted, or this revision failed, since its state was read (the gateway removed its chunks before our write landed). */
  endedSince(documentId: string, revision: number): Promise<boolean>;
  /**
   * The index that holds vectors of this model, when models can be switched at run time (each
   * model has its own index: see `memstream replay embed`). Absent: `index`.
   */
  indexFor?: (model: string, dim: number) => Promise<ChunkIndex>;
  /** Every index whose tags and metadata must follow changes (the active one and a shadow being built). Absent: `index`. */
  liveIndexes?: () => Promise<ChunkIndex[]>;
}

/**
 * embedded → indexed: the index holds exactly this revision's chunks; removed chunks leave it.
 * A batch's documents are written together, one transaction per index (SQLite); when that fails,
 * each document is written on its own so only the one at fault fails.
 *
 * The stale-work rule is applied here rather than by the runner (the worker runs with
 * skipStale off): the state this stage must read anyway (tags, metadata, failures) comes with the
 * newest submitted revision, so one round of reads decides both.
 */
export function createIndexHandler(ports: IndexerPorts): BatchHandler {
  type Item = { event: EventOf<'document.embedded.v1'>; ctx: HandlerContext };
  type Planned = { k: number; index: ChunkIndex; input: ReplaceDocumentInput };
  const handleBatch: StageBatchHandler<'indexer'> = async (items) => {
    const results: Array<PromiseSettledResult<DocumentEvent[]>> = items.map(() => ({ status: 'fulfilled', value: [] }));
    const planned = (
      await Promise.all(
        items.map(async ({ event, ctx }: Item, k): Promise<Planned | null> => {
          try {
            const d = event.data;
            const [state, modelIndex] = await Promise.all([ports.documentState(event.documentId), ports.indexFor?.(d.model, d.dim)]);
            if (state.revision !== event.revision) {
              // A newer revision was submitted, or the document was deleted (its history purged).
              ctx.log.debug({ latest: state.revision }, 'stale revision: skipped');
              return null;
            }
            if (state.failedRevision >= event.revision) {
              ctx.log.info('this revision failed: its chunks are not indexed');
              return null;
            }
            const { scope } = state;
            const index = modelIndex ?? ports.index;
            const input: ReplaceDocumentInput = {
              documentId: event.documentId,
              revision: event.revision,
              model: d.model,
              dim: d.dim,
              containerTags: scope.containerTags,
              metadata: scope.metadata,
              chunks: d.chunks.map((c) => ({ index: c.index, hash: c.hash, text: c.text, vector: decodeVector(c.vector) })),
            };
            return { k, index, input };
          } catch (reason) {
            results[k] = { status: 'rejected', reason };
            return null;
          }
        }),
      )
    ).filter((p): p is Planned => p !== null);
    const byIndex = new Map<ChunkIndex, Planned[]>();
    for (const p of planned) byIndex.set(p.index, [...(byIndex.get(p.index) ?? []), p]);
    const written: Array<{ p: Planned; stale: boolean; removed: number }> = [];
    for (const [index, group] of byIndex) {
      try {
        // One document once per call: a redelivered copy in the same batch is written by itself after.
        const once = new Map(group.map((p) => [p.input.documentId, p]));
        const firsts = [...once.values()];
        const res = await index.replaceDocuments(firsts.map((p) => p.input));
        firsts.forEach((p, i) => written.push({ p, ...res[i]! }));
        for (const p of group) if (!firsts.includes(p)) written.push({ p, ...(await index.replaceDocument(p.input)) });
      } catch {
        for (const p of group) {
          try {
            written.push({ p, ...(await index.replaceDocument(p.input)) });
          } catch (reason) {
            results[p.k] = { status: 'rejected', reason };
          }
        }
      }
    }
    await Promise.all(
      written.map(async ({ p, stale, removed }) => {
        const { event, ctx } = items[p.k]!;
        try {
          if (stale) {
            ctx.log.info('index holds a newer revision: nothing to do');
            return;
          }
          // Deleted or failed while we wrote (the gateway removed its chunks before our write landed): remove them again.
          if (await ports.endedSince(event.documentId, event.revision)) {
            await p.index.deleteDocument(event.documentId);
            return;
          }
          const d = event.data;
          results[p.k] = { status: 'fulfilled', value: [follow(event, 'document.indexed.v1', { model: d.model, dim: d.dim, chunkCount: d.chunks.length, removed })] };
        } catch (reason) {
          results[p.k] = { status: 'rejected', reason };
        }
      }),
    );
    return results;
  };
  return stageBatchHandler('indexer', { handleBatch });
}

/** metadata-updated → the chunks' tags and metadata changed in place, without re-embedding. */
export function createMetadataHandler(ports: IndexerPorts): Handler {
  return async (event) => {
    if (event.type !== 'document.metadata-updated.v1') return [];
    // Read the newest state rather than trust this event: updates may arrive out of order.
    const { scope } = await ports.documentState(event.documentId);
    for (const index of (await ports.liveIndexes?.()) ?? [ports.index]) await index.updateDocumentMeta(event.documentId, scope);
    return [];
  };
}
