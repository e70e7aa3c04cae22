import type { Embedder } from '@memstream/embedder';
import type { MemoryStore } from './port.js';
import { QdrantMemoryStore } from './qdrant.js';
import { SqliteMemoryStore } from './sqlite.js';

/** The default name prefix of the Qdrant memory store's collections (QDRANT_MEMORY_COLLECTION). */
export const DEFAULT_MEMORY_COLLECTION = 'memstream_memories';

/**
 * Open the configured memory store, chosen like the chunk index: Qdrant when `qdrantUrl` is set
 * (collections `${qdrantCollection}_<model>_<dim>` and `…_state`, shared by every memorizer and
 * gateway replica), otherwise the SQLite file at `sqlitePath`.
 */
export async function openMemoryStore(opts: {
  sqlitePath: string;
  embedder: Embedder;
  qdrantUrl?: string | undefined;
  qdrantApiKey?: string | undefined;
  qdrantCollection?: string | undefined;
}): Promise<MemoryStore> {
  if (opts.qdrantUrl) {
    return QdrantMemoryStore.connect(opts.qdrantUrl, opts.embedder, { apiKey: opts.qdrantApiKey, collection: opts.qdrantCollection ?? DEFAULT_MEMORY_COLLECTION });
  }
  return SqliteMemoryStore.open(opts.sqlitePath, opts.embedder);
}
