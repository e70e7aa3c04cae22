import type { Handler } from '@memstream/bus';
import { keyedSerializer } from './serialize.js';
import { eventNameOf, transitionOf, type DocumentEvent, type LifecycleEvent, type LifecycleTransition, type OutboundEvent, type Webhook, type WebhookDeliveryJob } from '@memstream/contracts';

/** What the notifier remembers of a document: what a later event, and above all a deletion's tombstone, does not carry. */
export interface DocNote {
  customId: string | null;
  containerTags: string[];
  /** The metadata version the tags come from: a higher one wins, whatever order events arrive in. */
  tagsVersion: number;
  /** The newest revision submitted. */
  revision: number;
}

/** Notes per document (NATS KV in production, a Map in tests). `note` merges: newest revision, tags of the highest version. */
export interface DocNotes {
  get(documentId: string): Promise<DocNote | null>;
  note(documentId: string, patch: Partial<DocNote> & { tagsVersion?: number }): Promise<DocNote>;
  forget(documentId: string): Promise<void>;
}

export interface TransitionPorts {
  notes: DocNotes;
  /** The document as the log still has it (last submitted and metadata-updated), for a document with no note. */
  fromLog(documentId: string): Promise<DocNote | null>;
  /** The registrations right now. */
  webhooks(): readonly Webhook[];
  /** Append to LIFECYCLE (deduplicated by the event id); the stream sequence. */
  publishLifecycle(event: LifecycleEvent): Promise<number>;
  /** A deleted document's earlier transitions leave LIFECYCLE too (deletion is permanent), all but `keepFromSeq` on. */
  purgeLifecycle(documentId: string, keepFromSeq: number): Promise<void>;
  /** Queue one delivery (deduplicated by `${event.id}:${webhookId}`). */
  enqueue(job: WebhookDeliveryJob): Promise<void>;
  now(): Date;
}

/** The merge rule of DocNotes, shared by every adapter. */
export function mergeNote(prev: DocNote | null, patch: Partial<DocNote>): DocNote {
  const base: DocNote = prev ?? { customId: null, containerTags: [], tagsVersion: -1, revision: 0 };
  const tagsWin = patch.containerTags !== undefined && (patch.tagsVersion ?? 0) >= base.tagsVersion;
  return {
    customId: patch.customId !== undefined ? patch.customId : base.customId,
    containerTags: tagsWin ? [...patch.containerTags!] : base.containerTags,
    tagsVersion: tagsWin ? (patch.tagsVersion ?? 0) : base.tagsVersion,
    revision: Math.max(base.revision, patch.revision ?? 0),
  };
}

/** Whether a webhook wants this transition of this document, or this memory event of this tag. */
export function webhookMatches(hook: Webhook, event: OutboundEvent): boolean {
  if (!hook.events.includes(eventNameOf(event))) return false;
  // Registered after it happened: a webhook announces what comes after it, never history.
  if (Date.parse(event.occurredAt) < Date.parse(hook.createdAt)) return false;
  if (hook.containerTags.length === 0) return true;
  return hook.containerTags.some((t) => event.containerTags.includes(t));
}

export function lifecycleEventOf(event: DocumentEvent, status: LifecycleTransition, note: DocNote | null): LifecycleEvent {
  return {
    id: event.id,
    type: `document.${status}`,
    documentId: event.documentId,
    customId: note?.customId ?? null,
    containerTags: note?.containerTags ?? [],
    status,
    revision: event.revision,
    occurredAt: event.occurredAt,
    ...(event.type === 'document.failed.v1' ? { error: { stage: event.data.stage, reason: event.data.reason, class: event.data.class } } : {}),
  };
}

/**
 * Document events → transitions: each one appended to LIFECYCLE (what GET /v3/events streams)
 * and queued once for every webhook that wants it. Emits no document events. Redelivery is
 * harmless: both publishes are deduplicated by ids derived from the document event's id.
 * Events of a superseded revision or of a deleted document are dropped, as the view drops them.
 */
export function createTransitionHandler(ports: TransitionPorts): Handler {
  // The runner starts messages in stream order; one document's events are then handled in that
  // order too, so its transitions reach LIFECYCLE (and the delivery queue) in log order.
  const serial = keyedSerializer();
  return (event, ctx) => serial(event.documentId, () => handle(event, ctx));
  async function handle(event: DocumentEvent, ctx: Parameters<Handler>[1]): Promise<DocumentEvent[]> {
    if (event.type === 'document.metadata-updated.v1') {
      await ports.notes.note(event.documentId, { containerTags: event.data.containerTags, tagsVersion: event.data.version });
      return [];
    }
    const status = transitionOf(event);
    if (!status) return [];
    let note: DocNote | null;
    if (event.type === 'document.submitted.v1') {
      note = await ports.notes.note(event.documentId, {
        customId: event.data.customId,
        containerTags: event.data.containerTags,
        tagsVersion: event.data.metadataVersion,
        revision: event.revision,
      });
    } else {
      note = await ports.notes.get(event.documentId);
      if (!note) {
        note = await ports.fromLog(event.documentId);
        if (note && status !== 'deleted') note = await ports.notes.note(event.documentId, note);
      }
      if (status !== 'deleted') {
        // No note and nothing in the log: the document was deleted (and purged) since.
        if (!note || event.revision < note.revision) {
          ctx.log.debug({ known: note?.revision ?? null }, 'transition of a superseded revision or a deleted document: dropped');
          return [];
        }
      }
    }
    const lifecycle = lifecycleEventOf(event, status, note);
    const seq = await ports.publishLifecycle(lifecycle);
    const now = ports.now().toISOString();
    const hooks = ports.webhooks().filter((h) => webhookMatches(h, lifecycle));
    for (const h of hooks) await ports.enqueue({ webhookId: h.id, event: lifecycle, enqueuedAt: now });
    if (status === 'deleted') {
      await ports.purgeLifecycle(event.documentId, seq);
      await ports.notes.forget(event.documentId);
    }
    ctx.log.debug({ status, webhooks: hooks.length, lifecycleSeq: seq }, 'transition announced');
    return [];
  }
}
