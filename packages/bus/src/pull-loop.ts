import type { Consumer, JsMsg } from '@nats-io/jetstream';
import type { Lane } from '@memstream/contracts';
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

/** How a consumer gathers messages into batches. */
export interface BatchPolicy {
  /** The most messages in one batch. */
  size: number;
  /** How long the first message waiting for a batch waits for more before the batch starts anyway. */
  waitMs: number;
  /**
   * One batch at a time (group commit): what arrives while a batch is handled waits for it to end
   * and goes into the next one, up to `size`. For a handler whose batch is one store transaction
   * (the projection, the indexer): a commit has a fixed cost, and at a moderate rate batches
   * gathered for `waitMs` alone hold one or two messages; this way they grow with the load, and an
   * idle consumer still starts a lone message after `waitMs`.
   */
  serial?: boolean;
}

/**
 * Batches of up to 64 messages, gathered for at most 5 ms: under load they fill, idle they cost
 * 5 ms. A batch's fixed costs (its confirmed acks, its publishes awaited together, a store's
 * commit) spread over more documents: bench ingest --memory-docs 0 with 64 against 32 (and the
 * stages' concurrency doubled with it), eight runs in both orders (2026-12-01): 364–394 documents/s
 * at 4.39–4.71 CPU-ms against 313–348 at 4.96–5.6; 128 gave no more (418 and 443 against 410 and 458).
 */
export const DEFAULT_BATCH: BatchPolicy = { size: 64, waitMs: 5 };

/**
 * Which of the fetched messages waiting for a batch go into the next one: the oldest `size`, in
 * arrival order. The one place batch membership is decided, so a fairness rule (say, round robin
 * over container tags) is a change of this function only. Removes what it returns from `waiting`.
 */
export function nextBatch<T>(waiting: T[], size: number): T[] {
  return waiting.splice(0, Math.max(1, size));
}

/**
 * The capacity one process shares between a stage's two lanes (docs/pipeline.md, "Fairness").
 * The normal lane may always hold at least the capacity less half of it (so it always has a pull
 * open, however much bulk work is held); the bulk lane may hold the whole capacity while the
 * normal lane holds nothing, and at most half of it (at least one) while the normal lane holds
 * any. So the bulk lane never starves the normal one, nor the normal one the bulk one; the two
 * together exceed the capacity only while the bulk lane drains from a full share to its half
 * (by at most half the capacity), and a pull already open keeps what it brings.
 */
export class LaneBudget {
  private readonly held: Record<Lane, number> = { normal: 0, bulk: 0 };
  private readonly listeners = new Set<() => void>();
  private admitBulk = true;
  constructor(readonly capacity: number) {}

  /** How many more messages `lane` may take now. */
  room(lane: Lane): number {
    const half = Math.floor(this.capacity / 2);
    if (lane === 'normal') return this.capacity - this.held.normal - Math.min(this.held.bulk, half);
    const limit = this.held.normal > 0 ? Math.max(1, half) : this.capacity - this.held.normal;
    // The stages after this one are busy (BULK_ADMISSION): one bulk message at a time, so the
    // lane slows down but never stops.
    return (this.admitBulk ? limit : Math.min(limit, 1)) - this.held.bulk;
  }

  /** Whether the stages after this one have room for bulk work (see BULK_ADMISSION and admission.ts). */
  admit(open: boolean): void {
    if (this.admitBulk === open) return;
    this.admitBulk = open;
    for (const l of this.listeners) l();
  }

  /** A lane's loop reports how many messages it holds now. */
  set(lane: Lane, n: number): void {
    if (this.held[lane] === n) return;
    this.held[lane] = n;
    for (const l of this.listeners) l();
  }

  /** Called on every change (a lane's loop waits for room with it). */
  onChange(l: () => void): () => void {
    this.listeners.add(l);
    return () => this.listeners.delete(l);
  }
}

