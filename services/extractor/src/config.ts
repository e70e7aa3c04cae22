import { z } from 'zod';
import { commonEnv, intFromEnv, parseEnv } from '@memstream/kit';

/** The extractor's whole environment, parsed once. */
export const Config = z.object({
  ...commonEnv,
  /** Documents one process extracts at once. */
  EXTRACTOR_CONCURRENCY: intFromEnv(4),
});
export type Config = z.infer<typeof Config>;

export const loadConfig = (): Config => parseEnv(Config);
