import { z } from 'zod';
import { ContainerTag, DOCUMENT_STATUSES, FailureClass, Stage, type DocumentStatus } from './common.js';
import { EVENT_KIND_OF, type DocumentEvent } from './events.js';
import { STATUS_ON_ARRIVAL } from './pipeline.js';

/**
 * Outbound lifecycle events: what webhooks and GET /v3/events carry. A transition is a change of
 * a document's status as its owner sees it; metadata-only updates are not transitions.
 */
export const LIFECYCLE_TRANSITIONS = [...DOCUMENT_STATUSES, 'deleted'] as unknown as readonly [DocumentStatus | 'deleted', ...Array<DocumentStatus | 'deleted'>];
export const LifecycleTransition = z.enum(LIFECYCLE_TRANSITIONS);
export type LifecycleTransition = z.infer<typeof LifecycleTransition>;

/**
 * The transition a document event is, or null when it is none (embedded, metadata-updated): the
 * entrance announces its status with stage-started, a later stage's input sets that stage's
 * status when it arrives (STATUS_ON_ARRIVAL: extracted → chunking, chunked → embedding).
 */
export function transitionOf(event: DocumentEvent): LifecycleTransition | null {
  switch (event.type) {
    case 'document.submitted.v1':
      return 'queued';
    case 'document.stage-started.v1':
      return event.data.stage;
    case 'document.extracted.v1':
    case 'document.chunked.v1':
      return STATUS_ON_ARRIVAL[EVENT_KIND_OF[event.type]] ?? null;
    case 'document.indexed.v1':
      return 'done';
    case 'document.failed.v1':
      return 'failed';
    case 'document.deleted.v1':
      return 'deleted';
    default:
      return null;
  }
}

/**
 * One transition of one document: the webhook body and the SSE `data`. `id` is the id of the
 * document event behind it, the same on every retry and for every receiver: deduplicate by it.
 */
export const LifecycleEvent = z.object({
  id: z.string().min(1).max(128),
  /** `document.<status>`, e.g. document.done. */
  type: z.string().regex(/^document\.[a-z]+$/),
  documentId: z.string(),
  customId: z.string().nullable(),
  containerTags: z.array(z.string()),
  status: LifecycleTransition,
  revision: z.number().int().positive(),
  occurredAt: z.iso.datetime(),
  /** Only on document.failed: where and why. */
  error: z.object({ stage: Stage, reason: z.string(), class: FailureClass }).optional(),
});
export type LifecycleEvent = z.infer<typeof LifecycleEvent>;

/**
 * What a memory commit announces (from the MEMORY stream): a memory made, a new version of one,
 * or one forgotten. Links, added sources and expiry changes are in the log but not announced.
 */
export const MEMORY_EVENT_TYPES = ['memory.created', 'memory.updated', 'memory.forgotten'] as const;
export const MemoryEventType = z.enum(MEMORY_EVENT_TYPES);
export type MemoryEventType = z.infer<typeof MemoryEventType>;

/**
 * One memory change of one container tag: the webhook body and the SSE `data`. `id` is derived
 * from the commit and the change's place in it, the same on every retry and replay: deduplicate by it.
 */
export const MemoryLifecycleEvent = z.object({
  id: z.string().min(1).max(128),
  type: MemoryEventType,
  memoryId: z.string(),
  containerTag: z.string(),
  /** `[containerTag]`: the same field document events carry, so one tag filter reads both. */
  containerTags: z.array(z.string()),
  /** The statement (created, updated); null on memory.forgotten, which the log records by id. */
  memory: z.string().nullable(),
  /** 1 on memory.created, 2… on memory.updated; null on memory.forgotten. */
  version: z.number().int().positive().nullable(),
  parentMemoryId: z.string().nullable(),
  rootMemoryId: z.string().nullable(),
  /** The document it came from (extraction, direct write with a documentId, a deleted source); null for user updates and forgets. */
  documentId: z.string().nullable(),
  /** What made the commit: extraction, direct-write, update, forget, forget-matching, document-deleted. */
  cause: z.string(),
  /** Only on memory.forgotten: why (`user`, `matching`, `source-deleted`, `statement`) and the reason given, if any. */
  forgotten: z.object({ cause: z.string(), reason: z.string().nullable() }).optional(),
  occurredAt: z.iso.datetime(),
});
export type MemoryLifecycleEvent = z.infer<typeof MemoryLifecycleEvent>;

