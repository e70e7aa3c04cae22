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
};

export const intFromEnv = (def: number) => z.coerce.number().int().nonnegative().default(def);
