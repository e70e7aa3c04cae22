import { pullLoop, type Bus, type PullLoop } from '@memstream/bus';
import { STREAM_WEBHOOK_DELIVERIES, WEBHOOK_DELIVERY_CONSUMER, WebhookDeliveryJob, deadLetterSubject, type WebhookDelivery } from '@memstream/contracts';
import { errorMessage, type Logger } from '@memstream/kit';
import type { DeliveryOutcome } from '../handlers/deliver.js';
import { keyedSerializer } from '../handlers/serialize.js';

export interface DeliveryRunnerOptions {
  bus: Bus;
  log: Logger;
  concurrency: number;
  /** One attempt of one delivery; `attempt` is the server's delivery count. */
  handle(job: WebhookDeliveryJob, attempt: number): Promise<DeliveryOutcome>;
  /** Every finished attempt: what became of it (for metrics). */
  onOutcome?: (result: 'delivered' | 'retrying' | 'failed' | 'dropped' | 'error', ms: number) => void;
}

const enc = new TextEncoder();
const dec = new TextDecoder();

/** A delivery message's body, JSON-parsed once for both the ordering key and the job (or why it would not parse). */
type Parsed = { ok: true; value: unknown } | { ok: false; err: unknown };

/** A JetStream message as the consumer hands it out (the notifier has no direct @nats-io/jetstream dependency). */
type JsMsg = NonNullable<Awaited<ReturnType<Awaited<ReturnType<Bus['js']['consumers']['get']>>['next']>>>;

/** Copy a delivery that failed for good to DEAD_LETTERS: the job, its last state and why, under dead.notifier-deliveries.<webhookId>. */
export async function deadLetterDelivery(bus: Bus, job: WebhookDeliveryJob, delivery: WebhookDelivery): Promise<void> {
  await bus.js.publish(deadLetterSubject(WEBHOOK_DELIVERY_CONSUMER, job.webhookId), enc.encode(JSON.stringify({ ...job, delivery, reason: delivery.lastError })), {
    msgID: `dead:${WEBHOOK_DELIVERY_CONSUMER}:${job.event.id}:${job.webhookId}`,
  });
}

/** A message that is no delivery job at all: kept as it came, with why. */
async function deadLetterRaw(bus: Bus, raw: Uint8Array, reason: string, seq: number): Promise<void> {
  await bus.js.publish(deadLetterSubject(WEBHOOK_DELIVERY_CONSUMER, 'unknown'), enc.encode(JSON.stringify({ raw: new TextDecoder().decode(raw), reason })), {
    msgID: `dead:${WEBHOOK_DELIVERY_CONSUMER}:seq:${seq}`,
  });
}

/**
 * The delivery consumer (WEBHOOK_DELIVERIES, durable `notifier-deliveries`, shared by replicas):
 * bounded concurrency, explicit acks confirmed by the server; a retry is a nak with the backoff
 * as its delay, so a waiting delivery costs no process anything. stop() returns unstarted
 * messages at once and waits for POSTs in flight.
 */
export function runDeliveries(opts: DeliveryRunnerOptions): { stop(): Promise<void>; done: Promise<void> } {
  const { bus, log } = opts;
  // Set below, before the first message can arrive; processOne asks it whether stop() was called.
  let loopHandle: PullLoop | null = null;

  async function processOne(m: JsMsg, parsed: Parsed): Promise<void> {
    // Waited behind another delivery of its document while stop() was called: hand it back.
    if (loopHandle?.stopping) {
      m.nak();
      return;
    }
    const started = performance.now();
    const attempt = m.info.deliveryCount;
    let job: WebhookDeliveryJob;
    try {
      if (!parsed.ok) throw parsed.err;
      job = WebhookDeliveryJob.parse(parsed.value);
    } catch (err) {
      log.error({ err: errorMessage(err), seq: m.seq }, 'undecodable delivery: dead-lettered');
      try {
        await deadLetterRaw(bus, m.data, `undecodable: ${errorMessage(err)}`, m.seq);
        // Acked rather than terminated: in a work-queue stream an ack is what removes it.
        await m.ackAck();
      } catch {
        m.nak(5_000);
      }
      opts.onOutcome?.('error', performance.now() - started);
      return;
    }
    const mlog = log.child({ webhookId: job.webhookId, eventId: job.event.id, type: job.event.type, documentId: job.event.documentId, ...('memoryId' in job.event ? { memoryId: job.event.memoryId } : {}), attempt });
    try {
      const out = await opts.handle(job, attempt);
      if (out.action === 'ack') {
        await m.ackAck();
        if (out.outcome === 'failed') mlog.warn({ lastError: out.delivery?.lastError }, 'webhook delivery failed for good: dead-lettered');
        else mlog.debug({ outcome: out.outcome, ms: Math.round(performance.now() - started) }, 'webhook delivery done');
      } else {
        m.nak(out.delayMs);
        mlog.info({ lastError: out.delivery.lastError, delayMs: out.delayMs }, 'webhook delivery failed: retrying');
      }
      opts.onOutcome?.(out.action === 'ack' ? out.outcome : 'retrying', performance.now() - started);
    } catch (err) {
      // Could not even record the attempt (broker away): let it come back.
      mlog.warn({ err: errorMessage(err) }, 'delivery attempt could not be completed: retrying');
      m.nak(Math.min(30_000, 1_000 * attempt));
      opts.onOutcome?.('error', performance.now() - started);
    }
  }

  // One document's deliveries to one webhook go out one at a time, in queue order, and so do one
  // container tag's memory events (best effort: a retry, or another replica, can still reorder them).
  const serial = keyedSerializer();
  function inOrder(m: JsMsg): Promise<void> {
    let parsed: Parsed;
    try {
      parsed = { ok: true, value: JSON.parse(dec.decode(m.data)) };
    } catch (err) {
      // processOne dead-letters it
      parsed = { ok: false, err };
    }
    let key = `seq:${m.seq}`;
    const j = parsed.ok ? (parsed.value as { webhookId?: unknown; event?: { documentId?: unknown; memoryId?: unknown; containerTag?: unknown } | null } | null) : null;
    if (typeof j?.webhookId === 'string' && typeof j.event?.memoryId === 'string' && typeof j.event.containerTag === 'string') key = `${j.webhookId}:mem:${j.event.containerTag}`;
    else if (typeof j?.webhookId === 'string' && typeof j.event?.documentId === 'string') key = `${j.webhookId}:${j.event.documentId}`;
    return serial(key, () => processOne(m, parsed));
  }

  // The same batched pull loop as the document consumers; each delivery of a batch goes out, is
  // settled and frees its place on its own, so a slow endpoint holds back only its own deliveries.
  loopHandle = pullLoop({
    bus,
    stream: STREAM_WEBHOOK_DELIVERIES,
    durable: WEBHOOK_DELIVERY_CONSUMER,
    capacity: opts.concurrency,
    batch: { size: opts.concurrency, waitMs: 5 },
    log,
    handle: async (batch, settled) => void (await Promise.all(batch.map((m) => inOrder(m).finally(() => settled(m))))),
  });
  return loopHandle;
}
