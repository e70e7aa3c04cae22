import { z } from 'zod';
import { checkEmbedderEnv, embedderEnv } from '@memstream/embedder';
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
  /** Largest JSON body accepted. */
  MEMSTREAM_JSON_LIMIT: z.string().default('10mb'),
  /**
   * The query embedder: the same settings as the embedder service's, so query vectors come from
   * the model that embedded the documents (the index only compares vectors of one model).
   */
  ...embedderEnv,
}).superRefine(checkEmbedderEnv);
export type Config = z.infer<typeof Config>;
export const loadConfig = (): Config => parseEnv(Config);
