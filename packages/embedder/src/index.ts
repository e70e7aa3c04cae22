import { HashedEmbedder } from './hashed.js';
import { OnnxEmbedder, type OnnxEmbedderOptions } from './onnx.js';
import { OpenAiEmbedder, type OpenAiEmbedderOptions } from './openai.js';
import type { Embedder } from './port.js';
import type { RateLimiter } from './rate-limit.js';
import { StaticEmbedder, installedSourceVersion, staticModelPath } from './static-model.js';

export type { Embedder } from './port.js';
export { HashedEmbedder } from './hashed.js';
export { EmbeddingDimensionError, OpenAiEmbedder, type OpenAiEmbedderOptions } from './openai.js';
export { postToProvider, providerEndpoint, retryAfterMs, type ProviderCallLabel, type ProviderCallPolicy } from './http.js';
export { OnnxEmbedder, onnxModelDirProblems, type OnnxEmbedderOptions, type OnnxPooling } from './onnx.js';
export { localRateLimiter, rateLimitKey, type RateLimiter } from './rate-limit.js';
export { StaticEmbedder, installedSourceVersion, staticModelPath } from './static-model.js';

/** How a process picks its model. */
export type EmbedderConfig =
  | { kind: 'hashed'; dim?: number }
  /** The static GloVe word-vector model built at install time (or a model file given here). */
  | { kind: 'static'; file?: string }
  /** Any OpenAI-compatible /v1/embeddings server (OpenAI, Ollama, vLLM, TEI). */
  | ({ kind: 'openai' } & OpenAiEmbedderOptions)
  /** A local ONNX sentence-embedding model folder, run in-process, offline. */
  | ({ kind: 'onnx' } & OnnxEmbedderOptions);

/**
 * Builds a configured Embedder synchronously: `hashed`, `static` and `openai`. An ONNX model must be
 * loaded first (its dimension is read from it), so `onnx` needs loadEmbedder.
 */
export function createEmbedder(config: EmbedderConfig): Embedder {
  switch (config.kind) {
    case 'hashed':
      return config.dim === undefined ? new HashedEmbedder() : new HashedEmbedder({ dim: config.dim });
    case 'static':
      return StaticEmbedder.load(config.file ?? staticModelPath(installedSourceVersion()));
    case 'openai': {
      const { kind: _kind, ...options } = config;
      return new OpenAiEmbedder(options);
    }
    case 'onnx':
      throw new Error('createEmbedder: an ONNX model is loaded asynchronously (its dimension comes from the model): use loadEmbedder');
    default: {
      // Exhaustiveness: a new kind added to EmbedderConfig without a case fails to compile here.
      const unknownKind: never = config;
      throw new Error(`createEmbedder: unknown embedder kind ${String((unknownKind as { kind: unknown }).kind)}`);
    }
  }
}

/**
 * Builds the configured Embedder, whatever its kind; what services call once at start-up. A
 * `rateLimiter` (e.g. the shared KV one) replaces the `openai` adapter's local bucket and is
 * ignored by the local kinds, which send no requests.
 */
export async function loadEmbedder(config: EmbedderConfig, extras: { rateLimiter?: RateLimiter | undefined } = {}): Promise<Embedder> {
  if (config.kind === 'onnx') {
    const { kind: _kind, ...options } = config;
    return OnnxEmbedder.load(options);
  }
  if (config.kind === 'openai' && extras.rateLimiter !== undefined) return createEmbedder({ ...config, rateLimiter: extras.rateLimiter });
  return createEmbedder(config);
}

export { embedderEnv, embedderConfigFrom, checkEmbedderEnv, sharedRateLimitFrom } from './env.js';
export { modelCache, modelSpecSettings, withModelSettings } from './model-spec.js';
export { HttpReranker, rerankerEnv, rerankerFrom, type RerankApi, type Reranker } from './rerank.js';
