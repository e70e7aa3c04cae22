import type { ChunkIndex } from './port.js';
import { QdrantChunkIndex } from './qdrant.js';
import { SqliteChunkIndex } from './sqlite.js';

export * from './port.js';
export * from './sqlite.js';
export { annDir, removeAnnFiles } from './ann.js';
export * from './qdrant.js';
export * from './qdrant-translate.js';
export { RRF_K, DEFAULT_FUSION, denseScale, hybridDepth, normaliseKeywordScore, queryTerms, tokenize, type Fusion } from './shared.js';
export { STOPWORDS, analyseQuery, documentTerms, stem } from './analyse.js';

/**
 * Open the configured chunk index: Qdrant when `qdrantUrl` is set (the collection prefix comes
 * from `qdrantCollection`, default 'memstream_chunks'), otherwise the SQLite file at `sqlitePath`.
 */
export async function openChunkIndex(opts: {
  qdrantUrl?: string;
  qdrantApiKey?: string;
  qdrantCollection?: string;
  sqlitePath: string;
}): Promise<ChunkIndex> {
  if (opts.qdrantUrl) {
    return QdrantChunkIndex.connect(opts.qdrantUrl, { apiKey: opts.qdrantApiKey, collection: opts.qdrantCollection });
  }
  return SqliteChunkIndex.open(opts.sqlitePath);
}
export * from './named.js';
