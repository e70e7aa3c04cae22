import { z } from 'zod';
import { commonEnv, intFromEnv, parseEnv } from '@memstream/kit';

const flag = z
  .enum(['true', 'false', '1', '0', ''])
  .default('false')
  .transform((v) => v === 'true' || v === '1');

/** The notifier's whole environment, parsed once. */
export const Config = z.object({
  ...commonEnv,
  /** Document events turned into transitions at once. */
  NOTIFIER_CONCURRENCY: intFromEnv(32),
  /** Webhook POSTs in flight at once (per process). */
  MEMSTREAM_WEBHOOK_CONCURRENCY: z.coerce.number().int().min(1).max(1000).default(16),
  /** Of those, POSTs to one receiver host (host:port) at once (per process); the others wait their turn, queued, not dropped. */
  MEMSTREAM_WEBHOOK_HOST_CONCURRENCY: z.coerce.number().int().min(1).max(1000).default(4),
  /** One POST: connecting, sending and the response headers. */
  MEMSTREAM_WEBHOOK_TIMEOUT_MS: z.coerce.number().int().min(100).max(120_000).default(10_000),
  /** Attempts per delivery, the first included; after the last failure it is recorded as failed and dead-lettered. */
  MEMSTREAM_WEBHOOK_MAX_ATTEMPTS: z.coerce.number().int().min(1).max(1000).default(12),
  /** Delay before the second attempt; each later one doubles it (±20% jitter), up to MEMSTREAM_WEBHOOK_RETRY_MAX_MS. */
  MEMSTREAM_WEBHOOK_RETRY_BASE_MS: z.coerce.number().int().min(10).default(10_000),
  MEMSTREAM_WEBHOOK_RETRY_MAX_MS: z.coerce.number().int().min(10).default(3_600_000),
  /**
   * Allow receivers on loopback, private, link-local (cloud metadata) and other non-public
   * addresses. Off by default: whoever can register a webhook could otherwise make memstream
   * POST into its own network.
   */
  MEMSTREAM_WEBHOOK_ALLOW_PRIVATE: flag,
});
export type Config = z.infer<typeof Config>;
export const loadConfig = (): Config => parseEnv(Config);
