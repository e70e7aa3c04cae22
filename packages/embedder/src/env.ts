import { z } from 'zod';
import type { EmbedderConfig } from './index.js';

/** `VAR=` in an env file means unset, not an empty key or URL. */
const unsetIfEmpty = <T extends z.ZodType>(schema: T) => z.preprocess((v) => (v === '' ? undefined : v), schema);

/**
 * The embedding settings, shared by every process that embeds: the embedder service (documents)
 * and the gateway (search queries) must build the same model, or search would compare vectors
 * of two models (the index refuses that, and finds nothing).
 */
export const embedderEnv = {
  /**
   * Which Embedder adapter: `hashed` is the offline lexical default; `openai` is any
   * OpenAI-compatible /v1/embeddings server (OpenAI, Ollama, vLLM, TEI).
   */
  EMBEDDER: z.enum(['hashed', 'openai']).default('hashed'),
  /**
   * The vector length. For `hashed` it chooses the size; for `openai` it must be the model's
   * (checked on every response), e.g. 1536 for text-embedding-3-small, 768 for nomic-embed-text.
   */
  EMBEDDING_DIM: z.coerce.number().int().min(16).max(4096).default(384),
  /** Texts per embed call, and for `openai` texts per HTTP request. */
  EMBED_BATCH: z.coerce.number().int().min(1).max(2048).default(64),
  /** `openai`: the API root up to and including /v1 (e.g. http://127.0.0.1:11434/v1 for Ollama). */
  EMBEDDING_BASE_URL: z.url().default('https://api.openai.com/v1'),
  /** `openai`: sent as "Authorization: Bearer …"; unset for local servers that need no key. */
  EMBEDDING_API_KEY: unsetIfEmpty(z.string().optional()),
  /** `openai`: the model name the server knows (required), e.g. text-embedding-3-small. */
  EMBEDDING_MODEL: unsetIfEmpty(z.string().min(1).optional()),
  /**
   * `openai`: requests per second this process sends at most (a local token bucket; N replicas
   * send up to N times this). Unset: no limit beyond honouring the server's 429s.
   */
  EMBEDDING_RPS: unsetIfEmpty(z.coerce.number().positive().optional()),
};

type EmbedderEnv = z.infer<z.ZodObject<typeof embedderEnv>>;

/** For a schema's superRefine: EMBEDDER=openai needs a model. */
export function checkEmbedderEnv(c: Pick<EmbedderEnv, 'EMBEDDER' | 'EMBEDDING_MODEL'>, ctx: z.RefinementCtx): void {
  if (c.EMBEDDER === 'openai' && c.EMBEDDING_MODEL === undefined) {
    ctx.addIssue({ code: 'custom', path: ['EMBEDDING_MODEL'], message: 'required when EMBEDDER=openai' });
  }
}

/** The adapter configuration those settings describe. */
export function embedderConfigFrom(c: EmbedderEnv): EmbedderConfig {
  if (c.EMBEDDER === 'openai') {
    if (!c.EMBEDDING_MODEL) throw new Error('EMBEDDING_MODEL is required when EMBEDDER=openai');
    return {
      kind: 'openai',
      baseUrl: c.EMBEDDING_BASE_URL,
      apiKey: c.EMBEDDING_API_KEY,
      model: c.EMBEDDING_MODEL,
      dim: c.EMBEDDING_DIM,
      batchSize: c.EMBED_BATCH,
      requestsPerSecond: c.EMBEDDING_RPS,
    };
  }
  return { kind: 'hashed', dim: c.EMBEDDING_DIM };
}
