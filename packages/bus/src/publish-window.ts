import type { JetStreamClient } from '@nats-io/jetstream';
import { limiter } from '@memstream/kit';
import { z } from 'zod';

/**
 * A worker process's JetStream publishes, at most `window` of them unanswered at once; the rest
 * wait their turn in the order they were made (so one document's events still leave in order).
 * Everything else of the client is the client's own.
 *
 * Why: a batch of 64 messages whose handlers each emit an event sent 64 publishes in one socket
 * write, and nats-server (one Go processor on two cores, see the launcher) stores and answers
 * them in a run before it reads the gateway's connection again. An add waits for its own publish
 * to be answered, so a few such runs from the worker hosts at once were the add's tail:
 * `bench load --rate 1000 --generator wrk` with the gateway's publish timed (2 cores, 2026-12-07)
 * had that publish at p50 0.6 ms and p99 21–31 ms while the adds' own event loop waited at most
 * 4.5 ms at p99. A window keeps the pipeline's publishes pipelined (each still awaited with the
 * others of its batch) in runs short enough for the gateway's to pass between them. The figures
 * behind the default are in docs/pipeline.md ("A window on the workers' publishes").
 */
export function windowedPublishes(js: JetStreamClient, window: number): JetStreamClient {
  const limit = limiter(Math.max(1, Math.floor(window)));
  const publish: JetStreamClient['publish'] = (subject, payload, options) => limit(() => js.publish(subject, payload, options));
  return new Proxy(js, {
    get(target, prop) {
      if (prop === 'publish') return publish;
      const v: unknown = Reflect.get(target, prop, target);
      // Bound to the client itself, so its methods keep their own state on it.
      return typeof v === 'function' ? (v as (...args: unknown[]) => unknown).bind(target) : v;
    },
  });
}

/** MEMSTREAM_PUBLISH_WINDOW: read where a worker's connection is made, so every worker and host applies it without wiring. */
const PublishEnv = z.object({ MEMSTREAM_PUBLISH_WINDOW: z.coerce.number().int().min(1).max(100_000).default(32) });

export function publishWindowFromEnv(env: NodeJS.ProcessEnv = process.env): number {
  const r = PublishEnv.safeParse({ MEMSTREAM_PUBLISH_WINDOW: env.MEMSTREAM_PUBLISH_WINDOW === '' ? undefined : env.MEMSTREAM_PUBLISH_WINDOW });
  if (!r.success) throw new Error(`invalid configuration:\n${r.error.issues.map((i) => `  ${i.path.join('.')}: ${i.message}`).join('\n')}`);
  return r.data.MEMSTREAM_PUBLISH_WINDOW;
}
