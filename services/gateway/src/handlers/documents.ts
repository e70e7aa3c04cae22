import {
  AddDocumentRequest,
  BatchAddRequest,
  BatchItem,
  BulkDeleteRequest,
  CUSTOM_ID_PATTERN,
  DOCUMENT_ID_PATTERN,
  IN_PROGRESS_STATUSES,
  LANE_HEADER,
  ListDocumentsRequest,
  UpdateDocumentRequest,
  type BatchAddResponse,
  type BulkDeleteResponse,
  type DocumentEvent,
  type DocumentListItem,
  type DocumentResponse,
  type DocumentSubmitted,
  type DocumentSubmittedData,
  type Lane,
  type ListDocumentsResponse,
  type Metadata,
  type ProcessingResponse,
  type SubmittedInput,
} from '@memstream/contracts';
import {
  AppError,
  NotFoundError,
  PermissionError,
  RetryableError,
  ValidationError,
  appendConversation,
  documentIdForCustomId,
  errorMessage,
  looksLikeConversation,
  newId,
  sha256Hex,
} from '@memstream/kit';
import { canonical, evolve, type DocumentView, type DocumentViews } from '@memstream/views';
import { assertOwns, assertTagsInScope, canSee, customIdNamespace, owns, readTags, writeTags, type TagScope } from './scope.js';
import { documentSettingsFor, type SettingsStore } from './settings.js';

/** A document's latest state as the log has it: what the gateway decides from, without waiting for the projection. */
export interface DocumentHead {
  submitted: DocumentSubmitted | null;
  submittedSeq: number;
  /** The newest revision, submitted or deleted. */
  revision: number;
  deleted: boolean;
  /** The newest metadata-updated event, if any. */
  metadataUpdate: { version: number; metadata: Metadata; containerTags: string[] } | null;
  metadataSeq: number;
}

/** The head of a document that has no event yet. */
function newDocumentHead(): DocumentHead {
  return { submitted: null, submittedSeq: 0, revision: 0, deleted: false, metadataUpdate: null, metadataSeq: 0 };
}

/** What the gateway needs of the event log. */
export interface EventLog {
  head(documentId: string): Promise<DocumentHead>;
  /**
   * Publish; with `expectLastSeq`, only if the last message on the event's own subject still has
   * that sequence (0: none), so two concurrent writers of one document cannot both win.
   * Returns the event's stream sequence.
   */
  publish(event: DocumentEvent, opts?: { expectLastSeq?: number; headers?: Record<string, string> }): Promise<number>;
  /** Remove every event of a document below `seq` (its tombstone), so deletion is permanent in the log too. */
  purgeBefore(documentId: string, seq: number): Promise<number>;
  /**
   * Documents with a submission or a metadata update in the log that the view store may not have
   * projected yet (every event after the projection's ack floor, up to the log's end now).
   */
  unprojected(): Promise<string[]>;
  /** Every event of a document still in the log, in order (at most `limit`). */
  history(documentId: string, limit?: number): Promise<Array<{ event: DocumentEvent; seq: number }>>;
}

/** entityContext persists on a container tag and applies to later documents of the tag. */
export interface TagContexts {
  get(tag: string): Promise<string | null>;
  set(tag: string, context: string): Promise<void>;
  /** Forget the tag's context (the tag was deleted, or its context cleared). */
  delete(tag: string): Promise<void>;
}

export interface GatewayPorts {
  views: DocumentViews;
  events: EventLog;
  /** Removing a deleted document's chunks and blobs. */
  index: { deleteDocument(documentId: string): Promise<number> };
  blobs: { deleteDocument(documentId: string): Promise<number> };
  tagContexts: TagContexts;
  /** /v3/settings; a submission carries its scope's. Absent in tests that do not need it. */
  settings?: SettingsStore;
  /** The lane each submission goes in (docs/pipeline.md, "Fairness"). Absent: every submission is normal. */
  lanes?: SubmissionLanes;
  now(): Date;
}

/** Which lane a submission goes in: adapters/lanes.ts (the view's count of each tag's unfinished documents). */
export interface SubmissionLanes {
  /** The lane of a submission about to be published for these tags; it counts towards their backlog from now on. */
  laneFor(containerTags: readonly string[]): Promise<Lane>;
}

