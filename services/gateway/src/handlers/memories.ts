import {
  CreateMemoriesRequest,
  ForgetMatchingRequest,
  ForgetMemoryRequest,
  ListMemoriesRequest,
  ProfileRequest,
  UpdateMemoryRequest,
  matchesFilter,
  type FilterExpr,
  type MemoryChange,
  type MemoryCommit,
  type MemoryRecord,
  type V4SearchResult,
} from '@memstream/contracts';
import { tokenize } from '@memstream/chunk-index';
import type { Embedder } from '@memstream/embedder';
import { NotFoundError, newId } from '@memstream/kit';
import { firstVersion, isGone, memoryIdFor, nextVersion, type MemoryHit, type MemoryLog, type MemoryStore } from '@memstream/memory';
import type { DocumentView, DocumentViews } from '@memstream/views';
import { assertTagsInScope, readTags, type TagScope } from './scope.js';

/** What the memory endpoints need: the store (read), the log (write: publish, then apply), the query embedder. */
export interface MemoryPorts {
  store: MemoryStore;
  log: MemoryLog;
  /** The model the store's vectors were made with. */
  embedder: Embedder;
  views: Pick<DocumentViews, 'get'>;
  now: () => Date;
}

/**
 * Bring the store up to the log for these tags before reading them. The store is a projection of
 * the MEMORY stream that this gateway and the memorizer both apply to; on a machine they share
 * one file and this finds nothing to do, while a replica with a store of its own (a pod's
 * emptyDir) reads the commits it has not seen. Reads without a tag (the admin key, no tag named)
 * see what this store has.
 */
async function caughtUp(ports: Pick<MemoryPorts, 'log'>, tags: readonly string[] | undefined): Promise<void> {
  if (tags) await Promise.all(tags.map((t) => ports.log.catchUp(t)));
}

/** A tag a memory call names: it must be in a scoped key's tags (403 otherwise). */
function tagInScope(scope: TagScope, tag: string): string {
  assertTagsInScope(scope, [tag], 'containerTag');
  return tag;
}

function commitOf(tag: string, cause: MemoryCommit['cause'], changes: MemoryChange[], at: Date, id = `mem:api:${newId()}`): MemoryCommit {
  return { id, type: 'memory.committed.v1', containerTag: tag, occurredAt: at.toISOString(), correlationId: id, cause, changes };
}

/** The memory a PATCH or DELETE names: by id, or the live latest one with exactly this content; 404 when none in the tag. */
async function findMemory(ports: MemoryPorts, tag: string, by: { id?: string | undefined; content?: string | undefined }): Promise<MemoryRecord> {
  if (by.id !== undefined) {
    const m = await ports.store.get(by.id);
    if (m && m.containerTag === tag) return m;
    throw new NotFoundError('Memory not found', `no memory with id ${JSON.stringify(by.id)} in container tag ${JSON.stringify(tag)}`);
  }
  const now = ports.now();
  const m = (await ports.store.related(tag, { attributes: [], statements: [by.content ?? ''], ids: [], liveAt: now })).find((x) => x.memory === by.content);
  if (m) return m;
  throw new NotFoundError('Memory not found', `no live memory with exactly this content in container tag ${JSON.stringify(tag)}`);
}

/** The latest version of the chain `m` belongs to. */
async function latestOf(ports: MemoryPorts, m: MemoryRecord): Promise<MemoryRecord> {
  if (m.isLatest) return m;
  const chain = await ports.store.chain(m.id);
  return chain.find((x) => x.isLatest) ?? m;
}

