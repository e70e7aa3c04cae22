import type { NatsConnection } from '@nats-io/transport-node';
import type { JetStreamClient } from '@nats-io/jetstream';
import { z } from 'zod';

/** Core NATS (not stored by any stream): a gateway says on it that adds are arriving. */
export const ADDS_ARRIVING_SUBJECT = 'memstream.adds-arriving';
/** A gateway says it at most this often while adds arrive. */
export const ADDS_SIGNAL_EVERY_MS = 100;
/** A worker process yields for this long after each signal: a few missed signals do not end it. */
export const ADDS_YIELD_FOR_MS = 350;

/**
 * The gateway's side: `arriving()` on every add; it sends the signal at most every
 * ADDS_SIGNAL_EVERY_MS, a few bytes of core NATS, and nothing while no add arrives.
 */
export function addsSignal(nc: Pick<NatsConnection, 'publish'>, now: () => number = Date.now): { arriving(): void } {
  let last = -Infinity;
  return {
    arriving() {
      const t = now();
      if (t - last < ADDS_SIGNAL_EVERY_MS) return;
      last = t;
      try {
        nc.publish(ADDS_ARRIVING_SUBJECT);
      } catch {
        // Closed or reconnecting: the add's own publish reports that; a missed signal costs nothing.
      }
    },
  };
}

/**
 * A worker process's JetStream publishes, with at most `window` of them unanswered at once while
 * a gateway says adds are arriving, and all at once otherwise. Waiting publishes are sent in the
 * order they were made (so one document's events still leave in order); everything else of the
 * client is the client's own.
 *
 * Why: a batch of 64 messages whose handlers each emit an event sends 64 publishes in one socket
 * write, and nats-server (one Go processor on two cores, see the launcher) stores and answers them
 * in a run before it reads the gateway's connection again. An add waits for its own publish to be
 * answered, so such runs were the add's tail under a backlog (docs/pipeline.md, Load: the
 * gateway's publish at p50 0.5–0.7 ms and p99 21–31 ms while its event loop waited 3.9–5.4 ms at
 * p99). A window always on cut that tail but cost the pipeline up to a quarter of its rate (a024f5f);
 * held only while adds arrive, the backlog drains at full speed between them.
 */
export function yieldingToAdds(js: JetStreamClient, nc: Pick<NatsConnection, 'subscribe'>, window: number, now: () => number = Date.now): JetStreamClient & { yielding(): boolean } {
  const size = Math.max(1, Math.floor(window));
  let until = -Infinity;
  nc.subscribe(ADDS_ARRIVING_SUBJECT, {
    callback: (err) => {
      if (!err) until = now() + ADDS_YIELD_FOR_MS;
    },
  });
  const yielding = () => now() < until;
  let active = 0;
  const waiting: Array<() => void> = [];
  const next = () => {
    while (waiting.length > 0 && (active < size || !yielding())) {
      active++;
      waiting.shift()!();
    }
  };
  const publish: JetStreamClient['publish'] = async (subject, payload, options) => {
    if (waiting.length > 0 || (active >= size && yielding())) await new Promise<void>((r) => waiting.push(r));
    else active++;
    try {
      return await js.publish(subject, payload, options);
    } finally {
      active--;
      next();
    }
  };
  return new Proxy(js, {
    get(target, prop) {
      if (prop === 'publish') return publish;
      if (prop === 'yielding') return yielding;
      const v: unknown = Reflect.get(target, prop, target);
      // Bound to the client itself, so its methods keep their own state on it.
      return typeof v === 'function' ? (v as (...args: unknown[]) => unknown).bind(target) : v;
    },
  }) as JetStreamClient & { yielding(): boolean };
}

/** MEMSTREAM_YIELD_WINDOW: a worker process's publishes unanswered at once while adds arrive; 0 turns yielding off. 8 chosen by measurement: docs/pipeline.md, Load, "The window's size". */
const YieldEnv = z.object({ MEMSTREAM_YIELD_WINDOW: z.coerce.number().int().min(0).max(100_000).default(8) });

export function yieldWindowFromEnv(env: NodeJS.ProcessEnv = process.env): number {
  const r = YieldEnv.safeParse({ MEMSTREAM_YIELD_WINDOW: env.MEMSTREAM_YIELD_WINDOW === '' ? undefined : env.MEMSTREAM_YIELD_WINDOW });
  if (!r.success) throw new Error(`invalid configuration:\n${r.error.issues.map((i) => `  ${i.path.join('.')}: ${i.message}`).join('\n')}`);
  return r.data.MEMSTREAM_YIELD_WINDOW;
}
