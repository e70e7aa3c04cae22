import { z } from 'zod';
import { checkEmbedderEnv, embedderEnv } from '@memstream/embedder';
import { commonEnv, intFromEnv, parseEnv } from '@memstream/kit';

/** The embedder's whole environment, parsed once. The embedding settings are shared with the gateway (packages/embedder/src/env.ts). */
export const Config = z
  .object({
    ...commonEnv,
    EMBEDDER_CONCURRENCY: intFromEnv(64),
    ...embedderEnv,
  })
  .superRefine(checkEmbedderEnv);
export type Config = z.infer<typeof Config>;
export const loadConfig = (): Config => parseEnv(Config);