/** Everything webhooks and GET /v3/events carry: document transitions and memory changes. */
export const OutboundEvent = z.union([LifecycleEvent, MemoryLifecycleEvent]);
export type OutboundEvent = z.infer<typeof OutboundEvent>;

/**
 * What a webhook's `events` and the SSE `events=` filter name: a document transition (`done`, …)
 * or a memory event type (`memory.created`, …). Memory events reach only those that name them,
 * so a receiver written for document transitions never gets a body it does not know.
 */
export const EVENT_NAMES = [...LIFECYCLE_TRANSITIONS, ...MEMORY_EVENT_TYPES] as unknown as readonly [LifecycleTransition | MemoryEventType, ...Array<LifecycleTransition | MemoryEventType>];
export const EventName = z.enum(EVENT_NAMES);
export type EventName = z.infer<typeof EventName>;

/** The name an event is subscribed by: a document event's status, a memory event's type. */
export function eventNameOf(event: OutboundEvent): EventName {
  return isMemoryEvent(event) ? event.type : event.status;
}

export function isMemoryEvent(event: OutboundEvent): event is MemoryLifecycleEvent {
  return event.type.startsWith('memory.');
}

/** Standard Webhooks secrets: `whsec_` and the base64 of the HMAC key (16 to 64 bytes). */
export const WEBHOOK_SECRET_PATTERN = /^whsec_[A-Za-z0-9+/]+={0,2}$/;
export const WebhookSecret = z
  .string()
  .regex(WEBHOOK_SECRET_PATTERN, 'secret must be "whsec_" followed by base64 (e.g. whsec_ + 32 random bytes in base64); omit it to have one generated')
  .refine((s) => {
    const n = Buffer.from(s.slice('whsec_'.length), 'base64').byteLength;
    return n >= 16 && n <= 64;
  }, 'secret must encode 16 to 64 bytes after "whsec_"');

/** A receiver URL: http or https, with a host, no credentials in it. Where it may point is checked at delivery. */
export const WebhookUrl = z
  .string({ error: 'url is required and must be a string' })
  .max(2048, 'url must be at most 2048 characters')
  .superRefine((s, ctx) => {
    let u: URL;
    try {
      u = new URL(s);
    } catch {
      ctx.addIssue({ code: 'custom', message: 'url must be an absolute http or https URL' });
      return;
    }
    if (u.protocol !== 'http:' && u.protocol !== 'https:') ctx.addIssue({ code: 'custom', message: `url must use http or https, not ${u.protocol.replace(/:$/, '')}` });
    else if (!u.hostname) ctx.addIssue({ code: 'custom', message: 'url must name a host' });
    if (u.username || u.password) ctx.addIssue({ code: 'custom', message: 'url must not contain credentials; receivers verify the signature instead' });
  });

/** POST /v3/webhooks. */
export const CreateWebhookRequest = z.strictObject({
  url: WebhookUrl,
  /** Only documents with at least one of these tags; omitted or empty: every document (global, admin key only). */
  containerTags: z.array(ContainerTag).max(100).optional(),
  /** Which transitions and memory events; default every document transition (memory events only when named). */
  events: z.array(EventName).min(1, 'events must name at least one transition or memory event, or be omitted for every document transition').optional(),
  /** Generated when absent, and shown only in this response. */
  secret: WebhookSecret.optional(),
  description: z.string().max(500).optional(),
});
export type CreateWebhookRequest = z.infer<typeof CreateWebhookRequest>;

/** A registration as stored (NATS KV, bucket WEBHOOKS_BUCKET). */
export const Webhook = z.object({
  id: z.string(),
  url: z.string(),
  /** Empty: global. */
  containerTags: z.array(z.string()),
  events: z.array(EventName),
  secret: z.string(),
  description: z.string().nullable(),
  createdAt: z.iso.datetime(),
  /** The scoped key that registered it, or null for the admin key. */
  createdBy: z.string().nullable(),
});
export type Webhook = z.infer<typeof Webhook>;

/** The NATS KV bucket of scoped API keys (written by the gateway; the notifier reads whether a webhook's key still holds). */
export const KEYS_BUCKET = 'memstream-keys';

/** What decides whether a scoped key still holds: a slice of its stored record. */
export interface KeyLifetime {
  revokedAt: string | null;
  expiresAt: string | null;
}

