import { z } from 'zod';
import { commonEnv, intFromEnv, parseEnv } from '@memstream/kit';

/** The indexer's whole environment, parsed once. */
export const Config = z.object({
  ...commonEnv,
  /** Documents one process holds: twice a batch, so the next batch gathers while one is written (serial batches). */
  INDEXER_CONCURRENCY: intFromEnv(128),
  /** When set, the Qdrant adapter is used instead of the embedded SQLite index. */
  QDRANT_URL: z.string().url().optional(),
  QDRANT_API_KEY: z.string().optional(),
});
export type Config = z.infer<typeof Config>;
export const loadConfig = (): Config => parseEnv(Config);
