import { embeddingConfigStore, embeddingRefs, type Bus } from '@memstream/bus';
import { CONFIG_BUCKET, DEFAULT_INDEX } from '@memstream/contracts';
import type { ChunkIndex, ChunkIndexSet } from '@memstream/chunk-index';
import { PermanentError } from '@memstream/kit';

/**
 * Which index receives which vectors, read fresh from NATS KV per message so a model switch
 * (`memstream replay embed`) takes effect at once: each model has its own index, and vectors go
 * to the index of the model that made them, never into another model's.
 */
export async function modelIndexes(bus: Bus, indexes: ChunkIndexSet) {
  const store = await embeddingConfigStore(bus);
  return {
    async indexFor(model: string, dim: number): Promise<ChunkIndex> {
      // store.read() shares concurrent reads (freshReads): a batch's documents cost two KV reads, not one each.
      const { config } = await store.read();
      if (!config) return indexes.get(DEFAULT_INDEX);
      const refs = embeddingRefs(config);
      // A model recorded without settings is "the environment's": its name was read by the CLI
      // from its own environment, so vectors of no recorded model are taken to be that one's.
      const ref = refs.find((r) => r.model === model && r.dim === dim) ?? refs.find((r) => r.settings === undefined && r.dim === dim);
      if (!ref) {
        throw new PermanentError(
          `vectors of model ${model} (dim ${dim}), but the active embedding model is ${config.active.model} (dim ${config.active.dim}): an embedder not reading ${CONFIG_BUCKET} made them`,
        );
      }
      return indexes.get(ref.index);
    },
    async liveIndexes(): Promise<ChunkIndex[]> {
      const { config } = await store.read();
      const names = config ? [...new Set(embeddingRefs(config).map((r) => r.index))] : [DEFAULT_INDEX];
      return Promise.all(names.map((n) => indexes.get(n)));
    },
  };
}