/** A publish refused because another write to the same document won the race. */
export function isConcurrencyConflict(err: unknown): boolean {
  return /wrong last sequence/i.test(String((err as Error)?.message ?? err));
}

/** The tags and metadata a document has now: its submission's, unless a later metadata update replaced them. */
function currentScope(head: DocumentHead): { containerTags: string[]; metadata: Metadata; version: number } {
  const sub = head.submitted?.data;
  const upd = head.metadataUpdate;
  if (upd && (!sub || upd.version > sub.metadataVersion)) return { containerTags: upd.containerTags, metadata: upd.metadata, version: upd.version };
  return { containerTags: sub?.containerTags ?? [], metadata: sub?.metadata ?? {}, version: sub?.metadataVersion ?? 0 };
}

function latestMetadataVersion(head: DocumentHead): number {
  return Math.max(head.metadataUpdate?.version ?? 0, head.submitted?.data.metadataVersion ?? 0);
}

/** What one add, upload, batch item or content PATCH asks for. Absent tags or metadata keep the document's. */
export interface Submission {
  /** Set by PATCH; otherwise derived from customId, or new. */
  documentId?: string;
  customId: string | null;
  input: SubmittedInput;
  contentHash: string;
  containerTags?: string[];
  metadata?: Metadata;
  entityContext?: string;
  filterByMetadata?: DocumentSubmittedData['filterByMetadata'];
  fileType?: DocumentSubmittedData['fileType'];
  mimeType?: string;
  filepath?: string;
  taskType?: DocumentSubmittedData['taskType'];
  dreaming?: DocumentSubmittedData['dreaming'];
  /** An add with a customId: new conversation messages are appended rather than replacing the document. */
  appendable: boolean;
  /** A scoped key's container tags: the document must be, and stay, inside them (see scope.ts). */
  scope?: readonly string[];
  /** When the submission was taken (its occurredAt, the document's createdAt if new); absent: now. */
  at?: Date;
}

function sameScope(a: { containerTags: string[]; metadata: Metadata }, b: { containerTags: string[]; metadata: Metadata }): boolean {
  return canonical([...a.containerTags].sort()) === canonical([...b.containerTags].sort()) && canonical(a.metadata) === canonical(b.metadata);
}

async function entityContextFor(ports: GatewayPorts, tags: string[], given: string | undefined): Promise<string | null> {
  if (given !== undefined) {
    for (const t of tags) await ports.tagContexts.set(t, given);
    return given;
  }
  for (const t of tags) {
    const c = await ports.tagContexts.get(t);
    if (c) return c;
  }
  return null;
}

/**
 * Accept content for a document. The rules for an existing document (same customId, or PATCH):
 * - the same content again: nothing is reprocessed; changed tags or metadata are updated in
 *   place; the answer is the document's status (done, once it is) — unless it failed, in which
 *   case it is processed again;
 * - new conversation messages for a conversation (add with a customId): appended;
 * - anything else: a new revision, processed again (the embedder reuses the vectors of chunks
 *   whose text did not change, and the indexer drops the chunks that are gone).
 * Answers only after JetStream acknowledged the event, so nothing accepted is lost.
 */
