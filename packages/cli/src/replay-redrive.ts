import { Filters, LANE_HEADER, type DocumentStatus, type DocumentSubmitted, type FilterExpr, type Metadata, type RedriveStage } from '@memstream/contracts';
import { isTransientError, lastEvent, publishEvent, type Bus } from '@memstream/bus';
import { errorMessage, newId } from '@memstream/kit';
import type { DocumentView, DocumentViews, ListQuery } from '@memstream/views';
import type { Progress } from './replay.js';

/** Which documents a re-drive takes; every given criterion must hold. `all` alone takes every document. */
export interface RedriveSelection {
  all?: boolean;
  tag?: string;
  /** The list filter language (`{AND: [...]}` / `{OR: [...]}`), as an object or JSON text. */
  filter?: unknown;
  failed?: boolean;
}

/** Parse a `--filter` value the way list does; throws with the reason. */
export function parseFilter(value: unknown): FilterExpr {
  const r = Filters.safeParse(value);
  if (!r.success) throw new Error(`--filter: ${r.error.issues.map((i) => i.message).join('; ')}`);
  return r.data;
}

/**
 * The documents a selection takes, from the view store, every page read before anything is
 * re-driven (re-driving changes statuses, which would shift later pages under a status filter).
 */
export async function selectDocuments(views: DocumentViews, sel: RedriveSelection): Promise<DocumentView[]> {
  if (!sel.all && sel.tag === undefined && sel.filter === undefined && !sel.failed) {
    throw new Error('say which documents: --all, --tag <containerTag>, --filter <json> or --failed');
  }
  const query: Omit<ListQuery, 'limit' | 'offset'> = {
    sort: 'createdAt',
    order: 'asc',
    ...(sel.tag !== undefined ? { containerTags: [sel.tag] } : {}),
    ...(sel.failed ? { statuses: ['failed' as DocumentStatus] } : {}),
    ...(sel.filter !== undefined ? { filter: parseFilter(sel.filter) } : {}),
  };
  const out: DocumentView[] = [];
  const page = 500;
  for (let offset = 0; ; offset += page) {
    const { items } = await views.list({ ...query, limit: page, offset });
    out.push(...items);
    if (items.length < page) return out;
  }
}

export function countByStatus(docs: DocumentView[]): Partial<Record<DocumentStatus, number>> {
  const out: Partial<Record<DocumentStatus, number>> = {};
  for (const d of docs) out[d.status] = (out[d.status] ?? 0) + 1;
  return out;
}

export type RedriveOutcome =
  /** A new revision was published: `revision`. */
  | { documentId: string; outcome: 'redriven'; revision: number }
  /** Deleted, or no submission in the log. */
  | { documentId: string; outcome: 'gone' }
  /** Someone else submitted a new revision at the same moment, which is processed anyway. */
  | { documentId: string; outcome: 'changed' };

/**
 * Re-drive one document from `from`: publish a new revision of its latest submission (its input,
 * its current tags and metadata) that carries `redrive: {from, ofRevision}`. The stages before
 * `from` re-emit what they emitted for `ofRevision` instead of computing it again; the old
 * revision's unfinished work is dropped by the stages' stale-revision check, and the view goes
 * back through the stages. Published only if no other submission came first (optimistic
 * concurrency on the document's submitted subject), so a concurrent change always wins.
 */
export async function redriveDocument(bus: Bus, documentId: string, from: RedriveStage, now: () => Date = () => new Date()): Promise<RedriveOutcome> {
  const [sub, del, upd] = await Promise.all([lastEvent(bus, documentId, 'submitted'), lastEvent(bus, documentId, 'deleted'), lastEvent(bus, documentId, 'metadata-updated')]);
  if (!sub || sub.event.type !== 'document.submitted.v1') return { documentId, outcome: 'gone' };
  const subRev = sub.event.revision;
  const delRev = del?.event.revision ?? 0;
  if (del && delRev >= subRev) return { documentId, outcome: 'gone' };
  const data = sub.event.data;
  // The tags and metadata the document has now: a later metadata update wins over the submission's.
  let containerTags = data.containerTags;
  let metadata: Metadata = data.metadata;
  let metadataVersion = data.metadataVersion;
  if (upd?.event.type === 'document.metadata-updated.v1' && upd.event.data.version > data.metadataVersion) {
    containerTags = upd.event.data.containerTags;
    metadata = upd.event.data.metadata;
    metadataVersion = upd.event.data.version;
  }
  const revision = Math.max(subRev, delRev) + 1;
  const id = newId();
  const event: DocumentSubmitted = {
    id,
    type: 'document.submitted.v1',
    documentId,
    revision,
    occurredAt: now().toISOString(),
    correlationId: id,
    causationId: sub.event.id,
    data: { ...data, containerTags, metadata, metadataVersion, redrive: { from, ofRevision: subRev } },
  };
  try {
    // A re-drive is bulk work by nature: in the bulk lane, it never takes more than half of a
    // stage's capacity from the documents tenants submit meanwhile (docs/pipeline.md, "Fairness").
    await publishEvent(bus, event, { expectLastSubjectSequence: sub.seq, headers: { [LANE_HEADER]: 'bulk' } });
  } catch (err) {
    if (/wrong last sequence/i.test(errorMessage(err))) return { documentId, outcome: 'changed' };
    throw err;
  }
  return { documentId, outcome: 'redriven', revision };
}

