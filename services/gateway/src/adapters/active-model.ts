import { embeddingConfigStore, embeddingRefs, type Bus } from '@memstream/bus';
import { ChunkIndexSet, type ChunkIndex, type IndexStoreOptions } from '@memstream/chunk-index';
import { DEFAULT_INDEX, type EmbeddingConfig } from '@memstream/contracts';
import type { Embedder } from '@memstream/embedder';
import { errorMessage, type Logger } from '@memstream/kit';

/**
 * The embedding model and chunk index search uses, following NATS KV `memstream-config`/
 * `embedding` (written by `memstream replay embed`): queries are embedded by the active model and
 * searched in its index only, so vectors of two models are never compared. Until the key exists,
 * the environment's model and the default index.
 */
export async function followActiveModel(
  bus: Bus,
  opts: IndexStoreOptions & {
    log: Logger;
    /** The environment's model and index: what search uses before any switch. */
    embedder: Embedder;
    index: ChunkIndex;
    /** The embedder for a stored model's settings (undefined: the environment's). */
    embedderFor(settings: Record<string, string> | undefined): Promise<Embedder>;
  },
) {
  const store = await embeddingConfigStore(bus);
  const indexes = new ChunkIndexSet(opts);
  const indexNamed = (name: string) => (name === DEFAULT_INDEX ? Promise.resolve(opts.index) : indexes.get(name));
  let current = { index: opts.index, embedder: opts.embedder, model: opts.embedder.model };
  let seen = 0;
  const apply = async (config: EmbeddingConfig | null) => {
    const n = ++seen;
    if (!config) {
      current = { index: opts.index, embedder: opts.embedder, model: opts.embedder.model };
      return;
    }
    const [index, embedder] = await Promise.all([indexNamed(config.active.index), opts.embedderFor(config.active.settings)]);
    // A newer value arrived while this one was being opened: that one wins.
    if (n !== seen) return;
    const changed = current.index !== index || current.embedder !== embedder;
    current = { index, embedder, model: embedder.model };
    if (changed) opts.log.info({ model: embedder.model, dim: embedder.dim, index: config.active.index }, 'search uses the active embedding model');
  };
  await apply((await store.read()).config);
  const watch = await store.watch((c) => void apply(c).catch((err) => opts.log.error({ err: errorMessage(err) }, 'could not switch search to the new embedding model')));
  return {
    /** Search ports whose index and embedder are always the active model's. */
    searchPorts<V>(views: V) {
      return {
        views,
        get index() {
          return current.index;
        },
        get embedder() {
          return current.embedder;
        },
      };
    },
    /** Deleting a document removes its chunks from every model's index that still receives writes. */
    deletes: {
      async deleteDocument(documentId: string): Promise<number> {
        const { config } = await store.read();
        const names = new Set([DEFAULT_INDEX, ...embeddingRefs(config).map((r) => r.index)]);
        let removed = 0;
        for (const name of names) removed = Math.max(removed, await (await indexNamed(name)).deleteDocument(documentId));
        return removed;
      },
    },
    async close() {
      watch.stop();
      await indexes.close();
    },
  };
}
