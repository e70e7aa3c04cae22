import { QdrantClient } from '@qdrant/js-client-rest';
import type { Schemas } from '@qdrant/js-client-rest';
import { matchesFilter } from '@memstream/contracts';
import type { Metadata } from '@memstream/contracts';
import type { ChunkIndex, ReplaceDocumentInput, SearchHit, SearchQuery, StoredChunk } from './port.js';
import {
  DENSE_VECTOR,
  SPARSE_VECTOR,
  buildSearchFilter,
  chunkCollectionName,
  chunkPointId,
  documentPointId,
  documentsCollectionName,
  filterPayload,
  isChunkCollection,
  metadataIndexFields,
  sparseDocumentVector,
  sparseQueryVector,
} from './qdrant-translate.js';
import { DEFAULT_FUSION, compareHits, fuseHitLists, hybridDepth, normaliseKeywordScore, validateQuery, validateReplace } from './shared.js';

type QFilter = Schemas['Filter'];
type ScoredPoint = Schemas['ScoredPoint'];

const UPSERT_BATCH = 128;
const SCROLL_PAGE = 256;

/** What the documents collection keeps per document. */
interface DocumentRecord {
  documentId: string;
  revision: number;
  model: string;
  dim: number;
  collection: string;
  containerTags: string[];
  metadata: Metadata;
  chunks: number;
}

/** The payload every chunk point carries (the doc-level part is rewritten by updateDocumentMeta). */
interface ChunkPayload {
  documentId: string;
  revision: number;
  index: number;
  hash: string;
  text: string;
  containerTags: string[];
  metadata: Metadata;
  model: string;
  dim: number;
}

function byDocument(documentId: string): QFilter {
  return { must: [{ key: 'documentId', match: { value: documentId } }] };
}

function isConflict(err: unknown): boolean {
  const status = (err as { status?: unknown } | null)?.status;
  return status === 409 || /already exists/i.test(String((err as Error | null)?.message ?? ''));
}

/**
 * The chunk index on a Qdrant server. One collection per (model, dim), named
 * `${prefix}_${slug(model)}_${dim}`, with a named cosine dense vector and a named sparse keyword
 * vector (client-side BM25 term weights, server-side IDF). Revisions live in a small
 * `${prefix}_documents` collection: one point per document holding its revision, model, tags,
 * metadata and chunk collection, written last in each replace, so a replace interrupted half-way
 * is simply redone by the next delivery (point ids are deterministic, every step idempotent).
 * Qdrant has no transactions: the stale check and the writes are not atomic, which is sound
 * because one process (the indexer) writes.
 */
export class QdrantChunkIndex implements ChunkIndex {
  /** Collections known to exist, so searches and writes skip the existence round trip. */
  private readonly known = new Set<string>();
  /** Payload indexes already ensured, per collection. */
  private readonly indexed = new Map<string, Set<string>>();
  private closed = false;

  private constructor(
    private readonly client: QdrantClient,
    private readonly prefix: string,
  ) {}

  /** Connect to the Qdrant at `url`; `collection` is the name prefix of every collection this index uses. */
  static async connect(url: string, opts: { collection?: string; apiKey?: string } = {}): Promise<QdrantChunkIndex> {
    const prefix = opts.collection ?? 'memstream_chunks';
    // checkCompatibility would fire an unawaited version request and log on mismatch; ping() and
    // the collection setup below surface an unreachable or incompatible server instead.
    return QdrantChunkIndex.fromClient(new QdrantClient({ url, apiKey: opts.apiKey, checkCompatibility: false }), { collection: prefix });
  }

  /** An index over an already configured client (custom timeouts or headers, or a test double). */
  static async fromClient(client: QdrantClient, opts: { collection?: string } = {}): Promise<QdrantChunkIndex> {
    const prefix = opts.collection ?? 'memstream_chunks';
    if (!/^[A-Za-z0-9_-]{1,100}$/.test(prefix)) throw new Error(`invalid Qdrant collection prefix: ${prefix}`);
    const index = new QdrantChunkIndex(client, prefix);
    await index.ensureDocumentsCollection();
    return index;
  }

  async replaceDocuments(inputs: ReplaceDocumentInput[]): Promise<Array<{ upserted: number; removed: number; stale: boolean }>> {
    // No transactions in Qdrant: one document after another, each as replaceDocument does it.
    for (const input of inputs) validateReplace(input);
    const out: Array<{ upserted: number; removed: number; stale: boolean }> = [];
    for (const input of inputs) out.push(await this.replaceDocument(input));
    return out;
  }