/** POST /v4/memories: direct writes, searchable when the call returns (the gateway applies its own commit). */
export async function createMemories(ports: MemoryPorts, body: unknown, scope: TagScope) {
  const req = CreateMemoriesRequest.parse(body);
  const tag = tagInScope(scope, req.containerTag);
  const documentId = newId();
  const at = ports.now();
  const id = `mem:direct:${documentId}`;
  const records = req.memories.map((m, i) =>
    firstVersion(
      memoryIdFor(id, i),
      tag,
      {
        memory: m.content,
        isStatic: m.isStatic,
        metadata: m.metadata ?? {},
        forgetAfter: m.forgetAfter ?? null,
        forgetReason: m.forgetReason ?? null,
        temporalContext: m.temporalContext ?? { documentDate: at.toISOString() },
        sources: [{ documentId, text: m.content }],
        extractor: 'direct',
      },
      at.toISOString(),
    ),
  );
  await ports.log.commit(tag, async () =>
    commitOf(tag, { kind: 'direct-write', documentId }, records.map((memory) => ({ type: 'memory.created.v1' as const, memory })), at, id),
  );
  return {
    documentId,
    memories: records.map((r) => ({ id: r.id, memory: r.memory, isStatic: r.isStatic, createdAt: r.createdAt, forgetAfter: r.forgetAfter, forgetReason: r.forgetReason, metadata: r.metadata })),
  };
}

/** PATCH /v4/memories: a new version of the named memory's chain. */
export async function updateMemory(ports: MemoryPorts, body: unknown, scope: TagScope) {
  const req = UpdateMemoryRequest.parse(body);
  const tag = tagInScope(scope, req.containerTag);
  let made: MemoryRecord | undefined;
  await ports.log.commit(tag, async () => {
    const parent = await latestOf(ports, await findMemory(ports, tag, req));
    const at = ports.now();
    const id = `mem:api:${newId()}`;
    const version = nextVersion(
      memoryIdFor(id, 0),
      parent,
      {
        memory: req.newContent,
        isStatic: parent.isStatic,
        metadata: req.metadata ?? parent.metadata,
        forgetAfter: req.forgetAfter === undefined ? parent.forgetAfter : req.forgetAfter,
        forgetReason: req.forgetReason === undefined ? parent.forgetReason : req.forgetReason,
        temporalContext: req.temporalContext ?? parent.temporalContext,
        attribute: parent.attribute,
        sources: parent.sources,
        extractor: 'user',
      },
      at.toISOString(),
    );
    made = version;
    return commitOf(tag, { kind: 'update' }, [{ type: 'memory.versioned.v1', memory: version }], at, id);
  });
  const m = made!;
  return { id: m.id, memory: m.memory, version: m.version, parentMemoryId: m.parentMemoryId, rootMemoryId: m.rootMemoryId, createdAt: m.createdAt, forgetAfter: m.forgetAfter, forgetReason: m.forgetReason };
}

/** DELETE /v4/memories: forget one memory (soft: include.forgottenMemories still finds it). */
export async function forgetMemory(ports: MemoryPorts, body: unknown, scope: TagScope) {
  const req = ForgetMemoryRequest.parse(body);
  const tag = tagInScope(scope, req.containerTag);
  let id = '';
  await ports.log.commit(tag, async () => {
    const m = await findMemory(ports, tag, req);
    id = m.id;
    if (m.isForgotten) return null;
    return commitOf(tag, { kind: 'forget' }, [{ type: 'memory.forgotten.v1', memoryId: m.id, reason: req.reason ?? null, cause: 'user' }], ports.now());
  });
  return { id, forgotten: true as const };
}

/** The wire form of a memory entry in list: the record, its history (every version of its chain) and its documents. */
function entryOf(m: MemoryRecord, chain: MemoryRecord[]) {
  const { attribute: _a, sources: _s, ...rest } = m;
  return {
    ...rest,
    containerTags: [m.containerTag],
    history: chain.map((v) => ({ id: v.id, memory: v.memory, version: v.version, isLatest: v.isLatest, createdAt: v.createdAt })),
  };
}

/** POST /v4/memories/list: every version, with history and documentIds. */
export async function listMemories(ports: MemoryPorts, body: unknown, scope: TagScope) {
  const req = ListMemoriesRequest.parse(body ?? {});
  const named = [...(req.containerTags ?? []), ...(req.containerTag ? [req.containerTag] : [])];
  const tags = readTags(scope, named.length ? named : undefined);
  await caughtUp(ports, tags);
  const { items, total } = await ports.store.list({ containerTags: tags, filter: req.filters, sort: req.sort, order: req.order, limit: req.limit, offset: (req.page - 1) * req.limit });
  const chains = new Map<string, MemoryRecord[]>();
  const entries = [];
  for (const m of items) {
    const root = m.rootMemoryId ?? m.id;
    if (!chains.has(root)) chains.set(root, await ports.store.chain(m.id));
    entries.push(entryOf(m, chains.get(root)!));
  }
  return { memoryEntries: entries, pagination: { currentPage: req.page, limit: req.limit, totalItems: total, totalPages: Math.max(1, Math.ceil(total / req.limit)) } };
}

