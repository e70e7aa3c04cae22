import { randomBytes } from 'node:crypto';
import { isIP } from 'node:net';
import {
  webhookDisabled,
  CreateWebhookRequest,
  type KeyLifetime,
  DeliveryStatus,
  EVENT_NAMES,
  LIFECYCLE_TRANSITIONS,
  type ListDeliveriesResponse,
  type ListWebhooksResponse,
  type Webhook,
  type WebhookDelivery,
  type WebhookResponse,
} from '@memstream/contracts';
import { AppError, NotFoundError, ValidationError, isForbiddenAddress, newId } from '@memstream/kit';

/** Webhooks one scoped key may hold (docs/limits.md). */
export const WEBHOOKS_PER_KEY = 25;
/**
 * Webhooks of scoped keys that may follow one container tag, whichever keys made them
 * (docs/limits.md): each one is a POST for every transition of the tag's documents, so several
 * keys of one tag cannot multiply a document's deliveries past this between them.
 */
export const WEBHOOKS_PER_TAG = 25;
import { owns, readTags, tagScope, type Principal } from './scope.js';

/** Who is calling, as the auth middleware leaves it on res.locals.principal. */
export type Caller = Principal;

/** Registrations and the record of their deliveries (NATS KV, shared with the notifier). */
export interface WebhookStore {
  put(hook: Webhook): Promise<void>;
  get(id: string): Promise<Webhook | null>;
  list(): Promise<Webhook[]>;
  /** Remove the registration, its queued deliveries and their records. */
  delete(id: string): Promise<void>;
  /** The latest state of each delivery last attempted since `since` (a listing reads only that much of the record). */
  deliveries(webhookId: string, since: Date): Promise<WebhookDelivery[]>;
}

export interface WebhookPorts {
  store: WebhookStore;
  now(): Date;
  /** MEMSTREAM_WEBHOOK_ALLOW_PRIVATE: accept receivers on loopback and private addresses. */
  allowPrivate: boolean;
  /** The record of a scoped key, for whether its webhooks are disabled (absent: no scoped keys, nothing disabled). */
  key?: (keyId: string) => Promise<KeyLifetime | null>;
}

/** A scoped key sees and manages only webhooks confined to its own tags; global ones are the admin's. */
export function visibleTo(hook: Webhook, caller: Caller): boolean {
  return owns(tagScope(caller), hook.containerTags);
}

/** The registration as listed: no secret, and disabled (with why) once the key that made it is revoked or expired. */
async function shown(ports: WebhookPorts, hook: Webhook): Promise<WebhookResponse> {
  const { secret: _secret, ...rest } = hook;
  const disabled = ports.key && hook.createdBy !== null ? webhookDisabled(hook, await ports.key(hook.createdBy), ports.now()) : null;
  return { ...rest, disabled };
}

/** The same URL (as the URL parser spells it) for the same tags, from the same key, is one registration. */
function sameRegistration(a: Pick<Webhook, 'url' | 'containerTags' | 'createdBy'>, b: Pick<Webhook, 'url' | 'containerTags' | 'createdBy'>): boolean {
  const tags = (t: string[]) => JSON.stringify([...t].sort());
  return a.createdBy === b.createdBy && new URL(a.url).href === new URL(b.url).href && tags(a.containerTags) === tags(b.containerTags);
}

