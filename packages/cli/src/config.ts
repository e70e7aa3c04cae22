import { z } from 'zod';
import { commonEnv, parseEnv } from '@memstream/kit';
import { DEFAULT_WORKER_NICE, DEFAULT_WORKER_SEMI_SPACE_MB, LAYOUTS } from './stack.js';

/** The launcher's environment: the README's configuration table, in code. */
export const Config = z.object({
  MEMSTREAM_PORT: z.coerce.number().int().min(0).max(65535).default(8787),
  MEMSTREAM_HOST: z.string().default('127.0.0.1'),
  /** The admin key; generated and kept under the data dir when unset. */
  MEMSTREAM_API_KEY: z.string().min(16, 'MEMSTREAM_API_KEY must be at least 16 characters').optional(),
  MEMSTREAM_DATA_DIR: z.string().default('.memstream'),
  /** An existing NATS to use; when unset, the launcher starts its own nats-server with its store under the data dir. */
  NATS_URL: z.string().optional(),
  MONGODB_URL: z.string().optional(),
  QDRANT_URL: z.string().optional(),
  QDRANT_API_KEY: z.string().optional(),
  /** Name prefix of the memory store's Qdrant collections (`replay memories` with QDRANT_URL). */
  QDRANT_MEMORY_COLLECTION: z.string().regex(/^[A-Za-z0-9_-]{1,100}$/).default('memstream_memories'),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  MEMSTREAM_ACK_WAIT_MS: z.coerce.number().int().min(1000).optional(),
  /** `up`: the nice value of the pipeline's workers (the gateway and nats-server keep the launcher's); 0 makes them equal. */
  MEMSTREAM_WORKER_NICE: z.coerce.number().int().min(0).max(19).default(DEFAULT_WORKER_NICE),
  /** `up`: the workers' V8 semi-space at most this many MB (stack.ts, DEFAULT_WORKER_SEMI_SPACE_MB); 0: V8's own. */
  MEMSTREAM_WORKER_SEMI_SPACE_MB: z.coerce.number().int().min(0).max(1024).default(DEFAULT_WORKER_SEMI_SPACE_MB),
  /**
   * `up`: how the workers are laid out in processes. `grouped` (two worker hosts: the stages
   * before the last, and the services that write the stores), `per-service` (one process each,
   * as in Kubernetes) or `one-process` (every worker in one); docs/pipeline.md, "Process layout".
   */
  MEMSTREAM_LAYOUT: z.enum(LAYOUTS).default('grouped'),
  MEMSTREAM_STREAM_REPLICAS: commonEnv.MEMSTREAM_STREAM_REPLICAS,
  /** `import` and `mcp`: the running memstream to talk to (default http://MEMSTREAM_HOST:MEMSTREAM_PORT). */
  MEMSTREAM_URL: z.url().optional(),
  /** Where the user ran ./memstream from: relative paths are theirs, not the repo's. */
  MEMSTREAM_INVOKE_CWD: z.string().optional(),
});
export type Config = z.infer<typeof Config>;
export const loadConfig = (): Config => parseEnv(Config);

/**
 * The embedding settings (EMBEDDER, EMBEDDING_*, ONNX_*), for `replay embed` and `replay index`:
 * loaded on demand, since the embedder package (and an ONNX runtime) is heavy for other commands.
 */
export async function loadEmbeddingEnv() {
  const embedding = await import('@memstream/embedder');
  return { env: parseEnv(z.object(embedding.embedderEnv)), embedding };
}
