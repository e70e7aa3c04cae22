import { z } from 'zod';

/**
 * Parse the environment once with a zod schema, failing fast with every problem listed.
 * `config.ts` of each service is the only caller, and the only file that reads process.env.
 */
export function parseEnv<S extends z.ZodType>(schema: S, env: NodeJS.ProcessEnv = process.env): z.infer<S> {
  const result = schema.safeParse(env);
  if (!result.success) {
    const lines = result.error.issues.map((i) => `  ${i.path.join('.') || '(env)'}: ${i.message}`);
    throw new Error(`invalid configuration:\n${lines.join('\n')}`);
  }
  return result.data;
}

/** Shared variables every service reads. */
export const commonEnv = {
  /** Where the broker is. The launcher always sets it (it starts its own nats-server when the user did not). */
  NATS_URL: z.string().default('nats://127.0.0.1:4222'),
  /** Embedded stores and generated secrets live here. */
  MEMSTREAM_DATA_DIR: z.string().default('./.memstream'),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /**
   * Overrides every consumer's ack wait: how long a message held by a worker that died stays
   * invisible before the server redelivers it. Unset: each consumer's own default (30–60 s).
   */
  MEMSTREAM_ACK_WAIT_MS: z.coerce.number().int().min(1000).optional(),
  /**
   * JetStream replicas of every stream, KV bucket and the object store memstream creates: 1 on one
   * machine, 3 on a 3-node NATS cluster (then a node can fail without losing an acknowledged
   * write). Read where the storage is created (storageReplicas in @memstream/bus), so every
   * process applies the same value and none undoes another's.
   */
  MEMSTREAM_STREAM_REPLICAS: z.coerce.number().int().min(1).max(5).default(1),
};

/** MEMSTREAM_STREAM_REPLICAS, for code that creates storage without a parsed config at hand. */
export function storageReplicas(env: NodeJS.ProcessEnv = process.env): number {
  return commonEnv.MEMSTREAM_STREAM_REPLICAS.parse(env.MEMSTREAM_STREAM_REPLICAS === '' ? undefined : env.MEMSTREAM_STREAM_REPLICAS);
}

export const intFromEnv = (def: number) => z.coerce.number().int().nonnegative().default(def);
