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
    /**
     * Documents held at once. Documents of one container tag are always resolved one pass at a
     * time; a `dreaming: "dynamic"` document waiting for its group holds its place, so this also
     * bounds how many can wait (when all do, the oldest group goes at once).
     */
    MEMORIZER_CONCURRENCY: intFromEnv(16),
    /** `dreaming: "dynamic"`: how long a tag's first document waits for more of the tag's (0: never wait, as `instant`). */
    MEMORIZER_DREAM_WINDOW_MS: z.coerce.number().int().min(0).max(60_000).default(1_500),
    /** `dreaming: "dynamic"`: a tag's group of this many documents is memorized at once. */
    MEMORIZER_DREAM_MAX_DOCS: z.coerce.number().int().min(1).max(100).default(8),
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
