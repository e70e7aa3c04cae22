import type { JsMsg } from '@nats-io/jetstream';
import { headers as natsHeaders } from '@nats-io/nats-core';
import { CONSUMERS, isStage, LANE_HEADER, STREAM_DOCS, TASK_TYPE_HEADER, deadLetterSubject, type ConsumerName, type Lane, type DocumentEvent, type EventKind, type FailureClass, type Stage } from '@memstream/contracts';
import { PermanentError, RetryableError, errorMessage, limiter, type Logger } from '@memstream/kit';
import { ZodError } from 'zod';
import type { Bus } from './connect.js';
import { busTelemetry, decodeEvent, follow, headersToRecord, latestRevision, publishEvent, type ConsumeResult } from './events.js';
import { DEFAULT_POLICIES } from './topology.js';
import { DEFAULT_BATCH, LaneBudget, pullLoop, type BatchPolicy, type PullLoop } from './pull-loop.js';
import { decide, defaultBackoff, failureSignature, type Decision } from './decide.js';
import { ackGroups } from './acks.js';
import { admitBulkByBacklog } from './admission.js';
import { backlogAnnouncer } from './backlog.js';

export interface HandlerContext {
  /** Where the message stands in the stream and how often it was delivered. */
  msg: { seq: number; deliveryCount: number; subject: string };
  log: Logger;
  /** Publish an event at once (say, stage-started before long work), with the trace headers carried on. */
  emit(event: DocumentEvent): Promise<void>;
}

/** A stage: given an event and its ports, the events to emit. The runner publishes them, then acks. */
export type Handler = (event: DocumentEvent, ctx: HandlerContext) => Promise<DocumentEvent[] | void>;

/**
 * A consumer that handles a batch at once (one store transaction, one model call across
 * documents): given the batch's events in delivery order, one settled result per event, in the
 * same order. Each event still ends acked, naked or failed on its own.
 */
export type BatchHandler = (items: Array<{ event: DocumentEvent; ctx: HandlerContext }>) => Promise<Array<PromiseSettledResult<DocumentEvent[] | void>>>;

/** A batch handler called with a batch of one event (tests, and replays that go one event at a time). */
export function asHandler(handleBatch: BatchHandler): Handler {
  return async (event, ctx) => {
    const [r] = await handleBatch([{ event, ctx }]);
    if (!r) throw new Error('the batch handler returned no result');
    if (r.status === 'rejected') throw r.reason;
    return r.value;
  };
}

export type Outcome = 'handled' | 'skipped-stale' | 'retried' | 'failed' | 'dead-lettered';

export interface RunnerOptions {
  bus: Bus;
  consumer: ConsumerName;
  log: Logger;
  /** Each event on its own (at most `concurrency` at once), or `handleBatch`. */
  handle?: Handler;
  /** The whole batch at once, instead of `handle`. */
  handleBatch?: BatchHandler;
  /** How many messages one process holds and works on at once (batches are at most this large). */
  concurrency?: number;
  /** How messages are gathered into batches (default DEFAULT_BATCH). */
  batch?: BatchPolicy;
  /** The stage a failure is blamed on. Without one (the projection), failures are only dead-lettered. */
  stage?: Stage;
  /** Drop events of a revision older than the newest submitted one, or of a deleted document. */
  skipStale?: boolean;
  /** Only these event kinds are decoded and handled; others are acked unread. Default: the kinds the pipeline table says the consumer reads. */
  kinds?: readonly EventKind[];
  maxDeliver?: number;
  /** Delay before the n-th redelivery (n counts from 1). */
  backoffMs?: (deliveryCount: number) => number;
  onOutcome?: (outcome: Outcome, event: DocumentEvent | null, ms: number) => void;
  /**
   * Keep every held message alive while its handler runs (default true; see pullLoop), so a job
   * longer than ack_wait is not redelivered to another worker. Off only in tests that show what a
   * late ack does.
   */
  keepAlive?: boolean;
}

