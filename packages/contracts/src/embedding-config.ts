import { z } from 'zod';

/** The NATS KV bucket and key that hold the active embedding model (`memstream replay embed`). */
export const CONFIG_BUCKET = 'memstream-config';
export const EMBEDDING_CONFIG_KEY = 'embedding';
/** The chunk index the services used before any model switch: index.sqlite, or the default Qdrant prefix. */
export const DEFAULT_INDEX = 'default';

/**
 * One embedding model and the chunk index that holds its vectors. `settings` are the embedding
 * settings that select it (EMBEDDER, EMBEDDING_MODEL, EMBEDDING_DIM, EMBEDDING_BASE_URL,
 * ONNX_MODEL_DIR...), laid over each process's own environment, which keeps the secrets
 * (EMBEDDING_API_KEY) and rate limits. Absent: the process's environment as it is, the state
 * before any switch.
 */
export const EmbeddingModelRef = z.object({
  model: z.string().min(1),
  dim: z.number().int().positive(),
  /** `default`, or a name made of [a-z0-9_-]: the SQLite file index.<name>.sqlite, the Qdrant prefix memstream_chunks_<name>. */
  index: z.string().regex(/^[a-z0-9_-]{1,80}$/),
  settings: z.record(z.string(), z.string()).optional(),
  /** The `--model` spec it was made from, for people reading the key. */
  spec: z.string().optional(),
});
export type EmbeddingModelRef = z.infer<typeof EmbeddingModelRef>;

/**
 * The value of `memstream-config`/`embedding`. Absent: every process uses its environment's
 * model and the default index. `migrating` is set while `replay embed` fills a shadow index;
 * `previous` is the model switched away from (its index is kept, and reused by a switch back).
 */
export const EmbeddingConfig = z.object({
  active: EmbeddingModelRef,
  migrating: EmbeddingModelRef.nullable(),
  previous: EmbeddingModelRef.nullable(),
  updatedAt: z.iso.datetime(),
});
export type EmbeddingConfig = z.infer<typeof EmbeddingConfig>;