  async replaceDocument(input: ReplaceDocumentInput): Promise<{ upserted: number; removed: number; stale: boolean }> {
    this.assertOpen();
    validateReplace(input);
    const record = await this.getRecord(input.documentId);
    if (record && record.revision > input.revision) return { upserted: 0, removed: 0, stale: true };

    const collection = chunkCollectionName(this.prefix, input.model, input.dim);
    await this.ensureChunkCollection(collection, input.dim);
    await this.ensureMetadataIndexes(collection, input.metadata);

    // The points the document has now, in the collection the new chunks go to. Chunks in another
    // collection (the model changed) are all removed: their vectors are of another model.
    let removed = 0;
    const existing = new Set<string>();
    if (record && record.collection !== collection) {
      removed += await this.deleteByDocument(record.collection, input.documentId);
    }
    for (const p of await this.scrollDocument(collection, input.documentId, false)) existing.add(String(p.id));

    const docPayload = this.docPayload(input.documentId, input.revision, input.model, input.dim, input.containerTags, input.metadata);
    const wanted = new Map(input.chunks.map((c) => [chunkPointId(input.documentId, c.index, c.hash), c]));
    const fresh = input.chunks.filter((c) => !existing.has(chunkPointId(input.documentId, c.index, c.hash)));
    for (let i = 0; i < fresh.length; i += UPSERT_BATCH) {
      await this.client.upsert(collection, {
        wait: true,
        points: fresh.slice(i, i + UPSERT_BATCH).map((c) => {
          const sparse = sparseDocumentVector(c.text);
          const payload: ChunkPayload & ReturnType<typeof filterPayload> = {
            ...docPayload,
            index: c.index,
            hash: c.hash,
            text: c.text,
          };
          return {
            id: chunkPointId(input.documentId, c.index, c.hash),
            // A point may lack a named vector: a chunk without words gets no sparse vector.
            vector: sparse.indices.length
              ? { [DENSE_VECTOR]: Array.from(c.vector), [SPARSE_VECTOR]: sparse }
              : { [DENSE_VECTOR]: Array.from(c.vector) },
            payload: payload as unknown as Record<string, unknown>,
          };
        }),
      });
    }
    const obsolete = [...existing].filter((id) => !wanted.has(id));
    if (obsolete.length) await this.client.delete(collection, { wait: true, points: obsolete });
    removed += obsolete.length;
    const kept = [...existing].filter((id) => wanted.has(id));
    // Kept chunks take the new revision, tags and metadata.
    if (kept.length) await this.client.setPayload(collection, { wait: true, points: kept, payload: docPayload });

    await this.putRecord({
      documentId: input.documentId,
      revision: input.revision,
      model: input.model,
      dim: input.dim,
      collection,
      containerTags: input.containerTags,
      metadata: input.metadata,
      chunks: input.chunks.length,
    });
    return { upserted: fresh.length, removed, stale: false };
  }

  async updateDocumentMeta(documentId: string, patch: { containerTags?: string[]; metadata?: Metadata }): Promise<void> {
    this.assertOpen();
    const record = await this.getRecord(documentId);
    if (!record) return;
    const next: DocumentRecord = {
      ...record,
      containerTags: patch.containerTags ?? record.containerTags,
      metadata: patch.metadata ?? record.metadata,
    };
    if (await this.collectionExists(record.collection)) {
      await this.ensureMetadataIndexes(record.collection, next.metadata);
      await this.client.setPayload(record.collection, {
        wait: true,
        filter: byDocument(documentId),
        payload: this.docPayload(documentId, record.revision, record.model, record.dim, next.containerTags, next.metadata),
      });
    }
    await this.putRecord(next);
  }

  async deleteDocument(documentId: string): Promise<number> {
    this.assertOpen();
    const record = await this.getRecord(documentId);
    if (!record) return 0;
    const removed = await this.deleteByDocument(record.collection, documentId);
    await this.client.delete(documentsCollectionName(this.prefix), { wait: true, points: [documentPointId(documentId)] });
    return removed;
  }

  async getDocumentChunks(documentId: string): Promise<StoredChunk[]> {
    this.assertOpen();
    const record = await this.getRecord(documentId);
    if (!record || !(await this.collectionExists(record.collection))) return [];
    const points = await this.scrollDocument(record.collection, documentId, true);
    return points
      .map((p) => p.payload as unknown as ChunkPayload)
      .sort((a, b) => a.index - b.index)
      .map((c) => ({
        documentId: c.documentId,
        revision: c.revision,
        index: c.index,
        hash: c.hash,
        text: c.text,
        model: c.model,
        dim: c.dim,
        containerTags: c.containerTags,
        metadata: c.metadata,
      }));
  }

