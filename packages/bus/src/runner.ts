import type { JsMsg } from '@nats-io/jetstream';
import { headers as natsHeaders } from '@nats-io/nats-core';
import { CONSUMERS, STREAM_DOCS, deadLetterSubject, type ConsumerName, type DocumentEvent, type EventKind, type FailureClass, type Stage } from '@memstream/contracts';
import { PermanentError, RetryableError, errorMessage, type Logger } from '@memstream/kit';
import { ZodError } from 'zod';
import type { Bus } from './connect.js';
import { busTelemetry, decodeEvent, follow, headersToRecord, latestRevision, publishEvent, type ConsumeResult } from './events.js';
import { DEFAULT_POLICIES } from './topology.js';
import { pullLoop } from './pull-loop.js';
import { decide, defaultBackoff, failureSignature, type Decision } from './decide.js';

export interface HandlerContext {
  /** Where the message stands in the stream and how often it was delivered. */
  msg: { seq: number; deliveryCount: number; subject: string };
  log: Logger;
  /** Publish an event at once (say, stage-started before long work), with the trace headers carried on. */
  emit(event: DocumentEvent): Promise<void>;
}

/** A stage: given an event and its ports, the events to emit. The runner publishes them, then acks. */
export type Handler = (event: DocumentEvent, ctx: HandlerContext) => Promise<DocumentEvent[] | void>;

export type Outcome = 'handled' | 'skipped-stale' | 'retried' | 'failed' | 'dead-lettered';

export interface RunnerOptions {
  bus: Bus;
  consumer: ConsumerName;
  log: Logger;
  handle: Handler;
  /** How many messages one process works on at once. */
  concurrency?: number;
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
 * The consumer runner: one durable pull consumer, explicit acks, bounded concurrency.
 * Acks are confirmed by the server (ackAck), so when stop() returns every finished message is
 * known acked and every unfinished one is not.
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
  const kinds = opts.kinds ?? CONSUMERS[name].kinds;
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

  async function processOne(m: JsMsg): Promise<void> {
    const started = performance.now();
    const [, documentId = 'unknown', kind = 'unknown'] = m.subject.split('.');
    if (!kinds.includes(kind as EventKind)) {
      await m.ackAck();
      return;
    }
    // One consumer span per message, continued from the trace context the message carries; the
    // events it emits carry that span on, so one trace runs from the HTTP request to the projection.
    const result = await busTelemetry().consume(
      { consumer: name, subject: m.subject, documentId, kind, seq: m.seq, deliveryCount: m.info.deliveryCount, headers: headersToRecord(m.headers) },
      (trace) => handleMessage(m, documentId, trace),
    );
    opts.onOutcome?.(result.outcome, result.event ?? null, performance.now() - started);
  }

  type Handled = ConsumeResult & { event?: DocumentEvent };

  async function handleMessage(m: JsMsg, documentId: string, trace: Record<string, string>): Promise<Handled> {
    const started = performance.now();
    const deliveryCount = m.info.deliveryCount;
    let event: DocumentEvent;
    try {
      event = await decodeEvent(bus, m.data);
    } catch (err) {
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
    const about = { event, eventType: event.type, revision: event.revision };
    const mlog = log.child({ documentId: event.documentId, type: event.type, revision: event.revision, seq: m.seq, deliveryCount });
    const ctx: HandlerContext = {
      msg: { seq: m.seq, deliveryCount, subject: m.subject },
      log: mlog,
      emit: async (e) => {
        await publishEvent(bus, e, { headers: trace });
      },
    };
    try {
      if (opts.skipStale) {
        const latest = await latestRevision(bus, event.documentId);
        if (latest.deleted || event.revision < latest.revision) {
          await m.ackAck();
          mlog.debug({ latest: latest.revision, deleted: latest.deleted }, 'stale revision: skipped');
          return { outcome: 'skipped-stale', ...about };
        }
      }
      const out = (await opts.handle(event, ctx)) ?? [];
      for (const e of out) await ctx.emit(e);
      await m.ackAck();
      attempts.delete(m.seq);
      mlog.debug({ emitted: out.map((e) => e.type), ms: Math.round(performance.now() - started) }, 'event handled');
      return { outcome: 'handled', ...about };
    } catch (err) {
      const reason = errorMessage(err);
      try {
        const earlier = attempts.get(m.seq) ?? [];
        const d = decide({ error: err, deliveryCount, maxDeliver, earlier }, backoff);
        if (d.action === 'nak') {
          remember(m.seq, failureSignature(err));
          mlog.warn({ reason, delayMs: d.delayMs, transient: d.transient }, 'failure: retrying');
          m.nak(d.delayMs);
          return { outcome: 'retried', reason, ...about };
        }
        if (d.lastAttempt) mlog.error({ reason, maxDeliver, class: d.class, seenAttempts: earlier.length + 1 }, 'retries exhausted: failed and dead-lettered');
        else mlog.warn({ reason, class: d.class }, 'permanent failure');
        await fail(event, m, d, ctx);
        await m.ackAck();
        attempts.delete(m.seq);
        return { outcome: d.lastAttempt ? 'dead-lettered' : 'failed', failureClass: d.class, reason, ...about };
      } catch (e2) {
        // Could not even record the failure (broker away): let it come back.
        mlog.warn({ err: errorMessage(e2) }, 'could not record failure: retrying');
        m.nak(backoff(deliveryCount));
        return { outcome: 'retried', reason: errorMessage(e2), ...about };
      }
    }
  }

  return pullLoop({ bus, stream: STREAM_DOCS, durable: CONSUMERS[name].durable, concurrency, log, handle: processOne, ...(opts.keepAlive === false ? { keepAlive: false } : {}) });
}
