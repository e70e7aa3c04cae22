import { HashedEmbedder } from './hashed.js';
import { OpenAiEmbedder, type OpenAiEmbedderOptions } from './openai.js';
import type { Embedder } from './port.js';

export type { Embedder } from './port.js';
export { HashedEmbedder } from './hashed.js';
export {
  EmbeddingDimensionError,
  OpenAiEmbedder,
  localRateLimiter,
  retryAfterMs,
  type OpenAiEmbedderOptions,
  type RateLimiter,
} from './openai.js';

/** How the embedder service picks its model; more kinds (local ONNX…) join this union. */
export type EmbedderConfig =
  | { kind: 'hashed'; dim?: number }
  /** Any OpenAI-compatible /v1/embeddings server (OpenAI, Ollama, vLLM, TEI). */
  | ({ kind: 'openai' } & OpenAiEmbedderOptions);

/** Builds the configured Embedder; the embedder service calls this once at start-up. */
export function createEmbedder(config: EmbedderConfig): Embedder {
  switch (config.kind) {
    case 'hashed':
      return config.dim === undefined ? new HashedEmbedder() : new HashedEmbedder({ dim: config.dim });
    case 'openai': {
      const { kind: _kind, ...options } = config;
      return new OpenAiEmbedder(options);
    }
    default: {
      // Exhaustiveness: a new kind added to EmbedderConfig without a case fails to compile here.
      const unknownKind: never = config;
      throw new Error(`createEmbedder: unknown embedder kind ${String((unknownKind as { kind: unknown }).kind)}`);
    }
  }
}

export { embedderEnv, embedderConfigFrom, checkEmbedderEnv } from './env.js';
