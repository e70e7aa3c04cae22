import { z } from 'zod';
import type { EmbedderConfig } from './index.js';
import { onnxModelDirProblems } from './onnx.js';
import { rateLimitKey } from './rate-limit.js';

/** `VAR=` in an env file means unset, not an empty key or URL. */
const unsetIfEmpty = <T extends z.ZodType>(schema: T) => z.preprocess((v) => (v === '' ? undefined : v), schema);

/**
 * The embedding settings, shared by every process that embeds: the embedder service (documents)
 * and the gateway (search queries) must build the same model, or search would compare vectors
 * of two models (the index refuses that, and finds nothing).
 */
export const embedderEnv = {
  /**
   * Which Embedder adapter: `static` (the default) is the offline GloVe word-vector model built at
   * install time (docs/search.md; chosen by measurement: it beats BM25 on both the manual pages
   * and the conversations, the hashed model only on the pages); `hashed` the offline lexical
   * feature-hashing model; `openai` is any OpenAI-compatible /v1/embeddings server (OpenAI,
   * Ollama, vLLM, TEI); `onnx` runs a local sentence-embedding model folder (ONNX_MODEL_DIR)
   * in-process, offline.
   */
  EMBEDDER: z.enum(['hashed', 'static', 'openai', 'onnx']).default('static'),
  /**
   * The vector length. For `hashed` it chooses the size (default 384); for `openai` it must be
   * the model's (checked on every response; default 384), e.g. 1536 for text-embedding-3-small,
   * 768 for nomic-embed-text; for `onnx` it is read from the model, and checked when set.
   */
  EMBEDDING_DIM: unsetIfEmpty(z.coerce.number().int().min(16).max(4096).optional()),
  /** Texts per embed call, and for `openai` texts per HTTP request. */
  EMBED_BATCH: z.coerce.number().int().min(1).max(2048).default(64),
  /** `openai`: the API root up to and including /v1 (e.g. http://127.0.0.1:11434/v1 for Ollama). */
  EMBEDDING_BASE_URL: z.url().default('https://api.openai.com/v1'),
  /** `openai`: sent as "Authorization: Bearer …"; unset for local servers that need no key. */
  EMBEDDING_API_KEY: unsetIfEmpty(z.string().optional()),
  /** `openai`: the model name the server knows (required), e.g. text-embedding-3-small. */
  EMBEDDING_MODEL: unsetIfEmpty(z.string().min(1).optional()),
  /**
   * `openai`: requests per second sent at most. Unset: no limit beyond honouring the server's
   * 429s. With EMBEDDING_RATE_SCOPE=shared (default) it is one budget for every embedder replica
   * and gateway using the same endpoint and model (a token bucket in NATS KV); with `process`,
   * each process has its own (N replicas send up to N times this).
   */
  EMBEDDING_RPS: unsetIfEmpty(z.coerce.number().positive().optional()),
  /** `openai`: requests that may be sent at once after an idle spell (the token bucket's size). */
  EMBEDDING_BURST: z.coerce.number().int().min(1).max(10_000).default(1),
  /** `openai`: whether EMBEDDING_RPS is shared through NATS KV (`shared`) or per process (`process`). */
  EMBEDDING_RATE_SCOPE: z.enum(['shared', 'process']).default('shared'),
  /**
   * `onnx`: the model folder (config.json, tokenizer.json, tokenizer_config.json, onnx/model.onnx
   * or model.onnx). Nothing is ever downloaded: a missing file stops the service at start.
   */
  ONNX_MODEL_DIR: unsetIfEmpty(z.string().min(1).optional()),
  /** `onnx`: token pooling; default what the folder's 1_Pooling/config.json says, else `mean`. */
  ONNX_POOLING: unsetIfEmpty(z.enum(['mean', 'cls']).optional()),
};

type EmbedderEnv = z.infer<z.ZodObject<typeof embedderEnv>>;

/**
 * For a schema's superRefine: EMBEDDER=openai needs a model; EMBEDDER=onnx needs a model folder
 * that holds every file (checked on disk, so a wrong path stops the service before it consumes).
 */
export function checkEmbedderEnv(c: Pick<EmbedderEnv, 'EMBEDDER' | 'EMBEDDING_MODEL' | 'ONNX_MODEL_DIR'>, ctx: z.RefinementCtx): void {
  if (c.EMBEDDER === 'openai' && c.EMBEDDING_MODEL === undefined) {
    ctx.addIssue({ code: 'custom', path: ['EMBEDDING_MODEL'], message: 'required when EMBEDDER=openai' });
  }
  if (c.EMBEDDER === 'onnx') {
    if (c.ONNX_MODEL_DIR === undefined) {
      ctx.addIssue({ code: 'custom', path: ['ONNX_MODEL_DIR'], message: 'required when EMBEDDER=onnx (a local model folder; nothing is downloaded)' });
    } else {
      for (const problem of onnxModelDirProblems(c.ONNX_MODEL_DIR)) ctx.addIssue({ code: 'custom', path: ['ONNX_MODEL_DIR'], message: problem });
    }
  }
}

/** The default vector length of `hashed` and `openai` when EMBEDDING_DIM is unset. */
const DEFAULT_DIM = 384;

/** The adapter configuration those settings describe. */
export function embedderConfigFrom(c: EmbedderEnv): EmbedderConfig {
  if (c.EMBEDDER === 'openai') {
    if (!c.EMBEDDING_MODEL) throw new Error('EMBEDDING_MODEL is required when EMBEDDER=openai');
    return {
      kind: 'openai',
      baseUrl: c.EMBEDDING_BASE_URL,
      apiKey: c.EMBEDDING_API_KEY,
      model: c.EMBEDDING_MODEL,
      dim: c.EMBEDDING_DIM ?? DEFAULT_DIM,
      batchSize: c.EMBED_BATCH,
      requestsPerSecond: c.EMBEDDING_RPS,
      burst: c.EMBEDDING_BURST,
    };
  }
  if (c.EMBEDDER === 'static') return { kind: 'static' };
  if (c.EMBEDDER === 'onnx') {
    if (!c.ONNX_MODEL_DIR) throw new Error('ONNX_MODEL_DIR is required when EMBEDDER=onnx');
    return { kind: 'onnx', modelDir: c.ONNX_MODEL_DIR, dim: c.EMBEDDING_DIM, batchSize: c.EMBED_BATCH, pooling: c.ONNX_POOLING };
  }
  return { kind: 'hashed', dim: c.EMBEDDING_DIM ?? DEFAULT_DIM };
}

/**
 * The shared rate limit those settings ask for, if any: the KV key of this endpoint and model,
 * the rate and the burst. A process with a NATS connection builds it with kvRateLimiter
 * (@memstream/bus) and passes it to loadEmbedder; undefined means no shared limit.
 */
export function sharedRateLimitFrom(c: EmbedderEnv): { key: string; rps: number; burst: number } | undefined {
  if (c.EMBEDDER !== 'openai' || c.EMBEDDING_RPS === undefined || c.EMBEDDING_RATE_SCOPE !== 'shared' || !c.EMBEDDING_MODEL) return undefined;
  return { key: rateLimitKey(c.EMBEDDING_BASE_URL, c.EMBEDDING_MODEL), rps: c.EMBEDDING_RPS, burst: c.EMBEDDING_BURST };
}
