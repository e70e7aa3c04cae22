import { isMemoryEvent, webhookDisabled, type KeyLifetime, type Webhook, type WebhookDelivery, type WebhookDeliveryJob } from '@memstream/contracts';
import { PermanentError, errorMessage } from '@memstream/kit';
import { retryDelay, type RetryPolicy } from './backoff.js';
import { signedHeaders } from './signing.js';

/** What came back from one POST. Network failures and timeouts throw; a refused address throws a PermanentError. */
export interface SendResult {
  status: number;
  /** The start of the body, for the delivery record. */
  body: string;
  /** From a Retry-After header, if the receiver sent one. */
  retryAfterMs?: number;
}

export type Sender = (req: { url: string; headers: Record<string, string>; body: string }) => Promise<SendResult>;

export interface DeliveryPorts {
  /** The registration, or null once it is deleted. */
  webhook(id: string): Promise<Webhook | null>;
  /** The record of the scoped key that registered a webhook (null when there is none): revoked or expired, its webhooks stop. */
  key(keyId: string): Promise<KeyLifetime | null>;
  send: Sender;
  /** Keep the delivery's state after this attempt (for GET /v3/webhooks/{id}/deliveries). */
  record(delivery: WebhookDelivery): Promise<void>;
  /** Copy a delivery that failed for good to DEAD_LETTERS. */
  deadLetter(job: WebhookDeliveryJob, delivery: WebhookDelivery): Promise<void>;
  now(): Date;
}

export type DeliveryOutcome =
  | { action: 'ack'; outcome: 'delivered' | 'failed' | 'dropped'; delivery: WebhookDelivery | null }
  | { action: 'retry'; delayMs: number; delivery: WebhookDelivery };

/**
 * One attempt of one delivery (`attempt` counts from 1, the server's delivery count): sign,
 * POST, and decide. 2xx → delivered. Anything else → retried after the backoff (or the
 * receiver's Retry-After, if longer), until the attempts run out or the address is refused →
 * failed, recorded, dead-lettered. The caller acks on `ack` and naks with the delay on `retry`.
 */
export async function deliver(job: WebhookDeliveryJob, attempt: number, ports: DeliveryPorts, policy: RetryPolicy): Promise<DeliveryOutcome> {
  const hook = await ports.webhook(job.webhookId);
  if (!hook) return { action: 'ack', outcome: 'dropped', delivery: null };
  // Its key revoked or expired: nothing more goes out, queued deliveries included (GET /v3/webhooks says why).
  if (hook.createdBy !== null && webhookDisabled(hook, await ports.key(hook.createdBy), ports.now())) return { action: 'ack', outcome: 'dropped', delivery: null };
  const started = ports.now();
  const body = JSON.stringify(job.event);
  const headers = signedHeaders(hook.secret, job.event.id, Math.floor(started.getTime() / 1000), body);
  let status: number | null = null;
  let error: string | null = null;
  let permanent = false;
  let retryAfterMs = 0;
  try {
    const r = await ports.send({ url: hook.url, headers, body });
    status = r.status;
    if (r.status < 200 || r.status > 299) {
      error = `HTTP ${r.status}${r.body ? `: ${r.body.slice(0, 200)}` : ''}`;
      retryAfterMs = r.retryAfterMs ?? 0;
    }
  } catch (err) {
    error = errorMessage(err);
    permanent = err instanceof PermanentError;
  }
  const base: WebhookDelivery = {
    id: job.event.id,
    webhookId: hook.id,
    type: job.event.type,
    documentId: job.event.documentId,
    memoryId: isMemoryEvent(job.event) ? job.event.memoryId : null,
    status: 'delivered',
    attempts: attempt,
    lastStatusCode: status,
    lastError: error,
    nextRetryAt: null,
    enqueuedAt: job.enqueuedAt,
    lastAttemptAt: started.toISOString(),
    deliveredAt: null,
  };
  if (error === null) {
    const delivery = { ...base, deliveredAt: ports.now().toISOString() };
    await ports.record(delivery);
    return { action: 'ack', outcome: 'delivered', delivery };
  }
  if (permanent || attempt >= policy.maxAttempts) {
    const delivery: WebhookDelivery = { ...base, status: 'failed', lastError: permanent ? error : `${error} (after ${attempt} attempts)` };
    await ports.record(delivery);
    await ports.deadLetter(job, delivery);
    return { action: 'ack', outcome: 'failed', delivery };
  }
  const delayMs = Math.min(policy.maxMs, Math.max(retryDelay(attempt, policy), retryAfterMs));
  const delivery: WebhookDelivery = { ...base, status: 'retrying', nextRetryAt: new Date(ports.now().getTime() + delayMs).toISOString() };
  await ports.record(delivery);
  return { action: 'retry', delayMs, delivery };
}
