import { z } from 'zod';
import { commonEnv, intFromEnv, parseEnv } from '@memstream/kit';

/** The projection's whole environment, parsed once. */
export const Config = z.object({
  ...commonEnv,
  /** When set, the MongoDB adapter holds the view instead of the embedded SQLite file. */
  MONGODB_URL: z.string().optional(),
  MONGODB_DB: z.string().default('memstream'),
  /** A document whose status has not moved for this long is re-driven (then failed after STALL_MAX_REDRIVES). */
  STALL_LEASE_MS: z.coerce.number().int().min(100).default(10 * 60_000),
  STALL_MAX_REDRIVES: z.coerce.number().int().min(0).default(3),
  /** How often the projection looks for stalled documents. */
  STALL_SCAN_MS: z.coerce.number().int().min(50).default(30_000),
  /** Events one process holds at once (waiting for a batch or in one; batches of up to 128). */
  PROJECTION_CONCURRENCY: intFromEnv(256),
});
export type Config = z.infer<typeof Config>;
export const loadConfig = (): Config => parseEnv(Config);