  async search(q: SearchQuery): Promise<SearchHit[]> {
    this.assertOpen();
    validateQuery(q);
    const limit = Math.floor(q.limit);
    if (limit <= 0) return [];
    const built = buildSearchFilter(q);
    if (built.none) return [];
    const tags = q.containerTags ? new Set(q.containerTags) : null;
    const ids = q.documentIds ? new Set(q.documentIds) : null;
    // Applied to every point Qdrant returns: exact restrictions make it a no-op safety net; with
    // a relaxed filter (built.exact false) it is what makes the result exact.
    const accept = (p: ChunkPayload): boolean =>
      (q.model === undefined || p.model === q.model) &&
      (tags === null || p.containerTags.some((t) => tags.has(t))) &&
      (ids === null || ids.has(p.documentId)) &&
      (q.filter === undefined || matchesFilter(p.metadata, q.filter));

    if (q.mode === 'keyword') {
      const collections = (await this.chunkCollections()).filter((c) => isChunkCollection(this.prefix, c, q.model));
      return this.keyword(collections, q.text!, built.filter, built.exact, accept, limit);
    }
    const collection = chunkCollectionName(this.prefix, q.model!, q.vector!.length);
    if (!(await this.collectionExists(collection))) return [];
    if (q.mode === 'dense') return this.dense(collection, q.vector!, built.filter, built.exact, accept, limit);

    // Both lists exactly filtered, fused here on absolute scales as the SQLite adapter does
    // (Qdrant's server-side fusion is rank-based, which makes scores meaningless across queries).
    const depth = hybridDepth(limit);
    return fuseHitLists(
      await this.keyword([collection], q.text!, built.filter, built.exact, accept, depth),
      await this.dense(collection, q.vector!, built.filter, built.exact, accept, depth),
      q.fusion ?? DEFAULT_FUSION,
      limit,
    );
  }

  async stats(): Promise<{ documents: number; chunks: number }> {
    this.assertOpen();
    const documents = (await this.client.count(documentsCollectionName(this.prefix), { exact: true })).count;
    let chunks = 0;
    for (const c of await this.chunkCollections()) chunks += (await this.client.count(c, { exact: true })).count;
    return { documents, chunks };
  }

  async ping(): Promise<void> {
    this.assertOpen();
    await this.client.versionInfo();
  }

  async close(): Promise<void> {
    // The REST client holds no connection that needs closing; this only refuses further use.
    this.closed = true;
  }

  /** Drop every collection of this prefix (tests and operators resetting an index). */
  async dropCollections(): Promise<void> {
    const { collections } = await this.client.getCollections();
    for (const { name } of collections) {
      if (name === documentsCollectionName(this.prefix) || isChunkCollection(this.prefix, name)) {
        await this.client.deleteCollection(name);
      }
    }
    this.known.clear();
    this.indexed.clear();
  }

  private assertOpen(): void {
    if (this.closed) throw new Error('chunk index is closed');
  }

  private docPayload(
    documentId: string,
    revision: number,
    model: string,
    dim: number,
    containerTags: string[],
    metadata: Metadata,
  ): Omit<ChunkPayload, 'index' | 'hash' | 'text'> & ReturnType<typeof filterPayload> {
    return { documentId, revision, model, dim, containerTags, metadata, ...filterPayload(metadata) };
  }

  private async dense(
    collection: string,
    vector: Float32Array,
    filter: QFilter | undefined,
    exact: boolean,
    accept: (p: ChunkPayload) => boolean,
    limit: number,
  ): Promise<SearchHit[]> {
    const query = Array.from(vector);
    const points = await collect(
      (offset, n) => this.client.query(collection, { query, using: DENSE_VECTOR, filter, limit: n, offset, with_payload: true }),
      accept,
      limit,
      exact,
    );
    return points.map((p) => toHit(p, p.score));
  }

  /** Sparse BM25 search over one or more collections (keyword search without a model spans them all). */
  private async keyword(
    collections: string[],
    text: string,
    filter: QFilter | undefined,
    exact: boolean,
    accept: (p: ChunkPayload) => boolean,
    limit: number,
  ): Promise<SearchHit[]> {
    const sparse = sparseQueryVector(text);
    if (sparse.indices.length === 0) return [];
    const hits: SearchHit[] = [];
    for (const collection of collections) {
      const points = await collect(
        (offset, n) =>
          this.client.query(collection, { query: sparse, using: SPARSE_VECTOR, filter, limit: n, offset, with_payload: true }),
        accept,
        limit,
        exact,
      );
      for (const p of points) hits.push(toHit(p, normaliseKeywordScore(p.score)));
    }
    return hits.sort(compareHits).slice(0, limit);
  }

  private async getRecord(documentId: string): Promise<DocumentRecord | null> {
    const [point] = await this.client.retrieve(documentsCollectionName(this.prefix), {
      ids: [documentPointId(documentId)],
      with_payload: true,
      with_vector: false,
    });
    return point?.payload ? (point.payload as unknown as DocumentRecord) : null;
  }