export async function submit(ports: GatewayPorts, s: Submission, headers: Record<string, string> = {}): Promise<{ id: string; status: DocumentResponse['status'] }> {
  const documentId = s.documentId ?? (s.customId ? documentIdForCustomId(s.customId, customIdNamespace(s.scope ?? null)) : newId());
  // A new random id has no history to read: the add path's log read is for customIds (and
  // updates). The publish still expects no earlier submission, so a clash could not go unseen.
  const fresh = s.documentId === undefined && !s.customId;
  for (let attempt = 0; attempt < 5; attempt++) {
    const head = fresh && attempt === 0 ? newDocumentHead() : await ports.events.head(documentId);
    const live = head.submitted && !head.deleted ? head.submitted : null;
    const scope = live ? currentScope(head) : { containerTags: [], metadata: {}, version: 0 };
    let containerTags = s.containerTags ?? scope.containerTags;
    if (s.scope) {
      // The same customId is the same document whoever sends it: a scoped key may not take over
      // (or re-tag) a document that is not wholly inside its tags.
      if (live && !owns(s.scope, scope.containerTags)) {
        if (canSee(s.scope, scope.containerTags)) assertOwns(s.scope, scope.containerTags, s.customId ?? documentId);
        throw new PermissionError('Forbidden', `customId: ${JSON.stringify(s.customId ?? documentId)} names a document outside this API key's container tags; choose another customId`);
      }
      containerTags = writeTags(s.scope, containerTags);
    }
    const metadata = s.metadata ?? scope.metadata;
    let input = s.input;
    let contentHash = s.contentHash;

    if (live) {
      const prev = live.data.input;
      const unchanged = live.data.contentHash === contentHash;
      // New messages for a conversation: appended. Messages it already holds: nothing new.
      let nothingNew = unchanged;
      if (!unchanged && s.appendable && prev.kind === 'text' && input.kind === 'text' && looksLikeConversation(prev.content) && looksLikeConversation(input.content)) {
        if (prev.content.includes(input.content.trim())) nothingNew = true;
        else if (!input.content.startsWith(prev.content)) {
          const content = appendConversation(prev.content, input.content);
          input = { kind: 'text', content };
          contentHash = sha256Hex(content);
        }
      }
      if (nothingNew) {
        const view = await ports.views.get(documentId);
        if (view?.status !== 'failed') {
          if (!sameScope(scope, { containerTags, metadata })) {
            try {
              await publishMetadata(ports, head, documentId, containerTags, metadata, headers);
            } catch (err) {
              if (isConcurrencyConflict(err)) continue;
              throw err;
            }
          }
          return { id: documentId, status: view?.status ?? 'queued' };
        }
      }
    }

    const id = newId();
    // Two reads of NATS KV, each a round trip to the broker: at once, not one after the other (the add's p99 under load).
    const [entityContext, settings] = await Promise.all([entityContextFor(ports, containerTags, s.entityContext), documentSettingsFor(ports.settings, s.scope ?? null)]);
    const event: DocumentSubmitted = {
      id,
      type: 'document.submitted.v1',
      documentId,
      revision: head.revision + 1,
      occurredAt: (s.at ?? ports.now()).toISOString(),
      correlationId: id,
      causationId: null,
      data: {
        input,
        contentHash,
        customId: s.customId ?? live?.data.customId ?? null,
        containerTags,
        metadata,
        entityContext,
        filterByMetadata: s.filterByMetadata ?? null,
        fileType: s.fileType ?? null,
        mimeType: s.mimeType ?? null,
        filepath: s.filepath ?? live?.data.filepath ?? null,
        taskType: s.taskType ?? live?.data.taskType ?? 'memory',
        dreaming: s.dreaming ?? 'dynamic',
        // Computed from the newest metadata, so it wins over every update before it.
        metadataVersion: latestMetadataVersion(head),
        ...defined({ settings }),
      },
    };
    // A tag with a backlog has its new work in the bulk lane, which every stage reads with at most
    // half its capacity while the normal lane has work: one tenant's backlog cannot starve another's.
    const lane = ports.lanes ? await ports.lanes.laneFor(containerTags) : 'normal';
    try {
      await ports.events.publish(event, { expectLastSeq: head.submittedSeq, headers: lane === 'bulk' ? { ...headers, [LANE_HEADER]: 'bulk' } : headers });
      return { id: documentId, status: 'queued' };
    } catch (err) {
      if (!isConcurrencyConflict(err)) throw err;
    }
  }
  throw new RetryableError('the document is being changed by other requests right now; retry shortly');
}

async function publishMetadata(ports: GatewayPorts, head: DocumentHead, documentId: string, containerTags: string[], metadata: Metadata, headers: Record<string, string>): Promise<void> {
  const id = newId();
  await ports.events.publish(
    {
      id,
      type: 'document.metadata-updated.v1',
      documentId,
      revision: head.revision,
      occurredAt: ports.now().toISOString(),
      correlationId: id,
      causationId: null,
      data: { metadata, containerTags, version: latestMetadataVersion(head) + 1 },
    },
    { expectLastSeq: head.metadataSeq, headers },
  );
}