/** Why a webhook delivers nothing any more: the scoped key that registered it was revoked or has expired. */
export const WebhookDisabled = z.object({
  reason: z.enum(['key_revoked', 'key_expired', 'key_missing']),
  message: z.string(),
  /** When it stopped (the revocation or the expiry), null when unknown. */
  since: z.string().nullable(),
});
export type WebhookDisabled = z.infer<typeof WebhookDisabled>;

/**
 * Whether a webhook still delivers, from the key that registered it (`key`: its record, null when
 * there is none): a key's revocation or expiry ends its webhooks as it ends its requests and its
 * event streams. The admin key's webhooks (createdBy null) never end this way. The gateway's
 * listings and the notifier's deliveries both decide with this, from the same key record.
 */
export function webhookDisabled(hook: Pick<Webhook, 'createdBy'>, key: KeyLifetime | null, now: Date): WebhookDisabled | null {
  if (hook.createdBy === null) return null;
  if (key === null) return { reason: 'key_missing', message: `the API key ${hook.createdBy} that registered it no longer exists`, since: null };
  if (key.revokedAt !== null) return { reason: 'key_revoked', message: `the API key that registered it was revoked at ${key.revokedAt}`, since: key.revokedAt };
  if (key.expiresAt !== null && Date.parse(key.expiresAt) <= now.getTime()) {
    return { reason: 'key_expired', message: `the API key that registered it expired at ${key.expiresAt}`, since: key.expiresAt };
  }
  return null;
}

/** What GET /v3/webhooks shows: no secret, and whether it is disabled (null while it delivers). */
export const WebhookResponse = Webhook.omit({ secret: true }).extend({ disabled: WebhookDisabled.nullable() });
export type WebhookResponse = z.infer<typeof WebhookResponse>;
/** What POST /v3/webhooks answers: the secret, this once. */
export const CreateWebhookResponse = Webhook;
export const ListWebhooksResponse = z.object({ webhooks: z.array(WebhookResponse) });
export type ListWebhooksResponse = z.infer<typeof ListWebhooksResponse>;

/** One queued delivery (stream WEBHOOK_DELIVERIES, subject hook.<webhookId>, Nats-Msg-Id `${event.id}:${webhookId}`). */
export const WebhookDeliveryJob = z.object({
  webhookId: z.string(),
  event: OutboundEvent,
  enqueuedAt: z.iso.datetime(),
});
export type WebhookDeliveryJob = z.infer<typeof WebhookDeliveryJob>;

export const DELIVERY_STATUSES = ['retrying', 'delivered', 'failed'] as const;
export const DeliveryStatus = z.enum(DELIVERY_STATUSES);
export type DeliveryStatus = z.infer<typeof DeliveryStatus>;

/** The state of one (event, webhook) delivery after its latest attempt (KV bucket WEBHOOK_DELIVERIES_BUCKET). */
export const WebhookDelivery = z.object({
  /** The event id: the body's `id` and the `webhook-id` header. */
  id: z.string(),
  webhookId: z.string(),
  type: z.string(),
  /** The document of a transition, the source document of a memory event (null when it has none). */
  documentId: z.string().nullable(),
  /** Only for memory events. */
  memoryId: z.string().nullable().optional(),
  status: DeliveryStatus,
  attempts: z.number().int().nonnegative(),
  /** The receiver's HTTP status on the latest attempt, null when none came back (refused, timeout, DNS). */
  lastStatusCode: z.number().int().nullable(),
  lastError: z.string().nullable(),
  /** When the next attempt is due; null once delivered or failed. */
  nextRetryAt: z.iso.datetime().nullable(),
  /** When the transition was queued for this webhook. */
  enqueuedAt: z.iso.datetime(),
  lastAttemptAt: z.iso.datetime(),
  deliveredAt: z.iso.datetime().nullable(),
});
export type WebhookDelivery = z.infer<typeof WebhookDelivery>;

export const ListDeliveriesResponse = z.object({
  webhookId: z.string(),
  deliveries: z.array(WebhookDelivery),
  /** Over every delivery of the window (`since`), not only the ones listed. */
  counts: z.object({ retrying: z.number().int(), delivered: z.number().int(), failed: z.number().int() }),
});
export type ListDeliveriesResponse = z.infer<typeof ListDeliveriesResponse>;
