import { z } from 'zod';
import { checkEmbedderEnv, embedderEnv } from '@memstream/embedder';
import { commonEnv, intFromEnv, parseEnv } from '@memstream/kit';
import { checkExtractorEnv, extractorEnv } from '@memstream/memory';

/**
 * The memorizer's whole environment, parsed once. It embeds memory statements with the same
 * settings as the embedder and the gateway (packages/embedder/src/env.ts), so memory search
 * compares vectors of one model.
 */
export const Config = z
  .object({
    ...commonEnv,
    /** Documents memorized at once; documents of one container tag are always taken one at a time. */
    MEMORIZER_CONCURRENCY: intFromEnv(4),
    /** When set, the memory store is in Qdrant (shared by every replica) instead of memories.sqlite, as the chunk index is. */
    QDRANT_URL: z.string().url().optional(),
    QDRANT_API_KEY: z.string().optional(),
    /** Name prefix of the memory store's Qdrant collections. */
    QDRANT_MEMORY_COLLECTION: z.string().regex(/^[A-Za-z0-9_-]{1,100}$/).default('memstream_memories'),
    ...embedderEnv,
    /** The extractor: offline rules (default) or an OpenAI-compatible chat model (packages/memory/src/extract/env.ts). */
    ...extractorEnv,
  })
  .superRefine((c, ctx) => {
    checkEmbedderEnv(c, ctx);
    checkExtractorEnv(c, ctx);
  });
export type Config = z.infer<typeof Config>;
export const loadConfig = (): Config => parseEnv(Config);