function tagsOf(req: { containerTag?: string | undefined; containerTags?: string[] | undefined }): string[] | undefined {
  if (req.containerTag === undefined && req.containerTags === undefined) return undefined;
  return [...new Set([...(req.containerTag ? [req.containerTag] : []), ...(req.containerTags ?? [])])];
}

function textSubmission(content: string, fields: Omit<Submission, 'input' | 'contentHash' | 'appendable' | 'customId'> & { customId?: string | undefined }, appendable: boolean): Submission {
  const { customId, ...rest } = fields;
  return { ...rest, customId: customId ?? null, input: { kind: 'text', content }, contentHash: sha256Hex(content), appendable: appendable && customId !== undefined };
}

/** Drop undefined fields, so optional properties stay absent rather than present-and-undefined. */
function defined<T extends object>(o: T): { [K in keyof T]: Exclude<T[K], undefined> } {
  // A loop, not entries/filter/fromEntries: this runs several times per add.
  const out: Record<string, unknown> = {};
  for (const k in o) if (o[k] !== undefined) out[k] = o[k];
  return out as { [K in keyof T]: Exclude<T[K], undefined> };
}

/** POST /v3/documents */
export async function addDocument(ports: GatewayPorts, body: unknown, headers: Record<string, string> = {}, scope: TagScope = null) {
  const req = AddDocumentRequest.parse(body);
  return submit(
    ports,
    textSubmission(
      req.content,
      defined({
        scope: scope ?? undefined,
        customId: req.customId,
        containerTags: tagsOf(req),
        metadata: req.metadata,
        entityContext: req.entityContext,
        filterByMetadata: req.filterByMetadata,
        filepath: req.filepath,
        taskType: req.taskType,
        dreaming: req.dreaming,
      }),
      true,
    ),
    headers,
  );
}

/** POST /v3/documents/batch: each item on its own; one bad item does not fail the others. */
export async function batchAdd(ports: GatewayPorts, body: unknown, headers: Record<string, string> = {}, scope: TagScope = null): Promise<BatchAddResponse> {
  const req = BatchAddRequest.parse(body);
  // The batch's own tags outside the key's scope refuse the whole batch; an item's, only that item.
  assertTagsInScope(scope, tagsOf(req) ?? []);
  // Each item validated once, up front: what it names decides the order below.
  const items = req.documents.map((raw) => BatchItem.safeParse(raw));
  const one = async (i: number, at: Date): Promise<BatchAddResponse['results'][number]> => {
    const parsed = items[i]!;
    if (!parsed.success) {
      return { id: '', status: 'error', error: 'Invalid document', details: `documents.${i}: ${parsed.error.issues.map((x) => `${x.path.join('.') || 'item'}: ${x.message}`).join('; ')}` };
    }
    const item = typeof parsed.data === 'string' ? { content: parsed.data } : parsed.data;
    try {
      return await submit(
        ports,
        textSubmission(
          item.content,
          defined({
            scope: scope ?? undefined,
            customId: 'customId' in item ? item.customId : undefined,
            containerTags: tagsOf(item) ?? tagsOf(req),
            metadata: 'metadata' in item && item.metadata ? { ...req.metadata, ...item.metadata } : req.metadata,
            filepath: ('filepath' in item ? item.filepath : undefined) ?? req.filepath,
            taskType: ('taskType' in item ? item.taskType : undefined) ?? req.taskType,
            entityContext: 'entityContext' in item ? item.entityContext : undefined,
            at,
          }),
          true,
        ),
        headers,
      );
    } catch (err) {
      if (err instanceof AppError && err.httpStatus < 500) return { id: '', status: 'error', error: err.message, ...(err.details ? { details: err.details } : {}) };
      throw err;
    }
  };
  // The items are taken at once, their publishes pipelined: one after another, a batch of 100 waited
  // for 100 acknowledgements in turn. What the order decides stays as if they came one by one: items
  // naming the same customId go in the order given (the last is the document's newest revision); an
  // item with an entityContext sets its tags' context for the items after it, so such a batch goes
  // wholly in order; and the items' times are a millisecond apart, so the documents' createdAt keeps
  // the batch's order (a list sorted by it breaks ties by the random id).
  const start = ports.now().getTime();
  const named = (i: number, field: 'customId' | 'entityContext') => {
    const p = items[i]!;
    return p.success && typeof p.data === 'object' ? p.data[field] : undefined;
  };
  const inOrder = items.some((_, i) => named(i, 'entityContext') !== undefined);
  const tails = new Map<string, Promise<unknown>>();
  const runs = items.map((_, i) => {
    const key = inOrder ? '' : (named(i, 'customId') ?? null);
    const before = key === null ? undefined : tails.get(key);
    const run = before ? before.then(() => one(i, new Date(start + i))) : one(i, new Date(start + i));
    if (key !== null) tails.set(key, run.catch(() => undefined));
    return run;
  });
  const settled = await Promise.allSettled(runs);
  const failure = settled.find((r) => r.status === 'rejected');
  if (failure) throw failure.reason;
  const results = settled.map((r) => (r as PromiseFulfilledResult<BatchAddResponse['results'][number]>).value);
  const failed = results.filter((r) => r.status === 'error').length;
  return { results, success: results.length - failed, failed };
}

