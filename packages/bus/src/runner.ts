import type { JsMsg } from '@nats-io/jetstream';
import { headers as natsHeaders } from '@nats-io/nats-core';
import { CONSUMERS, STREAM_DOCS, deadLetterSubject, type ConsumerName, type DocumentEvent, type EventKind, type FailureClass, type Stage } from '@memstream/contracts';
import { PermanentError, errorMessage, type Logger } from '@memstream/kit';
import { ZodError } from 'zod';
import type { Bus } from './connect.js';
import { decodeEvent, follow, headersToRecord, latestRevision, publishEvent } from './events.js';
import { DEFAULT_POLICIES } from './topology.js';

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
  /** Only these event kinds are decoded and handled; others are acked unread (a consumer on doc.> that ignores bulky kinds). */
  kinds?: readonly EventKind[];
  maxDeliver?: number;
  ackWaitMs?: number;
  /** Delay before the n-th redelivery (n counts from 1). */
  backoffMs?: (deliveryCount: number) => number;
  onOutcome?: (outcome: Outcome, event: DocumentEvent | null, ms: number) => void;
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

/**
 * The consumer runner: one durable pull consumer, explicit acks, bounded concurrency.
 * Acks are confirmed by the server (ackAck), so when stop() returns every finished message is
 * known acked and every unfinished one is not.
 * Mapping of outcomes (the one place it is decided):
 * - handler returns → publish its events, ack;
 * - stale revision or deleted document → ack without work;
 * - PermanentError / invalid data → publish `failed` (permanent or poison), ack;
 * - any other error → nak with backoff; on the last allowed delivery → `failed` (exhausted),
 *   a copy to DEAD_LETTERS, ack;
 * - an undecodable message → copy to DEAD_LETTERS, term.
 */
export function runConsumer(opts: RunnerOptions): RunningConsumer {
  const { bus, consumer: name, log } = opts;
  const policy = DEFAULT_POLICIES[name];
  const maxDeliver = opts.maxDeliver ?? policy.maxDeliver;
  const ackWaitMs = opts.ackWaitMs ?? policy.ackWaitMs;
  const backoff = opts.backoffMs ?? defaultBackoff;
  const concurrency = Math.max(1, opts.concurrency ?? 4);
  const inflight = new Set<Promise<void>>();
  let stopping = false;
  let current: { stop(): void } | null = null;
  let wake: (() => void) | null = null;

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
    const deliveryCount = m.info.deliveryCount;
    const trace = headersToRecord(m.headers);
    const [, documentId = 'unknown', kind] = m.subject.split('.');
    if (opts.kinds && !opts.kinds.includes(kind as EventKind)) {
      await m.ackAck();
      return;
    }
    let event: DocumentEvent;
    try {
      event = await decodeEvent(bus, m.data);
    } catch (err) {
      if (err instanceof ZodError || err instanceof SyntaxError) {
        log.error({ err: errorMessage(err), subject: m.subject, seq: m.seq }, 'undecodable message: dead-lettered');
        try {
          await deadLetter(m, documentId, `undecodable: ${errorMessage(err)}`);
          // No reason string: '+TERM <reason>' needs nats-server 2.10; 2.9 would leave the message pending.
          m.term();
        } catch {
          m.nak(backoff(deliveryCount));
        }
        opts.onOutcome?.('dead-lettered', null, performance.now() - started);
        return;
      }
      // The object store could not be read: transient.
      log.warn({ err: errorMessage(err), seq: m.seq }, 'could not read message: retrying');
      m.nak(backoff(deliveryCount));
      opts.onOutcome?.('retried', null, performance.now() - started);
      return;
    }
    const mlog = log.child({ documentId: event.documentId, type: event.type, revision: event.revision, seq: m.seq, deliveryCount });
    const ctx: HandlerContext = {
      msg: { seq: m.seq, deliveryCount, subject: m.subject },
      log: mlog,
      emit: async (e) => {
        await publishEvent(bus, e, { headers: trace });
      },
    };
    // Keep the message ours while long work runs; a dead worker still loses it after ackWait.
    const keepAlive = setInterval(() => m.working(), Math.max(1_000, Math.floor(ackWaitMs / 3)));
    try {
      if (opts.skipStale) {
        const latest = await latestRevision(bus, event.documentId);
        if (latest.deleted || event.revision < latest.revision) {
          await m.ackAck();
          mlog.debug({ latest: latest.revision, deleted: latest.deleted }, 'stale revision: skipped');
          opts.onOutcome?.('skipped-stale', event, performance.now() - started);
          return;
        }
      }
      const out = (await opts.handle(event, ctx)) ?? [];
      for (const e of out) await ctx.emit(e);
      await m.ackAck();
      mlog.debug({ emitted: out.map((e) => e.type), ms: Math.round(performance.now() - started) }, 'event handled');
      opts.onOutcome?.('handled', event, performance.now() - started);
    } catch (err) {
      const reason = errorMessage(err);
      try {
        if (err instanceof PermanentError || err instanceof ZodError) {
          const cls: FailureClass = err instanceof PermanentError ? err.failureClass : 'poison';
          mlog.warn({ reason, class: cls }, 'permanent failure');
          await fail(event, m, cls, reason, ctx);
          await m.ackAck();
          opts.onOutcome?.('failed', event, performance.now() - started);
        } else if (deliveryCount >= maxDeliver) {
          mlog.error({ reason, maxDeliver }, 'retries exhausted: failed and dead-lettered');
          await fail(event, m, 'exhausted', `${reason} (after ${deliveryCount} attempts)`, ctx);
          await m.ackAck();
          opts.onOutcome?.('dead-lettered', event, performance.now() - started);
        } else {
          const delay = backoff(deliveryCount);
          mlog.warn({ reason, delayMs: delay }, 'transient failure: retrying');
          m.nak(delay);
          opts.onOutcome?.('retried', event, performance.now() - started);
        }
      } catch (e2) {
        // Could not even record the failure (broker away): let it come back.
        mlog.warn({ err: errorMessage(e2) }, 'could not record failure: retrying');
        m.nak(backoff(deliveryCount));
        opts.onOutcome?.('retried', event, performance.now() - started);
      }
    } finally {
      clearInterval(keepAlive);
    }
  }

  async function loop(): Promise<void> {
    while (!stopping) {
      try {
        const c = await bus.js.consumers.get(STREAM_DOCS, CONSUMERS[name].durable);
        const messages = await c.consume({ max_messages: concurrency * 2 });
        current = messages;
        for await (const m of messages) {
          if (stopping) {
            // Not started: hand it back at once rather than sit on it until ack_wait.
            m.nak();
            continue;
          }
          while (inflight.size >= concurrency) await Promise.race(inflight);
          if (stopping) {
            m.nak();
            continue;
          }
          const p: Promise<void> = processOne(m)
            .catch((err) => log.error({ err }, 'unexpected runner error'))
            .finally(() => inflight.delete(p));
          inflight.add(p);
        }
      } catch (err) {
        if (stopping) break;
        log.warn({ err: errorMessage(err), consumer: name }, 'consumer loop interrupted: retrying in 1 s');
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
    async stop() {
      stopping = true;
      current?.stop();
      wake?.();
      await done;
    },
  };
}
