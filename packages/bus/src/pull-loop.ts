import type { Consumer, JsMsg } from '@nats-io/jetstream';
import { errorMessage, type Logger } from '@memstream/kit';
import type { Bus } from './connect.js';

const BROKER_AWAY = /no responders|timeout|connection (?:closed|draining|disconnected)|jetstream is not enabled/i;

/** How long one pull request waits for messages before the loop asks again (an idle consumer's round trip). */
const FETCH_EXPIRES_MS = 5_000;

export interface PullLoop {
  /** Stop pulling, return messages not yet started, wait for the ones in flight. Never acks unfinished work. */
  stop(): Promise<void>;
  /** Resolves when the loop has ended. */
  done: Promise<void>;
  /** True once stop() was called: a handler waiting its turn should hand its message back. */
  readonly stopping: boolean;
}

/**
 * The keep-alive period for a consumer's ack wait: a fifth of it, so four ticks in a row may be
 * late (an event loop blocked by CPU-bound work, a broker reconnect) before the server hands a
 * live worker's message to another. Never under 200 ms.
 */
export function keepAlivePeriod(ackWaitMs: number): number {
  return Math.max(200, Math.floor(ackWaitMs / 5));
}

/**
 * Pull from a durable consumer and run `handle` on up to `concurrency` messages at once.
 *
 * It pulls only as many messages as it has free slots (a fetch per batch, not a prefetching
 * consume()), so every message this process holds is one it has started, and every held message
 * is kept alive (working()) on one timer until `handle` settles. That is what lets the consumers'
 * ack waits be short: a dead worker's messages come back within one ack wait, while a live
 * worker's long job, or a message waiting behind others in `handle` (the notifier's per-key
 * order), is never handed to a second worker. A prefetched message sitting unseen in a client
 * buffer could not be kept alive, and would be redelivered while still queued here.
 *
 * After stop(), messages not yet started are handed back at once (nak) rather than sat on until
 * their ack wait, and stop() resolves when the ones in hand are finished. A pull that breaks (the
 * broker restarted) is opened again after a second. `handle` owns ack/nak; an error it throws is
 * logged, and the message comes back after its ack wait.
 */
export function pullLoop(opts: {
  bus: Bus;
  stream: string;
  durable: string;
  concurrency: number;
  log: Logger;
  handle: (m: JsMsg) => Promise<void>;
  /** Keep held messages alive (default true). Off only in tests that show what a late ack does. */
  keepAlive?: boolean;
}): PullLoop {
  const { log, concurrency } = opts;
  const inflight = new Set<Promise<void>>();
  const held = new Set<JsMsg>();
  let stopping = false;
  let current: { stop(): void } | null = null;
  let wake: (() => void) | null = null;
  let timer: NodeJS.Timeout | undefined;
  let periodMs = 0;

  function keepAlive(ackWaitNanos: number): void {
    if (opts.keepAlive === false) return;
    const period = keepAlivePeriod(Math.max(1, Math.round(ackWaitNanos / 1_000_000)));
    if (timer && period === periodMs) return;
    clearInterval(timer);
    periodMs = period;
    timer = setInterval(() => {
      for (const m of held) {
        try {
          // A no-op once the message is acked, nak'd or terminated (JsMsg.didAck).
          m.working();
        } catch {
          // The connection is closed or closing: the message comes back after its ack wait.
        }
      }
    }, period);
    timer.unref();
  }

  function start(m: JsMsg): void {
    held.add(m);
    const p: Promise<void> = opts
      .handle(m)
      .catch((err) => {
        // An ack or nak the broker did not answer (it is restarting): the message comes back
        // after its ack wait, so this is expected while the broker is away, not a bug.
        if (BROKER_AWAY.test(errorMessage(err))) log.warn({ err: errorMessage(err), consumer: opts.durable }, 'broker away while settling a message: it will be redelivered');
        else log.error({ err: errorMessage(err), consumer: opts.durable }, 'unexpected handler error');
      })
      .finally(() => {
        held.delete(m);
        inflight.delete(p);
      });
    inflight.add(p);
  }

  const pause = (ms: number) =>
    new Promise<void>((r) => {
      wake = r;
      setTimeout(r, ms);
    });

  async function loop(): Promise<void> {
    let consumer: Consumer | null = null;
    while (!stopping) {
      try {
        while (inflight.size >= concurrency && !stopping) await Promise.race(inflight);
        if (stopping) break;
        if (!consumer) {
          consumer = await opts.bus.js.consumers.get(opts.stream, opts.durable);
          // ack_wait is always set on a durable we created; 30 s is the server default otherwise.
          keepAlive((await consumer.info(true)).config.ack_wait ?? 30_000_000_000);
        }
        const asked = performance.now();
        let got = 0;
        const batch = await consumer.fetch({ max_messages: concurrency - inflight.size, expires: FETCH_EXPIRES_MS });
        current = batch;
        for await (const m of batch) {
          got++;
          if (stopping) m.nak();
          else start(m);
        }
        current = null;
        // A pull the server ended at once with nothing (say, max_ack_pending reached across
        // replicas): pause rather than spin.
        if (got === 0 && performance.now() - asked < FETCH_EXPIRES_MS / 2) await pause(250);
      } catch (err) {
        current = null;
        consumer = null;
        if (stopping) break;
        log.warn({ err: errorMessage(err), consumer: opts.durable }, 'consumer loop interrupted: retrying in 1 s');
        await pause(1_000);
      }
    }
    await Promise.allSettled([...inflight]);
    clearInterval(timer);
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
