import { z } from 'zod';
import { commonEnv, intFromEnv, parseEnv } from '@memstream/kit';

/** The embedder's whole environment, parsed once. */
export const Config = z.object({
  ...commonEnv,
  EMBEDDER_CONCURRENCY: intFromEnv(2),
  /** Which Embedder adapter: `hashed` is the offline lexical default. */
  EMBEDDER: z.enum(['hashed']).default('hashed'),
  EMBEDDING_DIM: z.coerce.number().int().min(16).max(4096).default(384),
  /** Texts per embed call. */
  EMBED_BATCH: z.coerce.number().int().min(1).max(2048).default(64),
});
export type Config = z.infer<typeof Config>;
export const loadConfig = (): Config => parseEnv(Config);