async function searchStore(ports: MemoryPorts, q: { tags: string[] | undefined; text: string; filter?: FilterExpr | undefined; limit: number; includeForgotten?: boolean }): Promise<MemoryHit[]> {
  if (tokenize(q.text).length === 0) return [];
  await caughtUp(ports, q.tags);
  const [vector] = await ports.embedder.embed([q.text]);
  if (!vector) throw new Error('the embedder returned no vector for the query');
  return ports.store.search({ containerTags: q.tags, text: q.text, vector, filter: q.filter, limit: q.limit, now: ports.now(), ...(q.includeForgotten ? { includeForgotten: true } : {}) });
}

/** POST /v4/memories/forget-matching: by ids, or by a query above `threshold`; a dry run only lists. */
export async function forgetMatching(ports: MemoryPorts, body: unknown, scope: TagScope) {
  const req = ForgetMatchingRequest.parse(body);
  const tag = tagInScope(scope, req.containerTag);
  const forgetBatchId = `fb_${newId()}`;
  const now = ports.now();
  await caughtUp(ports, [tag]);
  let candidates: Array<{ id: string; memory: string; similarity: number | null }> = [];
  if (req.ids) {
    for (const id of req.ids) {
      const m = await ports.store.get(id);
      if (m && m.containerTag === tag && !isGone(m, now)) candidates.push({ id: m.id, memory: m.memory, similarity: null });
    }
  } else {
    const hits = await searchStore(ports, { tags: [tag], text: req.query!, limit: req.maxForget });
    candidates = hits.filter((h) => h.score >= req.threshold).map((h) => ({ id: h.memory.id, memory: h.memory.memory, similarity: h.score }));
  }
  candidates = candidates.slice(0, req.maxForget);
  const summary = `${candidates.length} memor${candidates.length === 1 ? 'y' : 'ies'} ${req.dryRun ? 'would be' : 'were'} forgotten in ${tag}`;
  if (req.dryRun || candidates.length === 0) return { dryRun: req.dryRun, count: candidates.length, forgetBatchId, summary, ...(req.dryRun ? { candidates } : { forgotten: [] }) };
  await ports.log.commit(tag, async () =>
    commitOf(
      tag,
      { kind: 'forget-matching', forgetBatchId },
      candidates.map((c) => ({ type: 'memory.forgotten.v1' as const, memoryId: c.id, reason: req.reason ?? null, cause: 'matching' as const })),
      ports.now(),
    ),
  );
  return { dryRun: false, count: candidates.length, forgetBatchId, summary, forgotten: candidates };
}

/** POST /v4/profile: static = live latest static memories; dynamic = the most recent live others. Never null. */
export async function profile(ports: MemoryPorts, body: unknown, scope: TagScope) {
  const req = ProfileRequest.parse(body);
  const tag = tagInScope(scope, req.containerTag);
  const started = performance.now();
  const now = ports.now();
  await caughtUp(ports, [tag]);
  let live = await ports.store.tagMemories(tag, { liveAt: now });
  if (req.filters) live = live.filter((m) => matchesFilter(m.metadata, req.filters!));
  const byRecent = [...live].sort((a, b) => (a.updatedAt < b.updatedAt ? 1 : a.updatedAt > b.updatedAt ? -1 : 0));
  const out: { profile: { static: string[]; dynamic: string[] }; searchResults?: { results: V4SearchResult[]; total: number; timing: number } } = {
    profile: {
      static: byRecent.filter((m) => m.isStatic).map((m) => m.memory),
      dynamic: byRecent.filter((m) => !m.isStatic).slice(0, DYNAMIC_PROFILE_SIZE).map((m) => m.memory),
    },
  };
  if (req.q !== undefined) {
    const hits = (await searchStore(ports, { tags: [tag], text: req.q, filter: req.filters, limit: 10 })).filter((h) => h.score >= req.threshold);
    const results = await Promise.all(hits.map((h) => memoryHit(ports, h, {})));
    out.searchResults = { results, total: results.length, timing: Math.round(performance.now() - started) };
  }
  return out;
}