/** POST /v3/webhooks → the registration with its secret, shown this once. */
export async function createWebhook(ports: WebhookPorts, caller: Caller, body: unknown): Promise<Webhook> {
  const req = CreateWebhookRequest.parse(body ?? {});
  const url = new URL(req.url);
  // A trailing dot names the same host ('localhost.' is localhost): stripped before any check.
  const host = url.hostname.replace(/^\[|\]$/g, '').replace(/\.+$/, '');
  if (!ports.allowPrivate) {
    // Names are checked when a delivery resolves them; literal addresses and localhost can be refused now.
    // Generic on purpose, like the extractor's and the notifier's refusals: which rule matched is not the tenant's business.
    const refused = host === 'localhost' || host.endsWith('.localhost') || (isIP(host) !== 0 && isForbiddenAddress(host) !== null);
    if (refused) throw new ValidationError('Invalid request', 'url: not allowed: it is a private or reserved address; receivers must be on public addresses (the operator can set MEMSTREAM_WEBHOOK_ALLOW_PRIVATE=true)');
  }
  // No tags: global for the admin key, the key's own tags for a scoped key; a tag outside them is 403.
  const containerTags = readTags(tagScope(caller), [...new Set(req.containerTags ?? [])]) ?? [];
  const createdBy = caller.kind === 'scoped' ? caller.keyId : null;
  const all = await ports.store.list();
  // A second registration of the same URL would deliver every event twice: refused, naming the first.
  const twin = all.find((h) => sameRegistration(h, { url: req.url, containerTags, createdBy }));
  if (twin) {
    throw new AppError('webhook_exists', 'Webhook exists', 409, `this API key already has webhook ${twin.id} for this url and these container tags; delete it first to change its events or secret`);
  }
  if (caller.kind === 'scoped') {
    // Every registration multiplies each document's deliveries: one key gets a bounded number.
    const held = all.filter((h) => h.createdBy === caller.keyId).length;
    if (held >= WEBHOOKS_PER_KEY) {
      throw new AppError('too_many_webhooks', 'Too many webhooks', 429, `this API key already has ${held} webhooks (at most ${WEBHOOKS_PER_KEY}); delete one first, or follow several tags with one webhook (containerTags)`);
    }
    for (const tag of containerTags) {
      const following = all.filter((h) => h.createdBy !== null && h.containerTags.includes(tag)).length;
      if (following >= WEBHOOKS_PER_TAG) {
        throw new AppError(
          'too_many_webhooks',
          'Too many webhooks',
          429,
          `container tag ${JSON.stringify(tag)} already has ${following} webhooks of API keys following it (at most ${WEBHOOKS_PER_TAG} per tag, whichever keys made them); delete one first`,
        );
      }
    }
  }
  const hook: Webhook = {
    id: 'wh_' + newId(),
    url: req.url,
    containerTags,
    // Omitted: every document transition. Memory events go only to webhooks that name them.
    events: req.events ? EVENT_NAMES.filter((e) => req.events!.includes(e)) : [...LIFECYCLE_TRANSITIONS],
    secret: req.secret ?? 'whsec_' + randomBytes(32).toString('base64'),
    description: req.description ?? null,
    createdAt: ports.now().toISOString(),
    createdBy,
  };
  await ports.store.put(hook);
  return hook;
}

/** GET /v3/webhooks: never the secrets. */
export async function listWebhooks(ports: WebhookPorts, caller: Caller): Promise<ListWebhooksResponse> {
  const all = await ports.store.list();
  const visible = all.filter((h) => visibleTo(h, caller)).sort((a, b) => a.createdAt.localeCompare(b.createdAt));
  return { webhooks: await Promise.all(visible.map((h) => shown(ports, h))) };
}

async function visibleHook(ports: WebhookPorts, caller: Caller, id: string): Promise<Webhook> {
  const hook = await ports.store.get(id);
  // Another key's webhook is as absent as a deleted one: its existence is not this key's business.
  if (!hook || !visibleTo(hook, caller)) throw new NotFoundError('Not found', `no webhook ${JSON.stringify(id)}`);
  return hook;
}

export async function getWebhook(ports: WebhookPorts, caller: Caller, id: string): Promise<WebhookResponse> {
  return shown(ports, await visibleHook(ports, caller, id));
}

/** DELETE /v3/webhooks/{id}: nothing more is delivered to it, including what was queued. */
export async function deleteWebhook(ports: WebhookPorts, caller: Caller, id: string): Promise<void> {
  await visibleHook(ports, caller, id);
  await ports.store.delete(id);
}

/**
 * GET /v3/webhooks/{id}/deliveries?status=&limit=&since=: the deliveries attempted since `since`
 * (default: the last 24 hours; records are kept 7 days), newest attempt first, with status,
 * attempts, last error and the next retry; counts over every delivery of that window.
 */
export async function listDeliveries(ports: WebhookPorts, caller: Caller, id: string, query: Record<string, unknown>): Promise<ListDeliveriesResponse> {
  await visibleHook(ports, caller, id);
  let status: DeliveryStatus | undefined;
  if (query.status !== undefined) {
    const s = DeliveryStatus.safeParse(query.status);
    if (!s.success) throw new ValidationError('Invalid request', `status: must be one of ${DeliveryStatus.options.join(', ')}`);
    status = s.data;
  }
  let limit = 100;
  if (query.limit !== undefined) {
    limit = Number(query.limit);
    if (!Number.isInteger(limit) || limit < 1 || limit > 1000) throw new ValidationError('Invalid request', 'limit: must be an integer from 1 to 1000');
  }
  let since = new Date(ports.now().getTime() - 24 * 3600_000);
  if (query.since !== undefined) {
    const t = typeof query.since === 'string' ? Date.parse(query.since) : NaN;
    if (!Number.isFinite(t)) throw new ValidationError('Invalid request', 'since: must be an ISO 8601 date-time, e.g. 2026-01-01T00:00:00Z');
    since = new Date(t);
  }
  const all = (await ports.store.deliveries(id, since)).filter((d) => Date.parse(d.lastAttemptAt) >= since.getTime());
  const counts = { retrying: 0, delivered: 0, failed: 0 };
  for (const d of all) counts[d.status]++;
  const deliveries = all
    .filter((d) => !status || d.status === status)
    .sort((a, b) => b.lastAttemptAt.localeCompare(a.lastAttemptAt))
    .slice(0, limit);
  return { webhookId: id, deliveries, counts };
}
