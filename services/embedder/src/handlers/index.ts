import { follow, stageBatchHandler, type BatchHandler, type HandlerContext, type StageBatchHandler } from '@memstream/bus';
import { encodeVector, type DocumentEvent, type EmbeddedData, type EventOf } from '@memstream/contracts';
import type { Embedder } from '@memstream/embedder';

export interface EmbedderPorts {
  embedder: Embedder;
  batch: number;
  /**
   * Vectors this document already has, by chunk hash, for this model: the previous revision's
   * embedded event in the log. A re-ingested document embeds only the chunks whose text is new.
   */
  previousVectors?: (documentId: string, model: string) => Promise<Map<string, string>>;
  /**
   * The embedder to use for this message, when the active model can change at run time (NATS KV
   * `memstream-config`/`embedding`, set by `memstream replay embed`). Absent: `embedder`.
   */
  activeEmbedder?: () => Promise<Embedder>;
  /** What the embedder emitted for an earlier revision (re-drive from the index stage re-emits it). */
  embeddedOf?: (documentId: string, revision: number) => Promise<EmbeddedData | null>;
}

/**
 * Whether the log may hold vectors of this document already: not on the first delivery of a first
 * revision's chunks outside a re-drive, since the document has no earlier revision and this one no
 * embedded event yet. The read skipped is a request to the broker per new document. (A chunked
 * event published twice, beyond the broker's duplicate window, has its vectors computed again.)
 */
function mayHaveVectors(event: EventOf<'document.chunked.v1'>, ctx: HandlerContext): boolean {
  return event.revision > 1 || event.data.redrive !== undefined || ctx.msg.deliveryCount > 1;
}

/**
 * chunked → embedded: one vector per chunk, computed or reused; the chunks to compute of every
 * document of a batch go to the model together, in calls of `batch` texts. The runner's stage
 * wrapper announces stage-started(embedding) and, on a re-drive from index, re-emits the earlier
 * vectors when they are of the model in use now.
 */
export function createEmbedHandler(ports: EmbedderPorts): BatchHandler {
  /** The documents' events, their vectors computed in shared calls; throws when a call fails. */
  async function embedAll(embedder: Embedder, items: Array<{ event: EventOf<'document.chunked.v1'>; ctx: HandlerContext }>): Promise<DocumentEvent[][]> {
    const known = await Promise.all(
      items.map(async ({ event, ctx }) =>
        // A re-drive from the embed stage asks for new vectors: the cache of earlier ones is not used.
        event.data.redrive?.from === 'embed' || !mayHaveVectors(event, ctx) ? new Map<string, string>() : ((await ports.previousVectors?.(event.documentId, embedder.model)) ?? new Map<string, string>()),
      ),
    );
    const todo = new Map<string, string>();
    items.forEach(({ event }, k) => {
      for (const c of event.data.chunks) if (!known[k]!.has(c.hash)) todo.set(c.hash, c.text);
    });
    const hashes = [...todo.keys()];
    const vectors = new Map<string, string>();
    for (let i = 0; i < hashes.length; i += ports.batch) {
      const part = hashes.slice(i, i + ports.batch);
      const out = await embedder.embed(part.map((h) => todo.get(h)!));
      part.forEach((h, j) => vectors.set(h, encodeVector(out[j]!)));
    }
    return items.map(({ event, ctx }, k) => {
      const chunks = event.data.chunks;
      const computed = new Set(chunks.map((c) => c.hash).filter((h) => !known[k]!.has(h))).size;
      if (computed < chunks.length) ctx.log.debug({ computed, reused: chunks.length - computed }, 'reused vectors of unchanged chunks');
      return [
        follow(event, 'document.embedded.v1', {
          model: embedder.model,
          dim: embedder.dim,
          computed,
          chunks: chunks.map((c) => ({ ...c, vector: known[k]!.get(c.hash) ?? vectors.get(c.hash)! })),
        }),
      ];
    });
  }

  const handleBatch: StageBatchHandler<'embedder'> = async (items) => {
    const embedder = (await ports.activeEmbedder?.()) ?? ports.embedder;
    try {
      return (await embedAll(embedder, items)).map((value) => ({ status: 'fulfilled', value }));
    } catch (err) {
      // One document's text may be what a remote model refuses: each document on its own, so
      // that one fails and the others go on.
      if (items.length === 1) return [{ status: 'rejected', reason: err }];
      return Promise.all(
        items.map(async (item): Promise<PromiseSettledResult<DocumentEvent[]>> => {
          try {
            return { status: 'fulfilled', value: (await embedAll(embedder, [item]))[0]! };
          } catch (reason) {
            return { status: 'rejected', reason };
          }
        }),
      );
    }
  };
  return stageBatchHandler('embedder', {
    handleBatch,
    ...(ports.embeddedOf ? { outputOf: ports.embeddedOf } : {}),
    // Only vectors of the model in use now: after a model switch they are embedded again.
    reuse: async (prior) => {
      const embedder = (await ports.activeEmbedder?.()) ?? ports.embedder;
      return prior.model === embedder.model && prior.dim === embedder.dim ? { ...prior, computed: 0 } : null;
    },
  });
}
