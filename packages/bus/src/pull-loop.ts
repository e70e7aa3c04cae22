import type { JsMsg } from '@nats-io/jetstream';
import { errorMessage, type Logger } from '@memstream/kit';
import type { Bus } from './connect.js';

const BROKER_AWAY = /no responders|timeout|connection (?:closed|draining|disconnected)|jetstream is not enabled/i;

export interface PullLoop {
  /** Stop pulling, return messages not yet started, wait for the ones in flight. Never acks unfinished work. */
  stop(): Promise<void>;
  /** Resolves when the loop has ended. */
  done: Promise<void>;
  /** True once stop() was called: a handler waiting its turn should hand its message back. */
  readonly stopping: boolean;
}

/**
 * Pull from a durable consumer and run `handle` on up to `concurrency` messages at once. After
 * stop(), messages not yet started are handed back at once (nak) rather than sat on until their
 * ack wait, and stop() resolves when the ones in hand are finished. A subscription that breaks
 * (the broker restarted) is opened again after a second. `handle` owns ack/nak; an error it
 * throws is logged, and the message comes back after its ack wait.
 */
export function pullLoop(opts: {
  bus: Bus;
  stream: string;
  durable: string;
  concurrency: number;
  log: Logger;
  handle: (m: JsMsg) => Promise<void>;
}): PullLoop {
  const { log, concurrency } = opts;
  const inflight = new Set<Promise<void>>();
  let stopping = false;
  let current: { stop(): void } | null = null;
  let wake: (() => void) | null = null;

  async function loop(): Promise<void> {
    while (!stopping) {
      try {
        const c = await opts.bus.js.consumers.get(opts.stream, opts.durable);
        const messages = await c.consume({ max_messages: concurrency * 2 });
        current = messages;
        for await (const m of messages) {
          if (stopping) {
            m.nak();
            continue;
          }
          while (inflight.size >= concurrency) await Promise.race(inflight);
          if (stopping) {
            m.nak();
            continue;
          }
          const p: Promise<void> = opts
            .handle(m)
            .catch((err) => {
              // An ack or nak the broker did not answer (it is restarting): the message comes back
              // after its ack wait, so this is expected while the broker is away, not a bug.
              if (BROKER_AWAY.test(errorMessage(err))) log.warn({ err: errorMessage(err), consumer: opts.durable }, 'broker away while settling a message: it will be redelivered');
              else log.error({ err: errorMessage(err), consumer: opts.durable }, 'unexpected handler error');
            })
            .finally(() => inflight.delete(p));
          inflight.add(p);
        }
      } catch (err) {
        if (stopping) break;
        log.warn({ err: errorMessage(err), consumer: opts.durable }, 'consumer loop interrupted: retrying in 1 s');
        await new Promise<void>((r) => {
          wake = r;
          setTimeout(r, 1_000);
        });
      }
    }
    await Promise.allSettled([...inflight]);
  }

  const done = loop();
  return {
    done,
    get stopping() {
      return stopping;
    },
    async stop() {
      stopping = true;
      current?.stop();
      wake?.();
      await done;
    },
  };
}