  private async putRecord(record: DocumentRecord): Promise<void> {
    await this.client.upsert(documentsCollectionName(this.prefix), {
      wait: true,
      points: [{ id: documentPointId(record.documentId), vector: { unit: [1] }, payload: record as unknown as Record<string, unknown> }],
    });
  }

  private async deleteByDocument(collection: string, documentId: string): Promise<number> {
    if (!(await this.collectionExists(collection))) return 0;
    const { count } = await this.client.count(collection, { filter: byDocument(documentId), exact: true });
    if (count > 0) await this.client.delete(collection, { wait: true, filter: byDocument(documentId) });
    return count;
  }

  private async scrollDocument(collection: string, documentId: string, withPayload: boolean) {
    const out: Schemas['Record'][] = [];
    let offset: Schemas['ExtendedPointId'] | undefined;
    for (;;) {
      const page = await this.client.scroll(collection, {
        filter: byDocument(documentId),
        limit: SCROLL_PAGE,
        offset,
        with_payload: withPayload,
        with_vector: false,
      });
      out.push(...page.points);
      const next = page.next_page_offset;
      if (next === undefined || next === null || typeof next === 'object') return out;
      offset = next;
    }
  }

  private async chunkCollections(): Promise<string[]> {
    const { collections } = await this.client.getCollections();
    return collections.map((c) => c.name).filter((n) => isChunkCollection(this.prefix, n));
  }

  private async collectionExists(name: string): Promise<boolean> {
    if (this.known.has(name)) return true;
    const { exists } = await this.client.collectionExists(name);
    if (exists) this.known.add(name);
    return exists;
  }

  /**
   * The documents collection stores no vectors of use; it has a 1-dimensional one because every
   * Qdrant release accepts that, whereas vector-less collections and points are version-dependent.
   */
  private async ensureDocumentsCollection(): Promise<void> {
    const name = documentsCollectionName(this.prefix);
    await this.createCollection(name, { vectors: { unit: { size: 1, distance: 'Dot' } } });
  }

  private async ensureChunkCollection(name: string, dim: number): Promise<void> {
    if (this.known.has(name)) return;
    await this.createCollection(name, {
      vectors: { [DENSE_VECTOR]: { size: dim, distance: 'Cosine' } },
      sparse_vectors: { [SPARSE_VECTOR]: { modifier: 'idf' } },
    });
    for (const field of ['documentId', 'containerTags']) await this.ensureIndex(name, field, 'keyword');
  }

  private async createCollection(name: string, config: Parameters<QdrantClient['createCollection']>[1]): Promise<void> {
    if (await this.collectionExists(name)) return;
    try {
      await this.client.createCollection(name, config);
    } catch (err) {
      // Another process may have created it between the check and the create.
      if (!isConflict(err) && !(await this.client.collectionExists(name)).exists) throw err;
    }
    this.known.add(name);
  }

  /** Payload indexes for the filter view of every metadata key written (created once per key). */
  private async ensureMetadataIndexes(collection: string, metadata: Metadata): Promise<void> {
    for (const key of Object.keys(metadata)) {
      for (const { field, schema } of metadataIndexFields(key)) await this.ensureIndex(collection, field, schema);
    }
  }

  private async ensureIndex(collection: string, field: string, schema: Schemas['PayloadSchemaType']): Promise<void> {
    let done = this.indexed.get(collection);
    if (!done) this.indexed.set(collection, (done = new Set()));
    if (done.has(field)) return;
    // Creating an index that exists is accepted by Qdrant, so no existence check is needed.
    await this.client.createPayloadIndex(collection, { field_name: field, field_schema: schema, wait: true });
    done.add(field);
  }
}

/**
 * Page through a ranked query until `limit` accepted points are found or the ranking runs out.
 * With an exact filter the first page (of exactly `limit`) is the answer; with a relaxed one the
 * pages over-fetch (4× the limit, doubling) because post-filtering drops points.
 */
async function collect(
  fetch: (offset: number, limit: number) => Promise<{ points: ScoredPoint[] }>,
  accept: (p: ChunkPayload) => boolean,
  limit: number,
  exact: boolean,
): Promise<ScoredPoint[]> {
  const out: ScoredPoint[] = [];
  let offset = 0;
  let page = exact ? limit : Math.max(limit * 4, 64);
  for (;;) {
    const { points } = await fetch(offset, page);
    for (const p of points) {
      if (!accept(p.payload as unknown as ChunkPayload)) continue;
      out.push(p);
      if (out.length >= limit) return out;
    }
    if (points.length < page) return out;
    offset += points.length;
    page *= 2;
  }
}

function toHit(p: ScoredPoint, score: number): SearchHit {
  const c = p.payload as unknown as ChunkPayload;
  return { documentId: c.documentId, index: c.index, text: c.text, score, containerTags: c.containerTags, metadata: c.metadata };
}
