import { z } from 'zod';
import { commonEnv, intFromEnv, parseEnv } from '@memstream/kit';

/** The chunker's whole environment, parsed once. */
export const Config = z.object({
  ...commonEnv,
  CHUNKER_CONCURRENCY: intFromEnv(64),
  /** Target chunk size in tokens (o200k_base). */
  CHUNK_MAX_TOKENS: z.coerce.number().int().min(32).max(8192).default(512),
  /** Texts longer than this (UTF-16 units) are chunked on a worker thread, so they cannot stall the others. */
  CHUNK_THREAD_ABOVE_CHARS: z.coerce.number().int().min(0).default(256 * 1024),
});
export type Config = z.infer<typeof Config>;
export const loadConfig = (): Config => parseEnv(Config);
