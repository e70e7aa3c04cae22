import type { JsMsg } from '@nats-io/jetstream';
import { headers as natsHeaders } from '@nats-io/nats-core';
import { CONSUMERS, STREAM_DOCS, deadLetterSubject, type ConsumerName, type DocumentEvent, type EventKind, type FailureClass, type Stage } from '@memstream/contracts';
import { PermanentError, RetryableError, errorMessage, type Logger } from '@memstream/kit';
import { ZodError } from 'zod';
import type { Bus } from './connect.js';
import { busTelemetry, decodeEvent, follow, headersToRecord, latestRevision, publishEvent, type ConsumeResult } from './events.js';
import { DEFAULT_POLICIES } from './topology.js';
import { pullLoop } from './pull-loop.js';

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

/** Exponential backoff with ±20% jitter: 0.5 s, 1 s, 2 s ... capped at 30 s. */
export function defaultBackoff(deliveryCount: number): number {
  const base = Math.min(30_000, 500 * 2 ** Math.max(0, deliveryCount - 1));
  return Math.round(base * (0.8 + Math.random() * 0.4));
}

// JetStreamNotEnabled: what @nats-io/jetstream throws when its API requests find no responder
// after its own retries — a server that is restarting, not one without JetStream.
const TRANSIENT_NAMES = new Set(['TimeoutError', 'AbortError', 'ClosedConnectionError', 'ConnectionError', 'DrainingConnectionError', 'NoRespondersError', 'RequestError', 'JetStreamNotEnabled']);
const TRANSIENT_CODES = new Set(['ECONNRESET', 'ECONNREFUSED', 'ECONNABORTED', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN', 'UND_ERR_SOCKET', 'UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);
const TRANSIENT_TEXT = /timed? ?out|timeout|ECONN|EPIPE|EAI_AGAIN|socket hang up|fetch failed|unreachable|unavailable|temporar|connection (?:closed|reset|refused)|no responders/i;

/**
 * Whether an error says "a dependency is away or slow" (retry later) rather than "this input
 * breaks the code": a RetryableError, a network or timeout error (by name, code or message),
 * anywhere in its cause chain.
 */
export function isTransientError(err: unknown): boolean {
  for (let e = err, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    if (e instanceof RetryableError) return true;
    const { name, code, message } = e as { name?: unknown; code?: unknown; message?: unknown };
    if (typeof name === 'string' && TRANSIENT_NAMES.has(name)) return true;
    if (typeof code === 'string' && TRANSIENT_CODES.has(code)) return true;
    if (TRANSIENT_TEXT.test(typeof message === 'string' ? message : String(e))) return true;
  }
  return false;
}

/** The kind of failure an attempt ended in: the error's class and its message without numbers (ids, sizes, times vary). */
function failureSignature(err: unknown): string {
  const name = err instanceof Error ? err.constructor.name || err.name : typeof err;
  return `${name}: ${errorMessage(err).replace(/\d+/g, '#').slice(0, 300)}`;
}

/**
 * The consumer runner: one durable pull consumer, explicit acks, bounded concurrency.
 * Acks are confirmed by the server (ackAck), so when stop() returns every finished message is
 * known acked and every unfinished one is not.
 * Mapping of outcomes (the one place it is decided):
 * - handler returns → publish its events, ack;
 * - stale revision or deleted document → ack without work;
 * - PermanentError / invalid data → publish `failed` (permanent or poison), ack;
 * - any other error → nak with backoff; on the last allowed delivery → `failed`, a copy to
 *   DEAD_LETTERS, ack. The class is `poison` when every delivery this process saw failed with
 *   the same non-transient error (the input breaks the code, say a parser bug: retrying cannot
 *   help), else `exhausted` (a dependency stayed away, or the failures differed);
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

  async function fail(event: DocumentEvent, m: JsMsg, cls: FailureClass, reason: string, ctx: HandlerContext): Promise<void> {
    if (cls !== 'permanent') await deadLetter(m, event.documentId, reason);
    if (opts.stage) await ctx.emit(follow(event, 'document.failed.v1', { stage: opts.stage, reason, class: cls }, 99));
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
        if (err instanceof PermanentError || err instanceof ZodError) {
          const cls: FailureClass = err instanceof PermanentError ? err.failureClass : 'poison';
          mlog.warn({ reason, class: cls }, 'permanent failure');
          await fail(event, m, cls, reason, ctx);
          await m.ackAck();
          return { outcome: 'failed', failureClass: cls, reason, ...about };
        } else if (deliveryCount >= maxDeliver) {
          const seen = remember(m.seq, failureSignature(err));
          const poison = !isTransientError(err) && seen.every((s) => s === seen[0]);
          const cls: FailureClass = poison ? 'poison' : 'exhausted';
          mlog.error({ reason, maxDeliver, class: cls, seenAttempts: seen.length }, 'retries exhausted: failed and dead-lettered');
          await fail(event, m, cls, poison ? `${reason} (the same error on every one of ${deliveryCount} attempts)` : `${reason} (after ${deliveryCount} attempts)`, ctx);
          await m.ackAck();
          attempts.delete(m.seq);
          return { outcome: 'dead-lettered', failureClass: cls, reason, ...about };
        } else {
          remember(m.seq, failureSignature(err));
          const delay = backoff(deliveryCount);
          mlog.warn({ reason, delayMs: delay, transient: isTransientError(err) }, 'failure: retrying');
          m.nak(delay);
          return { outcome: 'retried', reason, ...about };
        }
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
