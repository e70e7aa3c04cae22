import { existsSync } from 'node:fs';
import path from 'node:path';
import { embeddingConfigStore, type Bus } from '@memstream/bus';
import { SqliteChunkIndex } from '@memstream/chunk-index';
import type { EmbeddingModelRef } from '@memstream/contracts';
import { SqliteDocumentViews } from '@memstream/views';

/** What the hashed model calls itself in the index (packages/embedder/src/hashed.ts). */
const HASHED = /^hashed-ngram-v1-(\d+)$/;

/**
 * The model a store's documents were embedded with, read from the embedded stores of a data dir:
 * the chunks of its first few done documents. Null when there is nothing to read.
 */
export async function indexedModel(dir: string): Promise<{ model: string; dim: number } | null> {
  const viewsFile = path.join(dir, 'views.sqlite');
  const indexFile = path.join(dir, 'index.sqlite');
  if (!existsSync(viewsFile) || !existsSync(indexFile)) return null;
  const views = SqliteDocumentViews.open(viewsFile);
  const index = SqliteChunkIndex.open(indexFile);
  try {
    const { items } = await views.list({ statuses: ['done'], sort: 'createdAt', order: 'asc', limit: 5, offset: 0 });
    for (const v of items) {
      const chunk = (await index.getDocumentChunks(v.id))[0];
      if (chunk) return { model: chunk.model, dim: chunk.dim };
    }
    return null;
  } finally {
    await views.close();
    await index.close();
  }
}

/**
 * The active model to record for a store made under the hashed default (before 2026-11-23) and
 * started again without EMBEDDER: the hashed model its documents hold, or null when nothing needs
 * recording — EMBEDDER is set (an explicit choice), a model was recorded already (a `replay
 * embed` switch, or an earlier start), the store is empty, or it holds another model.
 */
export function earlierDefault(opts: { embedderSet: boolean; recorded: boolean; indexed: { model: string; dim: number } | null }): EmbeddingModelRef | null {
  if (opts.embedderSet || opts.recorded || !opts.indexed) return null;
  const m = HASHED.exec(opts.indexed.model);
  if (!m) return null;
  const spec = `hashed:${m[1]}`;
  return { model: opts.indexed.model, dim: opts.indexed.dim, index: 'default', settings: { EMBEDDER: 'hashed', EMBEDDING_DIM: m[1]! }, spec };
}

/**
 * The default embedding model changed from the hashed model to the static one. A store made
 * under the old default and started again without EMBEDDER would embed new documents and
 * queries with static vectors while its documents keep hashed ones, and dense search would miss
 * them. So `up` records the hashed model as the active one in NATS KV (`memstream-config`/
 * `embedding`, what `replay embed` writes): every service keeps using it until the operator
 * switches with `./memstream replay embed --model static`. Returns what it recorded.
 */
export async function keepEarlierDefaultModel(bus: Bus, dir: string, env: NodeJS.ProcessEnv): Promise<EmbeddingModelRef | null> {
  const embedderSet = Boolean(env.EMBEDDER);
  if (embedderSet) return null;
  const store = await embeddingConfigStore(bus);
  const { config, revision } = await store.read();
  const active = earlierDefault({ embedderSet, recorded: config !== null, indexed: config ? null : await indexedModel(dir) });
  if (!active) return null;
  await store.write({ active, migrating: null, previous: null, updatedAt: new Date().toISOString() }, revision);
  return active;
}
