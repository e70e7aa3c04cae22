import { follow, type Handler } from '@memstream/bus';
import { encodeVector } from '@memstream/contracts';
import type { Embedder } from '@memstream/embedder';

/** chunked → stage-started(embedding), then embedded: one vector per chunk, in batches. */
export function createEmbedHandler(ports: { embedder: Embedder; batch: number }): Handler {
  const { embedder, batch } = ports;
  return async (event, ctx) => {
    if (event.type !== 'document.chunked.v1') return [];
    await ctx.emit(follow(event, 'document.stage-started.v1', { stage: 'embedding' }));
    const chunks = event.data.chunks;
    const vectors: Float32Array[] = [];
    for (let i = 0; i < chunks.length; i += batch) {
      vectors.push(...(await embedder.embed(chunks.slice(i, i + batch).map((c) => c.text))));
    }
    return [
      follow(event, 'document.embedded.v1', {
        model: embedder.model,
        dim: embedder.dim,
        computed: chunks.length,
        chunks: chunks.map((c, i) => ({ ...c, vector: encodeVector(vectors[i]!) })),
      }),
    ];
  };
}
