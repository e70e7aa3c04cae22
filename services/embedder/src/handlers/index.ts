import { follow, stageHandler, type Handler, type StageHandler } from '@memstream/bus';
import { encodeVector, type EmbeddedData } from '@memstream/contracts';
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
 * chunked → embedded: one vector per chunk, computed in batches or reused. The runner's stage
 * wrapper announces stage-started(embedding) and, on a re-drive from index, re-emits the earlier
 * vectors when they are of the model in use now.
 */
export function createEmbedHandler(ports: EmbedderPorts): Handler {
  const { batch } = ports;
  const handle: StageHandler<'embedder'> = async (event, ctx) => {
    const embedder = (await ports.activeEmbedder?.()) ?? ports.embedder;
    const chunks = event.data.chunks;
    const redrive = event.data.redrive;
    // A re-drive from the embed stage asks for new vectors: the cache of earlier ones is not used.
    const known = redrive?.from === 'embed' ? new Map<string, string>() : ((await ports.previousVectors?.(event.documentId, embedder.model)) ?? new Map<string, string>());
    const vectors = new Map<string, string>();
    const todo = [...new Set(chunks.map((c) => c.hash).filter((h) => !known.has(h)))];
    const textOf = new Map(chunks.map((c) => [c.hash, c.text]));
    for (let i = 0; i < todo.length; i += batch) {
      const hashes = todo.slice(i, i + batch);
      const out = await embedder.embed(hashes.map((h) => textOf.get(h)!));
      hashes.forEach((h, j) => vectors.set(h, encodeVector(out[j]!)));
    }
    if (todo.length < chunks.length) ctx.log.info({ computed: todo.length, reused: chunks.length - todo.length }, 'reused vectors of unchanged chunks');
    return [
      follow(event, 'document.embedded.v1', {
        model: embedder.model,
        dim: embedder.dim,
        computed: todo.length,
        chunks: chunks.map((c) => ({ ...c, vector: vectors.get(c.hash) ?? known.get(c.hash)! })),
      }),
    ];
  };
  return stageHandler('embedder', {
    handle,
    ...(ports.embeddedOf ? { outputOf: ports.embeddedOf } : {}),
    // Only vectors of the model in use now: after a model switch they are embedded again.
    reuse: async (prior) => {
      const embedder = (await ports.activeEmbedder?.()) ?? ports.embedder;
      return prior.model === embedder.model && prior.dim === embedder.dim ? { ...prior, computed: 0 } : null;
    },
  });
}
