import { createHash } from 'node:crypto';
import type { MemoryCommit, MemoryLifecycleEvent, Webhook, WebhookDeliveryJob } from '@memstream/contracts';
import type { Logger } from '@memstream/kit';
import { webhookMatches } from './transitions.js';
import { keyedSerializer } from './serialize.js';

/** The memory changes a commit announces, as /metrics counts them. */
export interface MemoryCounts {
  created: number;
  updated: number;
  forgotten: number;
}

export interface MemoryEventPorts {
  /** The registrations right now. */
  webhooks(): readonly Webhook[];
  /** Append to LIFECYCLE (deduplicated by the event id); `duplicate`: it was there already. */
  publishLifecycle(event: MemoryLifecycleEvent): Promise<{ seq: number; duplicate: boolean }>;
  /** Whether this (event, webhook) delivery was attempted before (its record exists, for 7 days). */
  attempted(webhookId: string, eventId: string): Promise<boolean>;
  /** Queue one delivery (deduplicated by `${event.id}:${webhookId}`). */
  enqueue(job: WebhookDeliveryJob): Promise<void>;
  /** Memories made, updated and forgotten in a tag, counted once per change: only when first announced. */
  count(containerTag: string, counts: MemoryCounts): void;
  now(): Date;
}

/** A memory event's id: from the commit's id and the change's place in it, so a redelivered or replayed commit gives the same ids. */
export function memoryEventId(commitId: string, index: number): string {
  return createHash('sha256').update(`${commitId}#change${index}`).digest('base64url').slice(0, 27);
}

/** The events a commit announces, in the commit's order: created, updated (a new version) and forgotten changes. */
export function memoryEventsOf(commit: MemoryCommit): MemoryLifecycleEvent[] {
  const documentOf = changeDocuments(commit);
  return commit.changes.flatMap((change, i): MemoryLifecycleEvent[] => {
    const id = memoryEventId(commit.id, i);
    // A dynamic-dreaming group is announced as the extractions it is made of: each change with its own document.
    const base = {
      containerTag: commit.containerTag,
      containerTags: [commit.containerTag],
      documentId: documentOf(i, change),
      cause: commit.cause.kind === 'extraction-group' ? 'extraction' : commit.cause.kind,
      occurredAt: commit.occurredAt,
    };
    switch (change.type) {
      case 'memory.created.v1':
      case 'memory.versioned.v1': {
        const m = change.memory;
        return [
          {
            id,
            type: change.type === 'memory.created.v1' ? 'memory.created' : 'memory.updated',
            memoryId: m.id,
            ...base,
            memory: m.memory,
            version: m.version,
            parentMemoryId: m.parentMemoryId,
            rootMemoryId: m.rootMemoryId,
          },
        ];
      }
      case 'memory.forgotten.v1':
        return [
          {
            id,
            type: 'memory.forgotten',
            memoryId: change.memoryId,
            ...base,
            memory: null,
            version: null,
            parentMemoryId: null,
            rootMemoryId: null,
            forgotten: { cause: change.cause, reason: change.reason },
          },
        ];
      default:
        return [];
    }
  });
}

/** The document each change of a commit came from (by its place in the commit). */
function changeDocuments(commit: MemoryCommit): (index: number, change: MemoryCommit['changes'][number]) => string | null {
  const cause = commit.cause;
  if (cause.kind !== 'extraction-group') {
    const documentId = 'documentId' in cause ? cause.documentId : null;
    return () => documentId;
  }
  // Each document's changes follow the documents' before it; a commit recorded without the counts
  // names a new memory's own first source, and nothing for other changes.
  const owner: Array<string | null> = [];
  if (cause.documents.every((d) => d.changes !== undefined)) for (const d of cause.documents) for (let k = 0; k < d.changes!; k++) owner.push(d.documentId);
  return (index, change) =>
    owner[index] ?? (change.type === 'memory.created.v1' || change.type === 'memory.versioned.v1' ? (change.memory.documentIds[0] ?? null) : null);
}

/**
 * MEMORY commits → memory events: each appended to LIFECYCLE (what GET /v3/events streams) and
 * queued once for every webhook that names it, one tag's in log order. Nothing is sent twice: the
 * LIFECYCLE append and each delivery are deduplicated by ids derived from the commit (and a
 * delivery already attempted, whose record lives 7 days, is not queued again), and the memory
 * metrics count an event only on its first append. Returns what it announced.
 */
export function createMemoryAnnouncer(ports: MemoryEventPorts): (commit: MemoryCommit, log: Logger) => Promise<MemoryLifecycleEvent[]> {
  const serial = keyedSerializer();
  return (commit, log) => serial(commit.containerTag, () => announce(commit, log));
  async function announce(commit: MemoryCommit, log: Logger): Promise<MemoryLifecycleEvent[]> {
    const events = memoryEventsOf(commit);
    const counts: MemoryCounts = { created: 0, updated: 0, forgotten: 0 };
    for (const event of events) {
      const { seq, duplicate } = await ports.publishLifecycle(event);
      if (!duplicate) counts[event.type === 'memory.created' ? 'created' : event.type === 'memory.updated' ? 'updated' : 'forgotten']++;
      const now = ports.now().toISOString();
      let queued = 0;
      for (const h of ports.webhooks().filter((w) => webhookMatches(w, event))) {
        if (await ports.attempted(h.id, event.id)) continue;
        await ports.enqueue({ webhookId: h.id, event, enqueuedAt: now });
        queued++;
      }
      log.debug({ type: event.type, memoryId: event.memoryId, lifecycleSeq: seq, duplicate, webhooks: queued }, 'memory event announced');
    }
    if (counts.created + counts.updated + counts.forgotten > 0) ports.count(commit.containerTag, counts);
    return events;
  }
}
