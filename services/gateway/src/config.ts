import { z } from 'zod';
import { checkEmbedderEnv, embedderEnv, rerankerEnv } from '@memstream/embedder';
import { commonEnv, parseEnv } from '@memstream/kit';

/** The gateway's whole environment, parsed once. */
export const Config = z.object({
  ...commonEnv,
  MEMSTREAM_PORT: z.coerce.number().int().min(0).max(65535).default(8787),
  /** 127.0.0.1 on one machine; 0.0.0.0 in a container. */
  MEMSTREAM_HOST: z.string().default('127.0.0.1'),
  /** The admin bearer key. The launcher generates one under the data dir when the user sets none. */
  MEMSTREAM_API_KEY: z.string().min(16, 'MEMSTREAM_API_KEY must be at least 16 characters'),
  MONGODB_URL: z.string().optional(),
  QDRANT_URL: z.string().url().optional(),
  QDRANT_API_KEY: z.string().optional(),
  /** Name prefix of the memory store's Qdrant collections (with QDRANT_URL; the memorizer reads the same variable). */
  QDRANT_MEMORY_COLLECTION: z.string().regex(/^[A-Za-z0-9_-]{1,100}$/).default('memstream_memories'),
  /** Largest JSON body accepted. */
  MEMSTREAM_JSON_LIMIT: z.string().default('10mb'),
  /**
   * How long a client may take to send a whole request (headers and body; Node's default is 300 s)
   * and its headers alone (Node: 60 s): a slow or stalled client holds a socket no longer than this.
   * The request timeout must leave room for the largest upload (50 MB) on the slowest link served.
   */
  MEMSTREAM_REQUEST_TIMEOUT_MS: z.coerce.number().int().min(1000).default(60_000),
  MEMSTREAM_HEADERS_TIMEOUT_MS: z.coerce.number().int().min(1000).default(10_000),
  /** Largest JSON answer; past it a request gets a 400 telling it to ask for less (docs/limits.md). */
  MEMSTREAM_MAX_ANSWER_BYTES: z.coerce.number().int().min(1024).default(32 * 1024 * 1024),
  /**
   * Fairness (docs/pipeline.md): a submission whose tag already has more than this many documents
   * not yet done goes in the bulk lane. Every tag's count is read from the view in one pass, at
   * most once per MEMSTREAM_BULK_LANE_CACHE_MS.
   */
  MEMSTREAM_BULK_LANE_THRESHOLD: z.coerce.number().int().min(0).default(64),
  MEMSTREAM_BULK_LANE_CACHE_MS: z.coerce.number().int().min(0).max(60_000).default(1000),
  /**
   * A crowded normal lane: while more than MEMSTREAM_BULK_LANE_CROWDED_AT documents wait in it
   * (not yet delivered to the entrance's normal durable, or waiting or in work after it, read in
   * the same window as the counts), a tag with more than MEMSTREAM_BULK_LANE_CROWDED_THRESHOLD
   * not yet done goes in the bulk lane: many mid-sized tenants at once do not hold up a small one.
   */
  MEMSTREAM_BULK_LANE_CROWDED_AT: z.coerce.number().int().min(0).default(256),
  MEMSTREAM_BULK_LANE_CROWDED_THRESHOLD: z.coerce.number().int().min(0).default(1),
  /**
   * Every add reads its tags' entityContext and its scope's settings (NATS KV). They are cached:
   * a change made through this gateway process is seen at once, one made through another as soon
   * as the bucket's watch reports it (milliseconds), and no value is used older than this.
   */
  MEMSTREAM_KV_CACHE_MS: z.coerce.number().int().min(0).max(60_000).default(1000),
  /** Accept webhook receivers on loopback and private addresses (the notifier reads the same variable). */
  MEMSTREAM_WEBHOOK_ALLOW_PRIVATE: z.enum(['true', 'false', '1', '0', '']).default('false').transform((v) => v === 'true' || v === '1'),
  /**
   * The HMAC key scoped API keys are hashed with. Unset: derived from MEMSTREAM_API_KEY, so
   * rotating the admin key then invalidates every scoped key.
   */
  MEMSTREAM_KEY_SECRET: z.string().min(32, 'MEMSTREAM_KEY_SECRET must be at least 32 characters').optional(),
  /** A key.expiring notice goes out this many days before a scoped key expires (0: never). */
  MEMSTREAM_KEY_EXPIRY_WARN_DAYS: z.coerce.number().int().min(0).max(365).default(7),
  /** How often the gateway looks for expiring keys (each key gets at most one notice a day). */
  MEMSTREAM_KEY_EXPIRY_CHECK_MS: z.coerce.number().int().min(1000).default(60 * 60 * 1000),
  /** A scoped key created without rateLimitMax / rateLimitTimeWindow gets these (Supermemory's defaults). */
  MEMSTREAM_KEY_RATE_LIMIT_MAX: z.coerce.number().int().min(1).max(10_000).default(500),
  MEMSTREAM_KEY_RATE_LIMIT_WINDOW_MS: z.coerce.number().int().min(1).max(3_600_000).default(60_000),
  /** Requests per MEMSTREAM_ADMIN_RATE_LIMIT_WINDOW_MS for the admin key; unset: unlimited. */
  MEMSTREAM_ADMIN_RATE_LIMIT: z.coerce.number().int().min(1).optional(),
  MEMSTREAM_ADMIN_RATE_LIMIT_WINDOW_MS: z.coerce.number().int().min(1).max(3_600_000).default(60_000),
  /**
   * The query embedder: the same settings as the embedder service's, so query vectors come from
   * the model that embedded the documents (the index only compares vectors of one model).
   */
  ...embedderEnv,
  /** `rerank: true` on a search: a reranking server (TEI or Cohere-style); unset, a no-op. */
  ...rerankerEnv,
}).superRefine(checkEmbedderEnv);
export type Config = z.infer<typeof Config>;
export const loadConfig = (): Config => parseEnv(Config);
