import { createHash } from 'node:crypto';
import { QdrantClient } from '@qdrant/js-client-rest';
import type { Schemas } from '@qdrant/js-client-rest';
import { MemoryRecord, matchesFilter, type MemoryCommit } from '@memstream/contracts';
import {
  DENSE_VECTOR,
  RRF_K,
  SPARSE_VECTOR,
  chunkCollectionName,
  filterPayload,
  metadataIndexFields,
  sparseDocumentVector,
  sparseQueryVector,
  translateFilter,
} from '@memstream/chunk-index';
import type { Embedder } from '@memstream/embedder';
import { evolveMemories, isGone, memorizedBy, touchedIds } from '../evolve.js';
import { normalizeStatement } from '../resolve.js';
import type { MemoryHit, MemoryListQuery, MemorySearchQuery, MemoryStore, RelatedMemoriesQuery } from './port.js';

type QFilter = Schemas['Filter'];
type QCondition = Schemas['Condition'];
type PointId = Schemas['ExtendedPointId'];

const SCROLL_PAGE = 256;
const UPSERT_BATCH = 128;
const BEST_RRF = 2 / (RRF_K + 1);
/** `forgetAt` of a memory without forgetAfter: the largest time a Date can hold, so "forgetAt > now" needs no null test. */
const NEVER = 8.64e15;

/** The payload of a memory point: the record as JSON (what reads return) and the fields Qdrant filters and orders on. */
interface MemoryPayload {
  record: string;
  id: string;
  tag: string;
  /** Stream sequence of the commit that last wrote the point: a write of an older commit never replaces it. */
  seq: number;
  isLatest: boolean;
  isForgotten: boolean;
  isStatic: boolean;
  /** forgetAfter in ms (NEVER when unset). */
  forgetAt: number;
  createdAt: string;
  updatedAt: string;
  updatedAtMs: number;
  root: string;
  attr?: string;
  norm: string;
  documentIds: string[];
  metadata: MemoryRecord['metadata'];
}

interface TagPayload {
  kind: 'tag';
  tag: string;
  seq: number;
}
interface MemorizedPayload {
  kind: 'memorized';
  documentId: string;
  tag: string;
  revision: number;
}

const attrKey = (a: { subject: string; key: string }) => `${a.subject}\u001f${a.key}`;