/** How many recent non-static memories the profile's `dynamic` lists. */
export const DYNAMIC_PROFILE_SIZE = 20;

type ContextMemory = NonNullable<NonNullable<V4SearchResult['context']>['parents']>[number];

/** `context`: earlier versions as parents (version −1, −2…), later ones as children (+1…), linked memories as related. */
async function contextOf(ports: MemoryPorts, m: MemoryRecord): Promise<NonNullable<V4SearchResult['context']>> {
  const chain = await ports.store.chain(m.id);
  const entry = (x: MemoryRecord, relation: ContextMemory['relation']): ContextMemory => ({ memory: x.memory, relation, updatedAt: x.updatedAt, metadata: x.metadata, version: x.version - m.version });
  const parents = chain.filter((x) => x.version < m.version).sort((a, b) => b.version - a.version).map((x) => entry(x, 'updates'));
  const children = chain.filter((x) => x.version > m.version).map((x) => entry(x, 'updates'));
  const related: ContextMemory[] = [];
  for (const r of m.relations) {
    if (r.relation === 'updates') continue;
    const other = await ports.store.get(r.memoryId);
    if (other && other.containerTag === m.containerTag) related.push({ ...entry(other, r.relation), version: other.version });
  }
  return { parents, children, related };
}

/** One memory hit of /v4/search (and profile's searchResults). */
export async function memoryHit(ports: MemoryPorts, h: MemoryHit, include: { relatedMemories?: boolean | undefined; documents?: boolean | undefined }): Promise<V4SearchResult> {
  const m = h.memory;
  const docs: DocumentView[] = [];
  if (include.documents) {
    for (const id of m.documentIds) {
      const v = await ports.views.get(id);
      if (v) docs.push(v);
    }
  }
  return {
    id: m.id,
    memory: m.memory,
    similarity: h.score,
    metadata: m.metadata,
    updatedAt: m.updatedAt,
    version: m.version,
    ...(include.relatedMemories ? { context: await contextOf(ports, m) } : {}),
    ...(include.documents
      ? { documents: docs.map((v) => ({ id: v.id, createdAt: v.createdAt, updatedAt: v.updatedAt, ...(v.title !== null ? { title: v.title } : {}), type: v.type, metadata: v.metadata })) }
      : {}),
  };
}

/** Memory hits for /v4/search: the tag scope and filters restrict before ranking. */
export async function searchMemoryHits(
  ports: MemoryPorts,
  q: { tags: string[] | undefined; text: string; filter?: FilterExpr | undefined; limit: number; threshold: number; include: { forgottenMemories?: boolean | undefined; relatedMemories?: boolean | undefined; documents?: boolean | undefined } },
): Promise<V4SearchResult[]> {
  const hits = (await searchStore(ports, { tags: q.tags, text: q.text, filter: q.filter, limit: q.limit, includeForgotten: q.include.forgottenMemories === true })).filter((h) => h.score >= q.threshold);
  return Promise.all(hits.map((h) => memoryHit(ports, h, q.include)));
}

/**
 * A document's memory phase for GET /v3/documents/{id}: `dreaming` until every tag of a
 * `memory` document has memorized its current revision, then `done`, with the memories it taught.
 */
export async function dreamingOf(ports: Pick<MemoryPorts, 'store' | 'log'>, v: DocumentView): Promise<{ dreamingStatus: 'dreaming' | 'done'; memories: Array<{ id: string; memory: string; version: number; isLatest: boolean; isForgotten: boolean }> } | null> {
  if (v.taskType !== 'memory' || v.status === 'failed') return null;
  await caughtUp(ports, v.containerTags);
  const done = v.status === 'done' && (await Promise.all(v.containerTags.map((t) => ports.store.memorized(v.id, t)))).every((r) => r !== null && r.revision >= v.revision);
  const memories = (await ports.store.documentMemories(v.id)).map((m) => ({ id: m.id, memory: m.memory, version: m.version, isLatest: m.isLatest, isForgotten: m.isForgotten }));
  return { dreamingStatus: done ? 'done' : 'dreaming', memories };
}