/** The document ids a path segment may name: itself as a document id, and the id of that customId in the caller's namespace. */
export function documentIdCandidates(idOrCustomId: string, scope: TagScope): string[] {
  const candidates: string[] = [];
  if (DOCUMENT_ID_PATTERN.test(idOrCustomId)) candidates.push(idOrCustomId);
  if (CUSTOM_ID_PATTERN.test(idOrCustomId) && idOrCustomId.length <= 100) candidates.push(documentIdForCustomId(idOrCustomId, customIdNamespace(scope)));
  return [...new Set(candidates)];
}

/**
 * The document an id names that the caller may see: a document id, or a customId of the
 * caller's namespace. Every candidate is read whether or not an earlier one exists, and a
 * document outside the caller's tags is skipped here like a missing one, so GET, PATCH and
 * DELETE do the same reads and give the same 404 for "another tenant's" as for "no such
 * document" (no existence oracle, not even in the timing).
 */
async function resolveId(ports: GatewayPorts, idOrCustomId: string, scope: TagScope): Promise<{ id: string; view: DocumentView | null; head: DocumentHead }> {
  const found = await Promise.all(
    documentIdCandidates(idOrCustomId, scope).map(async (id) => {
      const [view, head] = await Promise.all([ports.views.get(id), ports.events.head(id)]);
      return { id, view, head };
    }),
  );
  for (const f of found) {
    if (f.head.deleted || (!f.view && !f.head.submitted)) continue;
    const tags = f.head.submitted ? currentScope(f.head).containerTags : (f.view?.containerTags ?? []);
    if (canSee(scope, tags)) return f;
  }
  throw new NotFoundError('Document not found', `no document with id or customId ${JSON.stringify(idOrCustomId)}`);
}

/**
 * A document by id or customId. The view store is a projection and may lag the log by a few
 * milliseconds, so a document the log has but the view does not yet is answered from its
 * submission: GET right after add never says 404.
 */
export async function getDocument(ports: GatewayPorts, idOrCustomId: string, scope: TagScope = null): Promise<DocumentView> {
  const { view, head } = await resolveId(ports, idOrCustomId, scope);
  // Where the view is behind the log (a revision or a metadata update not projected yet), the
  // log's events bring it up to date; the reducer ignores whatever the view already has.
  let v = view;
  if (head.submitted) v = evolve(v, head.submitted);
  if (head.metadataUpdate && v) {
    v = evolve(v, { id: 'head', type: 'document.metadata-updated.v1', documentId: v.id, revision: head.revision, occurredAt: v.updatedAt, correlationId: 'head', causationId: null, data: head.metadataUpdate });
  }
  // Outside a scoped key's tags a document is as absent as one that does not exist: no existence oracle.
  if (!v || !canSee(scope, v.containerTags)) throw new NotFoundError('Document not found', `no document with id or customId ${JSON.stringify(idOrCustomId)}`);
  return v;
}