export interface RunningConsumer {
  /** Stop pulling, return messages not yet started, wait for the ones in flight. Never acks unfinished work. */
  stop(): Promise<void>;
  /** Resolves when the loop has ended. */
  done: Promise<void>;
}

/**
 * Calls that arrive one by one (one per message of a batch) answered by one call for them all:
 * once `expected` items have joined, `run` gets them in join order and each caller its own result.
 */
function gathering<I, R>(expected: number, run: (items: I[]) => Promise<Array<PromiseSettledResult<R>>>): (item: I) => Promise<R> {
  const items: I[] = [];
  const waiters: Array<{ resolve: (r: R) => void; reject: (e: unknown) => void }> = [];
  return (item) =>
    new Promise<R>((resolve, reject) => {
      items.push(item);
      waiters.push({ resolve, reject });
      if (items.length < expected) return;
      run(items).then(
        (results) =>
          waiters.forEach((w, k) => {
            const r = results[k];
            if (!r) w.reject(new Error(`the batch handler returned ${results.length} results for ${items.length} events`));
            else if (r.status === 'fulfilled') w.resolve(r.value);
            else w.reject(r.reason);
          }),
        (err) => waiters.forEach((w) => w.reject(err)),
      );
    });
}

/**
 * The consumer runner: one durable pull consumer, explicit acks, messages handled in batches
 * (bounded in size and gathering time: see pullLoop) while each message is settled on its own.
 * Per batch: the unread kinds are acked at once; the staleness of each document is read once;
 * every handler's events are sent without waiting on one another and awaited together before
 * its message is acked; acks are confirmed by the server, together (acks.ts), so when stop()
 * returns every finished message is known acked and every unfinished one is not.
 * Outcomes:
 * - handler returns → publish its events, ack;
 * - stale revision or deleted document → ack without work;
 * - the handler throws → what `decide` (decide.ts, the one place it is decided) says: nak with
 *   a delay, or `failed` (a copy to DEAD_LETTERS unless the input was simply bad), then ack;
 * - an undecodable message → copy to DEAD_LETTERS, term.
 */