/**
 * Pull from a durable consumer and hand what arrives to `handle` in batches (bounded by
 * `batch.size` messages and `batch.waitMs` of gathering), holding at most `capacity` messages.
 *
 * It pulls only as many messages as it has room for (a fetch per batch, not a prefetching
 * consume()), so every message this process holds is one it will start soon, and every held
 * message is kept alive (working()) on one timer until it is settled. That is what lets the
 * consumers' ack waits be short: a dead worker's messages come back within one ack wait, while a
 * live worker's long job, or a message waiting behind others in its batch (the notifier's per-key
 * order), is never handed to a second worker. A prefetched message sitting unseen in a client
 * buffer could not be kept alive, and would be redelivered while still queued here.
 *
 * After stop(), messages not yet in a batch are handed back at once (nak) rather than sat on
 * until their ack wait, and stop() resolves when the batches in hand are finished (a batch
 * handler hands back what it has not started: see `stopping`). A pull that breaks (the broker
 * restarted) is opened again after a second. `handle` owns every message's ack/nak; an error it
 * throws is logged, and its messages come back after their ack wait.
 */
export function pullLoop(opts: {
  bus: Bus;
  stream: string;
  durable: string;
  /** The most messages held at once: waiting for a batch or in one. */
  capacity: number;
  batch?: BatchPolicy;
  log: Logger;
  /** Handle a batch; `settled(m)` frees a message's place before the batch ends (a slow message holds back only itself). */
  handle: (batch: JsMsg[], settled: (m: JsMsg) => void) => Promise<void>;
  /** Keep held messages alive (default true). Off only in tests that show what a late ack does. */
  keepAlive?: boolean;
  /** One lane of a stage's two: its room comes from the budget shared with the other lane's loop, not `capacity` alone. */
  lane?: { lane: Lane; budget: LaneBudget };
  /**
   * Messages that are not this loop's to handle (the other lane's): acked on arrival, never held
   * or batched, so a lane passes over the other lane's backlog at the speed of its pulls.
   */
  skip?: (m: JsMsg) => boolean;
  /**
   * Told, on every change, the durable's pending count as of the last pull (a delivered message
   * carries it; an empty pull means none) and how many messages this loop holds (backlog.ts).
   */
  onBacklog?: (pending: number, held: number) => void;
}): PullLoop {
  const { log } = opts;
  const capacity = Math.max(1, opts.capacity);
  const batch = opts.batch ?? DEFAULT_BATCH;
  const inflight = new Set<Promise<void>>();
  const held = new Set<JsMsg>();
  const waiting: JsMsg[] = [];
  let gather: NodeJS.Timeout | undefined;
  let stopping = false;
  let current: { stop(): void } | null = null;
  let wake: (() => void) | null = null;
  let freed: (() => void) | null = null;
  let timer: NodeJS.Timeout | undefined;
  let periodMs = 0;
  const share = opts.lane;
  const minPull = Math.max(1, Math.ceil(capacity / 4));
  /** How many more messages this loop may take now. */
  const room = (): number => (share ? share.budget.room(share.lane) : capacity - held.size);
  /** The durable's pending count at the last pull (JsMsg.info.pending of the newest delivery; 0 after an empty pull). */
  let pending = 0;
  const report = (): void => {
    share?.budget.set(share.lane, held.size);
    opts.onBacklog?.(pending, held.size);
  };
  // The other lane settling (or taking) messages changes this lane's room.
  const unlisten = share?.budget.onChange(() => freed?.());

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

  function settled(m: JsMsg): void {
    if (held.delete(m)) {
      report();
      freed?.();
    }
  }

  function start(ms: JsMsg[]): void {
    const p: Promise<void> = opts
      .handle(ms, settled)
      .catch((err) => {
        // An ack or nak the broker did not answer (it is restarting): the message comes back
        // after its ack wait, so this is expected while the broker is away, not a bug.
        if (BROKER_AWAY.test(errorMessage(err))) log.warn({ err: errorMessage(err), consumer: opts.durable }, 'broker away while settling a message: it will be redelivered');
        else log.error({ err: errorMessage(err), consumer: opts.durable }, 'unexpected handler error');
      })
      .finally(() => {
        inflight.delete(p);
        for (const m of ms) held.delete(m);
        report();
        freed?.();
        // What gathered meanwhile is the next batch.
        if (batch.serial && waiting.length > 0 && !stopping) dispatch(true);
      });
    inflight.add(p);
  }

  /** Start batches of what waits: full ones at once, the rest when `all` (the gathering time is up, or the pull ended). */
  function dispatch(all: boolean): void {
    clearTimeout(gather);
    gather = undefined;
    // Serial: the batch in flight starts the next one when it ends (see BatchPolicy.serial).
    if (batch.serial && inflight.size > 0) return;
    while (waiting.length >= batch.size || (all && waiting.length > 0)) {
      start(nextBatch(waiting, batch.size));
      if (batch.serial) return;
    }
    if (waiting.length > 0) gather = setTimeout(() => dispatch(true), batch.waitMs);
  }

  function arrived(m: JsMsg): void {
    pending = m.info.pending;
    if (stopping) {
      m.nak();
      return;
    }
    if (opts.skip?.(m)) {
      try {
        m.ack();
      } catch {
        // The connection is closing: it comes back after its ack wait, and is skipped again.
      }
      return;
    }
    held.add(m);
    report();
    waiting.push(m);
    if (batch.serial && inflight.size > 0) return;
    if (waiting.length >= batch.size) dispatch(false);
    else if (!gather) gather = setTimeout(() => dispatch(true), batch.waitMs);
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
        // Pull when a quarter of the capacity is free, or nothing is held: messages are settled
        // one by one, and a pull for each freed place costs a request and a subscription per
        // message instead of per batch.
        while ((room() < minPull && held.size > 0) || room() <= 0) {
          if (stopping) break;
          await new Promise<void>((r) => (freed = r));
        }
        freed = null;
        if (stopping) break;
        if (!consumer) {
          consumer = await opts.bus.js.consumers.get(opts.stream, opts.durable);
          // ack_wait is always set on a durable we created; 30 s is the server default otherwise.
          keepAlive((await consumer.info(true)).config.ack_wait ?? 30_000_000_000);
        }
        // The other lane may have taken the room while the consumer was looked up.
        const want = room();
        if (want <= 0) continue;
        const asked = performance.now();
        let got = 0;
        const pull = await consumer.fetch({ max_messages: want, expires: FETCH_EXPIRES_MS });
        current = pull;
        for await (const m of pull) {
          got++;
          arrived(m);
        }
        current = null;
        // A pull that waited its time out for nothing saw nothing pending; one the server ended at
        // once (below) says nothing about it.
        const endedAtOnce = performance.now() - asked < FETCH_EXPIRES_MS / 2;
        if (got === 0 && !endedAtOnce) pending = 0;
        report();
        if (!stopping) dispatch(true);
        // A pull the server ended at once with nothing (say, max_ack_pending reached across
        // replicas): pause rather than spin.
        if (got === 0 && endedAtOnce) await pause(250);
      } catch (err) {
        current = null;
        consumer = null;
        if (stopping) break;
        log.warn({ err: errorMessage(err), consumer: opts.durable }, 'consumer loop interrupted: retrying in 1 s');
        await pause(1_000);
      }
    }
    clearTimeout(gather);
    // Not yet in a batch: handed back at once.
    for (const m of waiting.splice(0)) {
      held.delete(m);
      try {
        m.nak();
      } catch {
        // The connection is closing: it comes back after its ack wait.
      }
    }
    report();
    await Promise.allSettled([...inflight]);
    clearInterval(timer);
    unlisten?.();
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
      freed?.();
      await done;
    },
  };
}