/** PATCH /v3/documents/{id}: new content → reprocessed; only tags or metadata → updated in place. */
export async function updateDocument(ports: GatewayPorts, idOrCustomId: string, body: unknown, headers: Record<string, string> = {}, scope: TagScope = null) {
  const req = UpdateDocumentRequest.parse(body);
  for (let attempt = 0; attempt < 5; attempt++) {
    const { id, head, view: found } = await resolveId(ports, idOrCustomId, scope);
    const current = head.submitted ? currentScope(head) : { containerTags: found?.containerTags ?? [], metadata: found?.metadata ?? {}, version: 0 };
    assertOwns(scope, current.containerTags, idOrCustomId);
    if (req.customId !== undefined && req.customId !== (head.submitted?.data.customId ?? null)) {
      throw new ValidationError('customId cannot be changed', 'customId: a document keeps the customId it was created with');
    }
    let containerTags = tagsOf(req) ?? current.containerTags;
    if (scope !== null) containerTags = writeTags(scope, containerTags);
    const metadata = req.metadata ?? current.metadata;
    if (req.content !== undefined && head.submitted) {
      return submit(
        ports,
        textSubmission(
          req.content,
          defined({ documentId: id, customId: head.submitted.data.customId ?? undefined, containerTags, metadata, filepath: req.filepath, taskType: req.taskType, scope: scope ?? undefined }),
          false,
        ),
        headers,
      );
    }
    const view = await ports.views.get(id);
    if (!sameScope(current, { containerTags, metadata })) {
      try {
        await publishMetadata(ports, head, id, containerTags, metadata, headers);
      } catch (err) {
        if (isConcurrencyConflict(err)) continue;
        throw err;
      }
    }
    return { id, status: view?.status ?? 'queued' };
  }
  throw new RetryableError('the document is being changed by other requests right now; retry shortly');
}

/**
 * POST /v3/documents/{id}/retry (memstream addition, the console's "retry"): a failed document
 * is submitted again exactly as it was last sent (its input, uploads included, with its current
 * tags and metadata), as a new revision processed from the start. Anything not failed is 400.
 */
export async function retryDocument(ports: GatewayPorts, idOrCustomId: string, headers: Record<string, string> = {}, scope: TagScope = null) {
  const { id, head, view } = await resolveId(ports, idOrCustomId, scope);
  const current = head.submitted ? currentScope(head) : { containerTags: view?.containerTags ?? [], metadata: view?.metadata ?? {}, version: 0 };
  assertOwns(scope, current.containerTags, idOrCustomId);
  if (view?.status !== 'failed' || !head.submitted) {
    throw new ValidationError('Only a failed document can be retried', `document ${JSON.stringify(idOrCustomId)} is ${view?.status ?? 'queued'}`);
  }
  const d = head.submitted.data;
  return submit(
    ports,
    defined({
      documentId: id,
      customId: d.customId,
      input: d.input,
      contentHash: d.contentHash,
      containerTags: current.containerTags,
      metadata: current.metadata,
      fileType: d.fileType ?? undefined,
      mimeType: d.mimeType ?? undefined,
      filepath: d.filepath ?? undefined,
      taskType: d.taskType,
      dreaming: d.dreaming,
      appendable: false,
      scope: scope ?? undefined,
    }),
    headers,
  );
}

/**
 * Delete permanently: a tombstone in the log, every earlier event of the document purged, its
 * blobs, chunks and view removed. Works at any status: deleting a document that is still being
 * processed succeeds (the stages drop work for a deleted document).
 */
