import { z } from 'zod';
import { commonEnv, intFromEnv, parseEnv } from '@memstream/kit';

/** The projection's whole environment, parsed once. */
export const Config = z.object({
  ...commonEnv,
  /** When set, the MongoDB adapter holds the view instead of the embedded SQLite file. */
  MONGODB_URL: z.string().optional(),
  MONGODB_DB: z.string().default('memstream'),
  /** Events one process applies at once. */
  PROJECTION_CONCURRENCY: intFromEnv(16),
});
export type Config = z.infer<typeof Config>;
export const loadConfig = (): Config => parseEnv(Config);
