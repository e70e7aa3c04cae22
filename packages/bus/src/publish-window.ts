import { z } from 'zod';

/**
 * MEMSTREAM_PUBLISH_WINDOW: the most events one consumer of a worker has sent and not yet seen
 * answered (RunnerOptions.publishWindow); the rest wait their turn, in the order they were made.
 * Unset (the default): no window, every event of a batch is sent at once. Read where a worker
 * starts (startWorker), so every worker and host applies it without wiring.
 *
 * What it trades: a batch of 64 whose handlers each emit an event sends 64 publishes in one
 * socket write, and nats-server (one Go processor on two cores, see the launcher) stores and
 * answers them in a run before it reads the gateway's connection again. An add waits for its own
 * publish to be answered, so such runs are the add's tail under a backlog: in `bench load --rate
 * 1000 --generator wrk` with the gateway's publish timed (2 cores, 2026-12-07) that publish was at
 * p50 0.6 ms and p99 21–31 ms while the gateway's event loop waited at most 4.5 ms at p99, the same
 * with the stores on tmpfs. A window cuts the runs short and the adds' p99 with them, but every
 * batch then waits for more round trips, which are slow exactly when the CPU is short, and the
 * pipeline finishes fewer documents: measured, the adds' p99 fell by about 2 ms at 32 and 5 ms at
 * 16, the superrag pipeline kept its rate at 32 and lost 7–10 % at 16, and memory documents (the
 * memorizer working beside them) reached done a quarter slower at 32, memorized as fast. Hence
 * off by default, for a deployment that prefers its adds' latency to its backlog's speed. One window per consumer, not per process:
 * shared, a busy consumer's run delayed another's lone publishes. The runs: docs/pipeline.md, Load.
 */
const PublishEnv = z.object({ MEMSTREAM_PUBLISH_WINDOW: z.coerce.number().int().min(1).max(100_000).optional() });

export function publishWindowFromEnv(env: NodeJS.ProcessEnv = process.env): number | undefined {
  const r = PublishEnv.safeParse({ MEMSTREAM_PUBLISH_WINDOW: env.MEMSTREAM_PUBLISH_WINDOW === '' ? undefined : env.MEMSTREAM_PUBLISH_WINDOW });
  if (!r.success) throw new Error(`invalid configuration:\n${r.error.issues.map((i) => `  ${i.path.join('.')}: ${i.message}`).join('\n')}`);
  return r.data.MEMSTREAM_PUBLISH_WINDOW;
}