export async function deleteDocument(ports: GatewayPorts, idOrCustomId: string, reason: 'api' | 'bulk' = 'api', scope: TagScope = null, headers: Record<string, string> = {}): Promise<string> {
  const { id, head, view } = await resolveId(ports, idOrCustomId, scope);
  assertOwns(scope, head.submitted ? currentScope(head).containerTags : (view?.containerTags ?? []), idOrCustomId);
  const eventId = newId();
  const seq = await ports.events.publish(
    {
      id: eventId,
      type: 'document.deleted.v1',
      documentId: id,
      revision: Math.max(1, head.revision),
      occurredAt: ports.now().toISOString(),
      correlationId: eventId,
      causationId: null,
      data: { reason },
    },
    { headers },
  );
  await ports.events.purgeBefore(id, seq);
  await Promise.all([ports.blobs.deleteDocument(id), ports.index.deleteDocument(id), ports.views.delete(id)]);
  return id;
}

/** Which documents a delete by selector takes: those with any of `containerTags` (if given) and on `filepath` (if given). */
export interface DeleteSelector {
  containerTags?: string[];
  /** Exact path, or a prefix when it ends with '/'. */
  filepath?: string;
}

function matchesSelector(sel: DeleteSelector, tags: readonly string[], filepath: string | null): boolean {
  if (sel.containerTags && !tags.some((t) => sel.containerTags!.includes(t))) return false;
  if (sel.filepath !== undefined) {
    if (filepath === null) return false;
    if (sel.filepath.endsWith('/') ? !filepath.startsWith(sel.filepath) : filepath !== sel.filepath) return false;
  }
  return true;
}

/** A few at a time: enough to overlap round trips to NATS, few enough not to crowd out other requests. */
async function inParallel<T>(items: readonly T[], n: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: Math.min(n, items.length) }, async () => {
    while (next < items.length) await fn(items[next++]!);
  }));
}

/**
 * Delete every document whose latest accepted state matches the selector now — including
 * documents the view store has not projected yet. The candidates are what the view has plus
 * every document the log changed after the projection's ack floor; each is then decided from its
 * head in the log (tags from its newest submission or metadata update, filepath from its
 * submission), never from a view that may be behind.
 */
export async function deleteBySelector(ports: GatewayPorts, sel: DeleteSelector, scope: TagScope, headers: Record<string, string> = {}): Promise<{ deletedCount: number; errors: Array<{ id: string; error: string }> }> {
  // The log first, then the view: whatever the view lacks at the moment it is read is after the floor.
  const candidates = new Set(await ports.events.unprojected());
  for (let offset = 0; ; offset += 200) {
    const page = await ports.views.list({
      ...(sel.containerTags ? { containerTags: sel.containerTags } : {}),
      ...(sel.filepath !== undefined ? { filepath: sel.filepath } : {}),
      sort: 'createdAt',
      order: 'asc',
      limit: 200,
      offset,
    });
    for (const v of page.items) candidates.add(v.id);
    if (page.items.length < 200) break;
  }
  const errors: Array<{ id: string; error: string }> = [];
  const take: string[] = [];
  await inParallel([...candidates], 16, async (id) => {
    const head = await ports.events.head(id);
    if (head.deleted) return;
    // A document the log no longer has a submission of (imported views): the view is all there is, as in deleteDocument.
    const view = head.submitted ? null : await ports.views.get(id);
    if (!head.submitted && !view) return;
    const tags = head.submitted ? currentScope(head).containerTags : view!.containerTags;
    if (!matchesSelector(sel, tags, head.submitted ? head.submitted.data.filepath : view!.filepath)) return;
    // A document that also carries a tag outside the key's scope is another tenant's too: kept, and reported.
    if (owns(scope, tags)) take.push(id);
    else if (canSee(scope, tags)) errors.push({ id, error: "forbidden: the document also belongs to container tags outside this API key's" });
  });
  let deletedCount = 0;
  await inParallel(take, 8, async (id) => {
    try {
      await deleteDocument(ports, id, 'bulk', scope, headers);
      deletedCount++;
    } catch (err) {
      // Deleted by someone else meanwhile: gone, as asked.
      if (!(err instanceof NotFoundError)) errors.push({ id, error: errorMessage(err) });
    }
  });
  return { deletedCount, errors };
}