export interface RedriveRun {
  redriven: Map<string, number>;
  gone: number;
  changed: number;
}

/**
 * One re-drive, tried again while the broker is away (a restart, a network blip: requests fail at
 * once then, Bus.whileConnected), for up to about a minute. Trying again is safe: each attempt
 * reads the document's latest submission first, so one that did land before the connection
 * dropped is seen, and at worst re-driven once more.
 */
async function redriveRetrying(bus: Bus, documentId: string, from: RedriveStage, waits = [250, 500, 1_000, 2_000, 4_000, 8_000, 15_000, 30_000]): Promise<RedriveOutcome> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await redriveDocument(bus, documentId, from);
    } catch (err) {
      const wait = waits[attempt];
      if (wait === undefined || !isTransientError(err)) throw err;
      bus.log.warn({ documentId, err: errorMessage(err), retryInMs: wait }, 're-drive: the broker is away; trying again');
      await new Promise((r) => setTimeout(r, wait));
    }
  }
}

/** Re-drive each document in turn (a few at once), reporting progress; the broker away for a while is waited out. */
export async function redriveDocuments(bus: Bus, ids: string[], from: RedriveStage, progress?: Progress, concurrency = 8): Promise<RedriveRun> {
  const run: RedriveRun = { redriven: new Map(), gone: 0, changed: 0 };
  let next = 0;
  let done = 0;
  const worker = async () => {
    while (next < ids.length) {
      const id = ids[next++]!;
      const r = await redriveRetrying(bus, id, from);
      if (r.outcome === 'redriven') run.redriven.set(id, r.revision);
      else if (r.outcome === 'gone') run.gone++;
      else run.changed++;
      done++;
      if (done % 20 === 0) progress?.(done, ids.length);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, ids.length) }, worker));
  progress?.(ids.length, ids.length);
  return run;
}

export interface WaitResult {
  done: number;
  failed: number;
  /** Deleted or replaced by a newer revision meanwhile. */
  superseded: number;
  /** Still in progress when the wait ended. */
  pending: number;
}

/**
 * Wait until every re-driven revision is done or failed in the view (or was superseded: the
 * document was deleted, or a newer revision was submitted), or until `timeoutMs`.
 */
export async function waitTerminal(views: DocumentViews, revisions: Map<string, number>, opts: { timeoutMs: number; pollMs?: number; progress?: Progress }): Promise<WaitResult> {
  const pending = new Map(revisions);
  const out: WaitResult = { done: 0, failed: 0, superseded: 0, pending: 0 };
  const deadline = Date.now() + opts.timeoutMs;
  const total = revisions.size;
  for (;;) {
    const roundStarted = Date.now();
    for (const [id, rev] of pending) {
      const v = await views.get(id);
      if (!v || v.revision > rev) out.superseded++;
      else if (v.revision === rev && v.status === 'done') out.done++;
      else if (v.revision === rev && v.status === 'failed') out.failed++;
      else continue;
      pending.delete(id);
    }
    opts.progress?.(total - pending.size, total);
    if (pending.size === 0 || Date.now() > deadline) break;
    // At least as long as a round took: many documents on a remote view store are polled at half duty at most.
    await new Promise((r) => setTimeout(r, Math.max(opts.pollMs ?? 250, Date.now() - roundStarted)));
  }
  out.pending = pending.size;
  return out;
}