/** A UUID (version-5 bits set) from sha256 of a name: Qdrant point ids are UUIDs or integers. */
function uuidOf(name: string): string {
  const b = createHash('sha256').update(name).digest().subarray(0, 16);
  b[6] = (b[6]! & 0x0f) | 0x50;
  b[8] = (b[8]! & 0x3f) | 0x80;
  const h = b.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`;
}
const memoryPointId = (id: string) => uuidOf(`memory:${id}`);
const tagPointId = (tag: string) => uuidOf(`tag:${tag}`);
const memorizedPointId = (documentId: string, tag: string) => uuidOf(`memorized:${documentId}\u001f${tag}`);

function isConflict(err: unknown): boolean {
  const status = (err as { status?: unknown } | null)?.status;
  return status === 409 || /already exists/i.test(String((err as Error | null)?.message ?? ''));
}

const byCreated = (a: MemoryRecord, b: MemoryRecord) => (a.createdAt < b.createdAt ? -1 : a.createdAt > b.createdAt ? 1 : a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
const olderThan = (field: string, seq: number): QCondition => ({ key: field, range: { lt: seq } });

/**
 * The memory store on a Qdrant server: every memory version is a point (a cosine dense vector of
 * the statement, a sparse BM25 keyword vector, and the record with the fields search and
 * resolution restrict on as payload, each with a payload index), in one collection per embedding
 * model, `${prefix}_${slug(model)}_${dim}`. The per-tag state (the sequence of the last commit
 * applied, and which document revisions were memorized) is a second, small collection beside it,
 * `…_state`. Every lookup of the port is a filtered query or scroll: by chain root, by
 * (subject, attribute), by normalised statement, by id, by source document, and the newest live
 * memories ordered by a range index.
 *
 * Qdrant has no transactions, so a commit is applied as idempotent writes made monotonic with
 * conditional updates (Qdrant ≥ 1.16, `update_filter` / a filtered set_payload): a point, the
 * tag's sequence and a memorized revision are only ever replaced by a write of a later commit.
 * A writer that reads a record, loses the race to a later commit and then writes changes
 * nothing; a crash half-way leaves points of the commit written and the tag's sequence behind,
 * and the next apply of the same commit skips those points and writes the rest. Between the
 * first and the last write of a commit a reader may see part of it (SQLite shows none or all).
 */
export class QdrantMemoryStore implements MemoryStore {
  readonly model: string;
  private readonly points: string;
  private readonly state: string;
  private closed = false;
  /** Commits of one tag are applied one after another within this process. */
  private readonly tagQueues = new Map<string, Promise<unknown>>();
  private readonly indexed = new Set<string>();

  private constructor(
    private readonly client: QdrantClient,
    private readonly embedder: Embedder,
    prefix: string,
  ) {
    this.model = embedder.model;
    this.points = chunkCollectionName(prefix, embedder.model, embedder.dim);
    this.state = `${this.points}_state`;
  }

  /** Connect to the Qdrant at `url`; `collection` is the name prefix of this store's collections. */
  static async connect(url: string, embedder: Embedder, opts: { collection?: string; apiKey?: string } = {}): Promise<QdrantMemoryStore> {
    return QdrantMemoryStore.fromClient(new QdrantClient({ url, apiKey: opts.apiKey, checkCompatibility: false }), embedder, opts);
  }

  /** A store over an already configured client (custom timeouts or headers, or a test double). */
  static async fromClient(client: QdrantClient, embedder: Embedder, opts: { collection?: string } = {}): Promise<QdrantMemoryStore> {
    const prefix = opts.collection ?? 'memstream_memories';
    if (!/^[A-Za-z0-9_-]{1,100}$/.test(prefix)) throw new Error(`invalid Qdrant collection prefix: ${prefix}`);
    const store = new QdrantMemoryStore(client, embedder, prefix);
    await store.setup();
    return store;
  }

  private async setup(): Promise<void> {
    await this.createCollection(this.points, {
      vectors: { [DENSE_VECTOR]: { size: this.embedder.dim, distance: 'Cosine' } },
      sparse_vectors: { [SPARSE_VECTOR]: { modifier: 'idf' } },
    });
    for (const f of ['id', 'tag', 'root', 'attr', 'norm', 'documentIds']) await this.ensureIndex(this.points, f, 'keyword');
    for (const f of ['isLatest', 'isForgotten', 'isStatic']) await this.ensureIndex(this.points, f, 'bool');
    for (const f of ['seq', 'forgetAt', 'updatedAtMs']) await this.ensureIndex(this.points, f, 'float');
    // The state collection stores no vectors of use (a 1-dimensional one, as the chunk index's documents collection).
    await this.createCollection(this.state, { vectors: { unit: { size: 1, distance: 'Dot' } } });
    await this.ensureIndex(this.state, 'kind', 'keyword');
  }

  async apply(commit: MemoryCommit, seq: number): Promise<boolean> {
    this.assertOpen();
    const tag = commit.containerTag;
    const prev = this.tagQueues.get(tag) ?? Promise.resolve();
    const run = prev.then(
      () => this.applyNow(commit, seq),
      () => this.applyNow(commit, seq),
    );
    this.tagQueues.set(tag, run);
    try {
      return await run;
    } finally {
      if (this.tagQueues.get(tag) === run) this.tagQueues.delete(tag);
    }
  }

  private async applyNow(commit: MemoryCommit, seq: number): Promise<boolean> {
    if (seq <= (await this.tagSeq(commit.containerTag))) return false;
    const stored = await this.retrieve(touchedIds(commit));
    const before = new Map<string, MemoryRecord>();
    const seqOf = new Map<string, number>();
    for (const p of stored) {
      before.set(p.id, MemoryRecord.parse(JSON.parse(p.record)));
      seqOf.set(p.id, p.seq);
    }
    const after = evolveMemories(before, commit);
    // Points a commit at or after this one already wrote are left alone (a redelivery, a crash
    // half-way, a writer that got there first).
    const changed = [...after].filter(([id, m]) => before.get(id) !== m && (seqOf.get(id) ?? 0) < seq).map(([, m]) => m);
    const fresh = changed.filter((m) => !before.has(m.id));
    const existing = changed.filter((m) => before.has(m.id));
    await this.ensureMetadataIndexes(changed);

    const vectors = fresh.length ? await this.embedder.embed(fresh.map((m) => m.memory)) : [];
    for (let i = 0; i < fresh.length; i += UPSERT_BATCH) {
      await this.client.upsert(this.points, {
        wait: true,
        points: fresh.slice(i, i + UPSERT_BATCH).map((m, j) => {
          const sparse = sparseDocumentVector(m.memory);
          const dense = Array.from(vectors[i + j]!);
          return {
            id: memoryPointId(m.id),
            vector: sparse.indices.length ? { [DENSE_VECTOR]: dense, [SPARSE_VECTOR]: sparse } : { [DENSE_VECTOR]: dense },
            payload: payloadOf(m, seq) as unknown as Record<string, unknown>,
          };
        }),
        update_filter: { must: [olderThan('seq', seq)] },
      });
    }
    // A changed record keeps its vectors (its statement never changes): only its payload is set,
    // and only while no later commit has written it.
    for (const m of existing) {
      await this.client.setPayload(this.points, {
        wait: true,
        payload: payloadOf(m, seq) as unknown as Record<string, unknown>,
        filter: { must: [{ has_id: [memoryPointId(m.id)] }, olderThan('seq', seq)] },
      });
    }
    // One request per revision number (usually one): a memorized revision is only ever replaced by a later one.
    const byRevision = new Map<number, string[]>();
    for (const { documentId, revision } of memorizedBy(commit)) byRevision.set(revision, [...(byRevision.get(revision) ?? []), documentId]);
    for (const [revision, documentIds] of byRevision) {
      await this.client.upsert(this.state, {
        wait: true,
        points: documentIds.map((documentId) => {
          const payload: MemorizedPayload = { kind: 'memorized', documentId, tag: commit.containerTag, revision };
          return { id: memorizedPointId(documentId, commit.containerTag), vector: { unit: [1] }, payload: payload as unknown as Record<string, unknown> };
        }),
        update_filter: { must: [olderThan('revision', revision)] },
      });
    }
    // The tag's sequence last: until it is written, the commit is applied again (idempotently).
    const tagPayload: TagPayload = { kind: 'tag', tag: commit.containerTag, seq };
    await this.client.upsert(this.state, {
      wait: true,
      points: [{ id: tagPointId(commit.containerTag), vector: { unit: [1] }, payload: tagPayload as unknown as Record<string, unknown> }],
      update_filter: { must: [olderThan('seq', seq)] },
    });
    return true;
  }

  async tagSeq(tag: string): Promise<number> {
    this.assertOpen();
    const [p] = await this.client.retrieve(this.state, { ids: [tagPointId(tag)], with_payload: true, with_vector: false });
    return (p?.payload as TagPayload | undefined)?.seq ?? 0;
  }

  async get(id: string): Promise<MemoryRecord | null> {
    this.assertOpen();
    const [p] = await this.retrieve([id]);
    return p ? parse(p) : null;
  }

  async chain(id: string): Promise<MemoryRecord[]> {
    const m = await this.get(id);
    if (!m) return [];
    const all = await this.scrollAll({ must: [{ key: 'root', match: { value: m.rootMemoryId ?? m.id } }] });
    return all.map(parse).sort((a, b) => a.version - b.version);
  }

  async related(tag: string, q: RelatedMemoriesQuery): Promise<MemoryRecord[]> {
    this.assertOpen();
    const should: QCondition[] = [];
    if (q.attributes.length) should.push({ key: 'attr', match: { any: [...new Set(q.attributes.map(attrKey))] } });
    if (q.statements.length) should.push({ key: 'norm', match: { any: [...new Set(q.statements.map(normalizeStatement))] } });
    if (q.ids.length) should.push({ key: 'id', match: { any: [...new Set(q.ids)] } });
    if (should.length === 0) return [];
    const points = await this.scrollAll({ must: [...liveLatest(tag, q.liveAt)], should });
    return points.map(parse).filter((m) => m.containerTag === tag && m.isLatest && !isGone(m, q.liveAt));
  }

  async recent(tag: string, q: { liveAt: Date; limit: number }): Promise<MemoryRecord[]> {
    this.assertOpen();
    const out: MemoryRecord[] = [];
    if (q.limit <= 0) return out;
    for (const isStatic of [true, false]) {
      const must = [...liveLatest(tag, q.liveAt), { key: 'isStatic', match: { value: isStatic } }];
      const page = await this.client.scroll(this.points, {
        filter: { must },
        limit: q.limit,
        order_by: { key: 'updatedAtMs', direction: 'desc' },
        with_payload: true,
        with_vector: false,
      });
      const got = page.points.map((p) => p.payload as unknown as MemoryPayload);
      // Order ties (one commit's memories share a time) are broken by id, as the SQLite store
      // does: every memory at the oldest time returned is fetched, so the cut is exact.
      if (got.length === q.limit) {
        const last = got[got.length - 1]!.updatedAtMs;
        const ties = await this.scrollAll({ must: [...must, { key: 'updatedAtMs', range: { gte: last, lte: last } }] });
        const seen = new Set(got.map((p) => p.id));
        for (const t of ties) if (!seen.has(t.id)) got.push(t);
      }
      got.sort((a, b) => (a.updatedAt < b.updatedAt ? 1 : a.updatedAt > b.updatedAt ? -1 : a.id < b.id ? 1 : a.id > b.id ? -1 : 0));
      out.push(...got.slice(0, q.limit).map(parse));
    }
    return out;
  }

  async tagMemories(tag: string, opts: { liveAt?: Date } = {}): Promise<MemoryRecord[]> {
    this.assertOpen();
    const all = (await this.scrollAll({ must: [{ key: 'tag', match: { value: tag } }] })).map(parse).sort(byCreated);
    return opts.liveAt ? all.filter((m) => m.isLatest && !isGone(m, opts.liveAt!)) : all;
  }

  async documentMemories(documentId: string): Promise<MemoryRecord[]> {
    this.assertOpen();
    return (await this.scrollAll({ must: [{ key: 'documentIds', match: { value: documentId } }] })).map(parse).sort(byCreated);
  }

  async memorized(documentId: string, tag: string): Promise<{ revision: number } | null> {
    this.assertOpen();
    const [p] = await this.client.retrieve(this.state, { ids: [memorizedPointId(documentId, tag)], with_payload: true, with_vector: false });
    const m = p?.payload as MemorizedPayload | undefined;
    return m ? { revision: m.revision } : null;
  }

  async list(q: MemoryListQuery): Promise<{ items: MemoryRecord[]; total: number }> {
    this.assertOpen();
    if (q.containerTags && q.containerTags.length === 0) return { items: [], total: 0 };
    const must: QCondition[] = q.containerTags ? [{ key: 'tag', match: { any: q.containerTags } }] : [];
    const t = q.filter ? translateFilter(q.filter) : null;
    if (t?.kind === 'none') return { items: [], total: 0 };
    if (t?.kind === 'cond') must.push(t.cond);
    let items = (await this.scrollAll(must.length ? { must } : undefined)).map(parse);
    if (q.filter) items = items.filter((m) => matchesFilter(m.metadata, q.filter!));
    const dir = q.order === 'asc' ? 1 : -1;
    items.sort((a, b) => dir * (a[q.sort] < b[q.sort] ? -1 : a[q.sort] > b[q.sort] ? 1 : a.id < b.id ? -1 : 1));
    return { items: items.slice(q.offset, q.offset + q.limit), total: items.length };
  }

  async search(q: MemorySearchQuery): Promise<MemoryHit[]> {
    this.assertOpen();
    if (q.limit <= 0 || (q.containerTags && q.containerTags.length === 0)) return [];
    const must: QCondition[] = [];
    if (q.containerTags) must.push({ key: 'tag', match: { any: q.containerTags } });
    if (!q.includeSuperseded) must.push({ key: 'isLatest', match: { value: true } });
    if (!q.includeForgotten) must.push({ key: 'isForgotten', match: { value: false } }, { key: 'forgetAt', range: { gt: q.now.getTime() } });
    let exact = true;
    if (q.filter) {
      const t = translateFilter(q.filter);
      if (t.kind === 'none') return [];
      if (t.kind === 'cond') must.push(t.cond);
      exact = t.exact;
    }
    const filter: QFilter | undefined = must.length ? { must } : undefined;
    const tags = q.containerTags ? new Set(q.containerTags) : null;
    // The payload conditions are exact but for a relaxed metadata filter; checking the record
    // again is what makes a result exact either way (and guards the tag boundary twice).
    const accept = (p: MemoryPayload): boolean => {
      const m = JSON.parse(p.record) as MemoryRecord;
      return (
        (tags === null || tags.has(m.containerTag)) &&
        (q.includeSuperseded || m.isLatest) &&
        (q.includeForgotten || !isGone(m, q.now)) &&
        (!q.filter || matchesFilter(m.metadata, q.filter))
      );
    };
    const depth = Math.max(q.limit * 4, 50);
    const dense =
      q.vector.length === this.embedder.dim
        ? await this.ranked({ query: Array.from(q.vector), using: DENSE_VECTOR }, filter, exact, accept, depth)
        : [];
    const sparse = sparseQueryVector(q.text);
    const keyword = sparse.indices.length ? await this.ranked({ query: sparse, using: SPARSE_VECTOR }, filter, exact, accept, depth) : [];
    const scores = new Map<string, { p: MemoryPayload; s: number }>();
    const add = (list: MemoryPayload[]) =>
      list.forEach((p, i) => {
        const e = scores.get(p.id) ?? { p, s: 0 };
        e.s += 1 / (RRF_K + i + 1);
        scores.set(p.id, e);
      });
    add(dense);
    add(keyword);
    return [...scores.values()]
      .map(({ p, s }) => ({ memory: parse(p), score: Math.min(1, s / BEST_RRF) }))
      .sort((a, b) => b.score - a.score || (a.memory.id < b.memory.id ? -1 : 1))
      .slice(0, q.limit);
  }

  async digest(): Promise<string> {
    this.assertOpen();
    const h = createHash('sha256');
    const records = (await this.scrollAll(undefined)).sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    for (const p of records) h.update(p.record).update('\n');
    const tags = (await this.scrollAll({ must: [{ key: 'kind', match: { value: 'tag' } }] }, this.state)) as unknown as TagPayload[];
    for (const t of tags.sort((a, b) => (a.tag < b.tag ? -1 : a.tag > b.tag ? 1 : 0))) h.update(`${t.tag}=${t.seq}\n`);
    return h.digest('hex');
  }

  async ping(): Promise<void> {
    this.assertOpen();
    await this.client.versionInfo();
  }

  async close(): Promise<void> {
    // The REST client holds no connection that needs closing; this only refuses further use.
    this.closed = true;
  }

  /** Drop this store's collections (tests and operators resetting the store). */
  async dropCollections(): Promise<void> {
    for (const name of [this.points, this.state]) {
      if ((await this.client.collectionExists(name)).exists) await this.client.deleteCollection(name);
    }
    this.indexed.clear();
  }

  private assertOpen(): void {
    if (this.closed) throw new Error('memory store is closed');
  }

  private async retrieve(ids: string[]): Promise<MemoryPayload[]> {
    if (ids.length === 0) return [];
    const points = await this.client.retrieve(this.points, { ids: ids.map(memoryPointId), with_payload: true, with_vector: false });
    return points.map((p) => p.payload as unknown as MemoryPayload);
  }

  /** Every point matching a filter, page by page (scroll order is by point id). */
  private async scrollAll(filter: QFilter | undefined, collection = this.points): Promise<MemoryPayload[]> {
    const out: MemoryPayload[] = [];
    let offset: PointId | undefined;
    for (;;) {
      const page = await this.client.scroll(collection, { filter, limit: SCROLL_PAGE, offset, with_payload: true, with_vector: false });
      for (const p of page.points) out.push(p.payload as unknown as MemoryPayload);
      const next = page.next_page_offset;
      if (next === undefined || next === null || typeof next === 'object') return out;
      offset = next;
    }
  }

  /**
   * A ranked list of accepted points, best first. With an exact filter the first page (of
   * exactly `limit`) is the answer; with a relaxed one the pages over-fetch (doubling) because
   * post-filtering drops points.
   */
  private async ranked(
    how: { query: number[] | Schemas['SparseVector']; using: string },
    filter: QFilter | undefined,
    exact: boolean,
    accept: (p: MemoryPayload) => boolean,
    limit: number,
  ): Promise<MemoryPayload[]> {
    const out: MemoryPayload[] = [];
    let offset = 0;
    let page = exact ? limit : Math.max(limit * 4, 64);
    for (;;) {
      const { points } = await this.client.query(this.points, { ...how, filter, limit: page, offset, with_payload: true });
      for (const p of points) {
        const payload = p.payload as unknown as MemoryPayload;
        if (!accept(payload)) continue;
        out.push(payload);
        if (out.length >= limit) return out;
      }
      if (points.length < page) return out;
      offset += points.length;
      page *= 2;
    }
  }

  private async createCollection(name: string, config: Parameters<QdrantClient['createCollection']>[1]): Promise<void> {
    if ((await this.client.collectionExists(name)).exists) return;
    try {
      await this.client.createCollection(name, config);
    } catch (err) {
      // Another process may have created it between the check and the create.
      if (!isConflict(err) && !(await this.client.collectionExists(name)).exists) throw err;
    }
  }

  /** Payload indexes for the filter view of every metadata key written (created once per key and process). */
  private async ensureMetadataIndexes(records: MemoryRecord[]): Promise<void> {
    for (const key of new Set(records.flatMap((m) => Object.keys(m.metadata)))) {
      for (const { field, schema } of metadataIndexFields(key)) await this.ensureIndex(this.points, field, schema);
    }
  }

  private async ensureIndex(collection: string, field: string, schema: Schemas['PayloadSchemaType']): Promise<void> {
    const k = `${collection}\u0000${field}`;
    if (this.indexed.has(k)) return;
    // Creating an index that exists is accepted by Qdrant.
    await this.client.createPayloadIndex(collection, { field_name: field, field_schema: schema, wait: true });
    this.indexed.add(k);
  }
}

function parse(p: MemoryPayload): MemoryRecord {
  return MemoryRecord.parse(JSON.parse(p.record));
}

/** The conditions of "live latest in this tag at `at`", as payload filters. */
function liveLatest(tag: string, at: Date): QCondition[] {
  return [
    { key: 'tag', match: { value: tag } },
    { key: 'isLatest', match: { value: true } },
    { key: 'isForgotten', match: { value: false } },
    { key: 'forgetAt', range: { gt: at.getTime() } },
  ];
}

function payloadOf(m: MemoryRecord, seq: number): MemoryPayload & ReturnType<typeof filterPayload> {
  return {
    record: JSON.stringify(m),
    id: m.id,
    tag: m.containerTag,
    seq,
    isLatest: m.isLatest,
    isForgotten: m.isForgotten,
    isStatic: m.isStatic,
    forgetAt: m.forgetAfter === null ? NEVER : Date.parse(m.forgetAfter),
    createdAt: m.createdAt,
    updatedAt: m.updatedAt,
    updatedAtMs: Date.parse(m.updatedAt),
    root: m.rootMemoryId ?? m.id,
    ...(m.attribute ? { attr: attrKey(m.attribute) } : {}),
    norm: normalizeStatement(m.memory),
    documentIds: m.documentIds,
    metadata: m.metadata,
    ...filterPayload(m.metadata),
  };
}