export function runConsumer(opts: RunnerOptions): RunningConsumer {
  const { bus, consumer: name, log } = opts;
  const policy = DEFAULT_POLICIES[name];
  const maxDeliver = opts.maxDeliver ?? policy.maxDeliver;
  const backoff = opts.backoffMs ?? defaultBackoff;
  const concurrency = Math.max(1, opts.concurrency ?? 4);
  const batch = opts.batch ?? DEFAULT_BATCH;
  const kinds = opts.kinds ?? CONSUMERS[name].kinds;
  const taskTypes: readonly string[] | undefined = CONSUMERS[name].taskTypes;
  /** A message of a task type this consumer does not read, by its header (absent: decode and let the handler decide). */
  const wantsTaskType = (m: JsMsg): boolean => {
    if (!taskTypes) return true;
    const t = m.headers?.get(TASK_TYPE_HEADER);
    return !t || taskTypes.includes(t);
  };
  const limit = limiter(concurrency);
  const ack = ackGroups();
  if (!opts.handle === !opts.handleBatch) throw new Error(`consumer ${name}: give exactly one of handle and handleBatch`);
  /**
   * Failure signatures per stream sequence, of the deliveries this process saw, to tell poison
   * from exhausted on the last one. In memory: with replicas or after a restart a process sees
   * only some deliveries, and judges by those. Bounded, oldest dropped first.
   */
  const attempts = new Map<number, string[]>();
  const remember = (seq: number, sig: string) => {
    const seen = attempts.get(seq) ?? [];
    seen.push(sig);
    attempts.delete(seq);
    attempts.set(seq, seen);
    if (attempts.size > 10_000) attempts.delete(attempts.keys().next().value!);
    return seen;
  };
  async function deadLetter(m: JsMsg, documentId: string, reason: string): Promise<void> {
    const h = natsHeaders();
    h.set('Memstream-Original-Subject', m.subject);
    h.set('Memstream-Original-Seq', String(m.seq));
    h.set('Memstream-Reason', reason.slice(0, 1000));
    h.set('Memstream-Consumer', name);
    await bus.js.publish(deadLetterSubject(name, documentId), m.data, { msgID: `dead:${name}:${m.seq}`, headers: h });
  }

  async function fail(event: DocumentEvent, m: JsMsg, d: Extract<Decision, { action: 'fail' }>, ctx: HandlerContext): Promise<void> {
    if (d.deadLetter) await deadLetter(m, event.documentId, d.reason);
    if (opts.stage) await ctx.emit(follow(event, 'document.failed.v1', { stage: opts.stage, reason: d.reason, class: d.class }, 99));
  }

  type Decoded = { ok: true; event: DocumentEvent } | { ok: false; err: unknown };
  type Latest = Awaited<ReturnType<typeof latestRevision>>;
  /** Whether a decoded event is of the newest revision: fresh, stale (with what is newer), or unknown (the log could not be read). */
  type Staleness = 'fresh' | { stale: Latest } | { unknown: unknown };

  async function processBatch(ms: JsMsg[], settled: (m: JsMsg) => void): Promise<void> {
    const mine: Array<{ m: JsMsg; documentId: string; kind: string }> = [];
    const unread: JsMsg[] = [];
    for (const m of ms) {
      const [, documentId = 'unknown', kind = 'unknown'] = m.subject.split('.');
      if (kinds.includes(kind as EventKind) && wantsTaskType(m)) mine.push({ m, documentId, kind });
      else unread.push(m);
    }
    const decoded = await Promise.all(mine.map(({ m }) => decodeEvent(bus, m.data).then((event): Decoded => ({ ok: true, event }), (err): Decoded => ({ ok: false, err }))));
    // Staleness: read once per document of the batch, all at once.
    const latest = new Map<string, Promise<Latest>>();
    const staleness = await Promise.all(
      decoded.map(async (d): Promise<Staleness> => {
        if (!d.ok || !opts.skipStale) return 'fresh';
        let p = latest.get(d.event.documentId);
        if (!p) latest.set(d.event.documentId, (p = latestRevision(bus, d.event.documentId)));
        try {
          const l = await p;
          return l.deleted || d.event.revision < l.revision ? { stale: l } : 'fresh';
        } catch (err) {
          return { unknown: err };
        }
      }),
    );
    // The batch handler gets the events that reach it (decoded, fresh) together; the others leave the batch first.
    const fresh = decoded.filter((d, k) => d.ok && staleness[k] === 'fresh').length;
    const joinBatch = opts.handleBatch ? gathering(fresh, opts.handleBatch) : null;
    const runHandler = (event: DocumentEvent, ctx: HandlerContext) =>
      joinBatch ? joinBatch({ event, ctx }) : limit(() => (stopping ? Promise.reject(new HandedBack()) : opts.handle!(event, ctx)));
    await Promise.all([
      ...unread.map((m) => ack(m).finally(() => settled(m))),
      ...mine.map(async ({ m, documentId, kind }, k) => {
        const started = performance.now();
        // One consumer span per message, continued from the trace context the message carries; the
        // events it emits carry that span on, so one trace runs from the HTTP request to the projection.
        const result = await busTelemetry().consume(
          // The lane goes on with the trace context: what a stage emits stays in its input's lane.
          { consumer: name, subject: m.subject, documentId, kind, seq: m.seq, deliveryCount: m.info.deliveryCount, headers: headersToRecord(m.headers, CARRIED_HEADERS) },
          (trace) => handleMessage(m, documentId, decoded[k]!, staleness[k]!, runHandler, trace),
        );
        settled(m);
        opts.onOutcome?.(result.outcome, result.event ?? null, performance.now() - started);
      }),
    ]);
  }

  type Handled = ConsumeResult & { event?: DocumentEvent };

  async function handleMessage(
    m: JsMsg,
    documentId: string,
    d: Decoded,
    staleness: Staleness,
    runHandler: (event: DocumentEvent, ctx: HandlerContext) => Promise<DocumentEvent[] | void>,
    trace: Record<string, string>,
  ): Promise<Handled> {
    const started = performance.now();
    const deliveryCount = m.info.deliveryCount;
    if (!d.ok) {
      const err = d.err;
      if (err instanceof ZodError || err instanceof SyntaxError) {
        const reason = `undecodable: ${errorMessage(err)}`;
        log.error({ err: errorMessage(err), subject: m.subject, seq: m.seq }, 'undecodable message: dead-lettered');
        try {
          await deadLetter(m, documentId, reason);
          // No reason string: '+TERM <reason>' needs nats-server 2.10; 2.9 would leave the message pending.
          m.term();
        } catch {
          m.nak(backoff(deliveryCount));
        }
        return { outcome: 'dead-lettered', failureClass: 'undecodable', reason };
      }
      // The object store could not be read: transient.
      log.warn({ err: errorMessage(err), seq: m.seq }, 'could not read message: retrying');
      m.nak(backoff(deliveryCount));
      return { outcome: 'retried', reason: errorMessage(err) };
    }
    const event = d.event;
    const about = { event, eventType: event.type, revision: event.revision };
    // The message's logger is made when something logs at a level that is on: pino serialises a
    // child's bindings when it is made, and most messages log nothing (handlers' lines are mostly
    // debug, which is off) — a cost on every message for none.
    let child: Logger | undefined;
    const mlog = (): Logger => (child ??= log.child({ documentId: event.documentId, type: event.type, revision: event.revision, seq: m.seq, deliveryCount, ...busTelemetry().logBindings?.(trace) }));
    // Every publish is sent at once and awaited with the others before the message is acked.
    const sent: Promise<unknown>[] = [];
    const ctx: HandlerContext = {
      msg: { seq: m.seq, deliveryCount, subject: m.subject },
      log: lazyLogger(log, mlog),
      emit: (e) => {
        const p = publishEvent(bus, e, { headers: trace });
        sent.push(p);
        // Settled with the others below (an awaiting caller still gets the failure). A caller may
        // drop what emit returns (the runner does, for what a handler returns): without the catch,
        // a publish failing while nobody awaits it yet is an unhandled rejection, and Node ends the
        // process. Seen when nats-server went away: the connection-lost rejection of the publishes
        // in flight took a whole worker host down. (`then` already handles p's own rejection.)
        const done = p.then(() => {});
        done.catch(() => {});
        return done;
      },
    };
    try {
      if (staleness !== 'fresh') {
        if ('unknown' in staleness) throw staleness.unknown;
        await ack(m);
        if (log.isLevelEnabled('debug')) mlog().debug({ latest: staleness.stale.revision, deleted: staleness.stale.deleted }, 'stale revision: skipped');
        return { outcome: 'skipped-stale', ...about };
      }
      const out = (await runHandler(event, ctx)) ?? [];
      for (const e of out) void ctx.emit(e);
      await Promise.all(sent);
      await ack(m);
      attempts.delete(m.seq);
      if (log.isLevelEnabled('debug')) mlog().debug({ emitted: out.map((e) => e.type), ms: Math.round(performance.now() - started) }, 'event handled');
      return { outcome: 'handled', ...about };
    } catch (err) {
      if (err instanceof HandedBack) {
        // stop() was called before its turn came: not started, handed back at once.
        m.nak();
        return { outcome: 'retried', reason: 'handed back unstarted at stop', ...about };
      }
      // What was sent before the failure must not race the failure's own events.
      await Promise.allSettled(sent);
      const reason = errorMessage(err);
      try {
        const earlier = attempts.get(m.seq) ?? [];
        const d = decide({ error: err, deliveryCount, maxDeliver, earlier }, backoff);
        if (d.action === 'nak') {
          remember(m.seq, failureSignature(err));
          mlog().warn({ reason, delayMs: d.delayMs, transient: d.transient }, 'failure: retrying');
          m.nak(d.delayMs);
          return { outcome: 'retried', reason, ...about };
        }
        if (d.lastAttempt) mlog().error({ reason, maxDeliver, class: d.class, seenAttempts: earlier.length + 1 }, 'retries exhausted: failed and dead-lettered');
        else mlog().warn({ reason, class: d.class }, 'permanent failure');
        sent.length = 0;
        await fail(event, m, d, ctx);
        await Promise.all(sent);
        await ack(m);
        attempts.delete(m.seq);
        return { outcome: d.lastAttempt ? 'dead-lettered' : 'failed', failureClass: d.class, reason, ...about };
      } catch (e2) {
        // Could not even record the failure (broker away): let it come back.
        mlog().warn({ err: errorMessage(e2) }, 'could not record failure: retrying');
        m.nak(backoff(deliveryCount));
        return { outcome: 'retried', reason: errorMessage(e2), ...about };
      }
    }
  }

  // Set by stop(); the handlers waiting their turn ask it.
  let stopping = false;
  const common = {
    bus,
    stream: STREAM_DOCS,
    // What a process holds is what it works on: replicas × concurrency stays within the
    // consumer's max_ack_pending (the deployment test checks it), so no replica starves another.
    capacity: concurrency,
    batch: { ...batch, size: Math.min(batch.size, concurrency) },
    log,
    handle: processBatch,
    ...(opts.keepAlive === false ? { keepAlive: false } : {}),
  };
  const bulkDurable = CONSUMERS[name].bulkDurable;
  // A stage's backlog, for the readers of the bulk lane's admission (backlog.ts): the entrance's normal lane and every later stage.
  const announcer = isStage(name) ? backlogAnnouncer(bus, CONSUMERS[name].durable) : null;
  const onBacklog = announcer ? { onBacklog: announcer.update } : {};
  let loops: PullLoop[];
  let stopAdmission: (() => void) | undefined;
  if (!bulkDurable) {
    loops = [pullLoop({ ...common, durable: CONSUMERS[name].durable, ...onBacklog })];
  } else {
    // The entrance: one loop per lane, sharing the capacity (LaneBudget); each acks the other
    // lane's messages unread. Bulk work is admitted while the later stages' backlog is short and
    // the normal lane is not far behind.
    const budget = new LaneBudget(concurrency);
    stopAdmission = admitBulkByBacklog(bus, budget, log, { normalDurable: CONSUMERS[name].durable });
    loops = (['normal', 'bulk'] as const).map((lane) =>
      pullLoop({
        ...common,
        ...(lane === 'normal' ? { durable: CONSUMERS[name].durable, ...onBacklog } : { durable: bulkDurable }),
        lane: { lane, budget },
        skip: (m) => laneOf(m) !== lane,
      }),
    );
  }
  const done = Promise.all(loops.map((l) => l.done)).then(() => {});
  return {
    done,
    async stop() {
      stopping = true;
      stopAdmission?.();
      await Promise.all(loops.map((l) => l.stop()));
      announcer?.stop();
    },
  };
}

/** The headers a stage carries from its input to what it emits: the trace context, the lane and the task type. */
const CARRIED_HEADERS = ['traceparent', 'tracestate', LANE_HEADER, TASK_TYPE_HEADER];

/** A message's lane: bulk when its header says so, else normal. */
export function laneOf(m: Pick<JsMsg, 'headers'>): Lane {
  return m.headers?.get(LANE_HEADER) === 'bulk' ? 'bulk' : 'normal';
}

const LEVELS = new Set(['trace', 'debug', 'info', 'warn', 'error', 'fatal']);

/**
 * A logger that makes the real one (`make`) only when a line is logged at a level `base` has on,
 * or anything else is asked of it: `ctx.log.debug(...)` with debug off costs a level check.
 */
function lazyLogger(base: Logger, make: () => Logger): Logger {
  return new Proxy({} as Logger, {
    get(_t, prop) {
      if (typeof prop === 'string' && LEVELS.has(prop) && !base.isLevelEnabled(prop)) return noop;
      const real = make();
      const v = Reflect.get(real, prop, real) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(real) : v;
    },
  });
}
const noop = (): void => {};

/** A message whose turn came after stop(): handed back unstarted. */
class HandedBack extends Error {}
