import { z } from 'zod';
import { rateLimitKey, type RateLimiter } from '@memstream/embedder';
import { ChatCompletionsExtractor } from './chat.js';
import { OfflineExtractor } from './offline.js';
import type { MemoryExtractor } from './port.js';

/** `VAR=` in an env file means unset, not an empty key or URL. */
const unsetIfEmpty = <T extends z.ZodType>(schema: T) => z.preprocess((v) => (v === '' ? undefined : v), schema);

/** The memorizer's extraction settings (docs/memory.md "Extractors"). */
export const extractorEnv = {
  /** `offline` (default): the rules, no model. `openai`: any OpenAI-compatible /v1/chat/completions server. */
  MEMORY_EXTRACTOR: z.enum(['offline', 'openai']).default('offline'),
  /** `openai`: the API root up to and including /v1 (http://127.0.0.1:11434/v1 for Ollama, …:8000/v1 for vLLM). */
  MEMORY_LLM_BASE_URL: z.url().default('https://api.openai.com/v1'),
  /** `openai`: sent as "Authorization: Bearer …"; unset for local servers that need no key. */
  MEMORY_LLM_API_KEY: unsetIfEmpty(z.string().optional()),
  /** `openai`: the chat model (required), e.g. gpt-4o-mini, llama3.1:8b. */
  MEMORY_LLM_MODEL: unsetIfEmpty(z.string().min(1).optional()),
  /** `openai`: one request's deadline, answer included. */
  MEMORY_LLM_TIMEOUT_MS: z.coerce.number().int().min(100).default(60_000),
  /** `openai`: retries of one request on 408, 429, 5xx, timeouts and network errors. */
  MEMORY_LLM_MAX_RETRIES: z.coerce.number().int().min(0).max(20).default(3),
  /**
   * `openai`: requests per second at most. With MEMORY_LLM_RATE_SCOPE=shared (default) one budget
   * for every memorizer replica using the same endpoint and model (a token bucket in NATS KV, as
   * for EMBEDDING_RPS); with `process`, each replica has its own. Unset: only 429s slow it down.
   */
  MEMORY_LLM_RPS: unsetIfEmpty(z.coerce.number().positive().optional()),
  MEMORY_LLM_BURST: z.coerce.number().int().min(1).max(10_000).default(1),
  MEMORY_LLM_RATE_SCOPE: z.enum(['shared', 'process']).default('shared'),
};

type ExtractorEnv = z.infer<z.ZodObject<typeof extractorEnv>>;

/** For a schema's superRefine: MEMORY_EXTRACTOR=openai needs a model. */
export function checkExtractorEnv(c: Pick<ExtractorEnv, 'MEMORY_EXTRACTOR' | 'MEMORY_LLM_MODEL'>, ctx: z.RefinementCtx): void {
  if (c.MEMORY_EXTRACTOR === 'openai' && c.MEMORY_LLM_MODEL === undefined) {
    ctx.addIssue({ code: 'custom', path: ['MEMORY_LLM_MODEL'], message: 'required when MEMORY_EXTRACTOR=openai' });
  }
}

/** The shared rate limit those settings ask for (built with kvRateLimiter by the service), if any. */
export function extractorRateLimitFrom(c: ExtractorEnv): { key: string; rps: number; burst: number } | undefined {
  if (c.MEMORY_EXTRACTOR !== 'openai' || c.MEMORY_LLM_RPS === undefined || c.MEMORY_LLM_RATE_SCOPE !== 'shared' || !c.MEMORY_LLM_MODEL) return undefined;
  return { key: rateLimitKey(c.MEMORY_LLM_BASE_URL, c.MEMORY_LLM_MODEL), rps: c.MEMORY_LLM_RPS, burst: c.MEMORY_LLM_BURST };
}

/** The configured extractor; `rateLimiter` (the shared one) replaces the local bucket. */
export function extractorFrom(c: ExtractorEnv, rateLimiter?: RateLimiter): MemoryExtractor {
  if (c.MEMORY_EXTRACTOR === 'offline') return new OfflineExtractor();
  return new ChatCompletionsExtractor({
    baseUrl: c.MEMORY_LLM_BASE_URL,
    apiKey: c.MEMORY_LLM_API_KEY,
    model: c.MEMORY_LLM_MODEL!,
    timeoutMs: c.MEMORY_LLM_TIMEOUT_MS,
    maxRetries: c.MEMORY_LLM_MAX_RETRIES,
    rateLimiter,
    requestsPerSecond: c.MEMORY_LLM_RPS,
    burst: c.MEMORY_LLM_BURST,
  });
}