/** DELETE /v3/documents/bulk: by ids (each reported), by container tags, or by filepath. */
export async function bulkDelete(ports: GatewayPorts, body: unknown, scope: TagScope = null, headers: Record<string, string> = {}): Promise<BulkDeleteResponse> {
  const req = BulkDeleteRequest.parse(body);
  // Deleting by a tag outside a scoped key's tags is refused whole; by filepath alone, it is limited to the key's tags.
  const tags = req.containerTags || req.filepath ? readTags(scope, req.containerTags) : undefined;
  let deletedCount = 0;
  const errors: Array<{ id: string; error: string }> = [];
  for (const id of req.ids ?? []) {
    try {
      await deleteDocument(ports, id, 'bulk', scope, headers);
      deletedCount++;
    } catch (err) {
      if (err instanceof NotFoundError) errors.push({ id, error: 'not found' });
      else if (err instanceof PermissionError) errors.push({ id, error: `forbidden: ${err.details ?? err.message}` });
      else errors.push({ id, error: errorMessage(err) });
    }
  }
  if (req.containerTags || req.filepath) {
    const out = await deleteBySelector(ports, { ...(tags ? { containerTags: tags } : {}), ...(req.filepath !== undefined ? { filepath: req.filepath } : {}) }, scope, headers);
    deletedCount += out.deletedCount;
    errors.push(...out.errors);
  }
  return {
    success: errors.length === 0,
    deletedCount,
    ...(req.ids || errors.length > 0 ? { errors } : {}),
    ...(req.containerTags ? { containerTags: req.containerTags } : {}),
  };
}

/** POST /v3/documents/list */
export async function listDocuments(ports: GatewayPorts, body: unknown, scope: TagScope = null): Promise<ListDocumentsResponse> {
  const req = ListDocumentsRequest.parse(body ?? {});
  const containerTags = readTags(scope, req.containerTags);
  const { items, total } = await ports.views.list({
    ...(containerTags ? { containerTags } : {}),
    ...(req.filters ? { filter: req.filters } : {}),
    ...(req.filepath ? { filepath: req.filepath } : {}),
    ...(req.statuses ? { statuses: req.statuses } : {}),
    sort: req.sort,
    order: req.order,
    limit: req.limit,
    offset: (req.page - 1) * req.limit,
  });
  return {
    memories: items.map((v) => toListItem(v, req.includeContent)),
    pagination: { currentPage: req.page, totalPages: Math.ceil(total / req.limit), totalItems: total, limit: req.limit },
  };
}

/** GET /v3/documents/processing: every document not yet done or failed, oldest first. */
export async function listProcessing(ports: GatewayPorts, scope: TagScope = null): Promise<ProcessingResponse> {
  const { items, total } = await ports.views.list({ ...(scope !== null ? { containerTags: [...scope] } : {}), statuses: IN_PROGRESS_STATUSES, sort: 'createdAt', order: 'asc', limit: 1000, offset: 0 });
  return {
    documents: items.map((v) => {
      const { id, customId, title, type, status, metadata, containerTags, createdAt, updatedAt } = toDocumentResponse(v);
      return { id, customId, title, type, status, metadata, containerTags, createdAt, updatedAt };
    }),
    totalCount: total,
  };
}

/** A list entry: the document's wire form without the fields list does not carry (content only on request). */
export function toListItem(v: DocumentView, includeContent: boolean): DocumentListItem {
  const { content, source: _s, ogImage: _o, raw: _r, spatialPoint: _p, taskType: _t, error: _e, reason: _re, chunkCount: _c, ...item } = toDocumentResponse(v);
  return includeContent ? { ...item, content } : item;
}

/** The wire form of a view: every field the official SDK names, null where unknown. */
export function toDocumentResponse(v: DocumentView): DocumentResponse {
  return {
    id: v.id,
    customId: v.customId,
    connectionId: null,
    title: v.title,
    summary: v.summary,
    type: v.type,
    status: v.status,
    content: v.content,
    metadata: v.metadata,
    containerTags: v.containerTags,
    filepath: v.filepath,
    source: v.source,
    url: v.url,
    ogImage: null,
    raw: null,
    spatialPoint: null,
    taskType: v.taskType,
    createdAt: v.createdAt,
    updatedAt: v.updatedAt,
    error: v.error,
    reason: v.error?.reason ?? null,
    chunkCount: v.chunkCount,
  };
}
