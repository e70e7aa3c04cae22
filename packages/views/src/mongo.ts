import { MongoClient, MongoServerError } from 'mongodb';
import type { Collection, Db, Document, Filter, Sort } from 'mongodb';
import { DOCUMENT_STATUSES } from '@memstream/contracts';
import type { DocumentStatus, FilterCondition, FilterExpr, Metadata } from '@memstream/contracts';
import { checkCount, type DocumentView, type DocumentViews, type ListQuery, type ListSelection, type ViewWrite } from './port.js';

/**
 * One metadata key as stored in MongoDB. Metadata is kept as an array of entries (the "attribute
 * pattern") instead of a sub-document so that a key is always a value, never a field path: keys with
 * dots or a leading `$` need no escaping, and filters on any key are plain `$elemMatch`es.
 * `l` and `n` are what `matchesFilter` would compute at query time, computed once at write time with
 * the same JavaScript functions, because MongoDB's `$toLower` folds ASCII only and `$toDouble`
 * rejects strings `Number()` accepts (" 12 ", "0x10").
 */
export interface MetadataEntry {
  k: string;
  /** Which JSON type `v` has: string_contains wants strings only, array_contains arrays only. */
  t: 'string' | 'number' | 'boolean' | 'array' | 'other';
  v: unknown;
  /** `v` lower-cased (element-wise for arrays), for ignoreCase conditions. */
  l?: unknown;
  /** `v` as a number when `matchesFilter` would treat it as one (a number, or a numeric string). */
  n?: number;
}

/** A document view as stored in MongoDB: `_id` is the document id and metadata is an entry array. */
interface StoredView extends Omit<DocumentView, 'id' | 'metadata'> {
  _id: string;
  metadataEntries: MetadataEntry[];
}

const DUPLICATE_KEY = 11000;
const BATCH_SIZE = 100;

/** The document view store in a MongoDB collection, for deployments that run several gateways. */
export class MongoDocumentViews implements DocumentViews {
  private closed = false;

  private constructor(
    private readonly client: MongoClient,
    private readonly db: Db,
    private readonly docs: Collection<StoredView>,
  ) {}

  /** Connect to `url` and make sure the listing indexes exist. */
  static async connect(url: string, dbName = 'memstream', collection = 'documents'): Promise<MongoDocumentViews> {
    const client = new MongoClient(url);
    await client.connect();
    try {
      const db = client.db(dbName);
      const docs = db.collection<StoredView>(collection);
      await docs.createIndexes([
        { key: { containerTags: 1 }, name: 'containerTags' },
        { key: { status: 1, createdAt: 1, _id: 1 }, name: 'status_createdAt' },
        { key: { createdAt: 1, _id: 1 }, name: 'createdAt' },
        { key: { updatedAt: 1, _id: 1 }, name: 'updatedAt' },
        { key: { customId: 1 }, name: 'customId' },
      ]);
      return new MongoDocumentViews(client, db, docs);
    } catch (err) {
      await client.close();
      throw err;
    }
  }

  async get(id: string): Promise<DocumentView | null> {
    this.assertOpen();
    const doc = await this.docs.findOne({ _id: id });
    return doc ? fromStored(doc) : null;
  }

  async getMany(ids: string[]): Promise<Array<DocumentView | null>> {
    this.assertOpen();
    if (ids.length === 0) return [];
    const stored = new Map((await this.docs.find({ _id: { $in: [...new Set(ids)] } }).toArray()).map((d) => [d._id, d]));
    // A view per position, even for an id asked twice, as get would give.
    return ids.map((id) => {
      const d = stored.get(id);
      return d ? fromStored(d) : null;
    });
  }

  async put(view: DocumentView, expectedVersion: number): Promise<boolean> {
    this.assertOpen();
    if (!Number.isSafeInteger(expectedVersion) || expectedVersion < 0) {
      throw new RangeError(`expectedVersion must be a non-negative integer, got ${expectedVersion}`);
    }
    const stored = toStored(view, expectedVersion + 1);
    if (expectedVersion === 0) {
      try {
        await this.docs.insertOne(stored);
        return true;
      } catch (err) {
        if (err instanceof MongoServerError && err.code === DUPLICATE_KEY) return false;
        throw err;
      }
    }
    const { _id, ...replacement } = stored;
    const result = await this.docs.replaceOne({ _id, version: expectedVersion }, replacement);
    return result.matchedCount === 1;
  }

  async writeMany(writes: ViewWrite[]): Promise<boolean[]> {
    // No transaction across documents (none is needed: each write is its own compare-and-set).
    return Promise.all(
      writes.map(async (w) => (w.view ? this.put(w.view, w.expectedVersion) : (await this.docs.deleteOne({ _id: w.id, version: w.expectedVersion })).deletedCount === 1)),
    );
  }

  async delete(id: string): Promise<boolean> {
    this.assertOpen();
    const result = await this.docs.deleteOne({ _id: id });
    return result.deletedCount === 1;
  }

  async list(query: ListQuery): Promise<{ items: DocumentView[]; total: number }> {
    this.assertOpen();
    checkCount('limit', query.limit);
    checkCount('offset', query.offset);
    const filter = listQueryToMongo(query) as Filter<StoredView>;
    const total = await this.docs.countDocuments(filter);
    // MongoDB reads limit 0 as "no limit", the opposite of what a page of size 0 means.
    if (query.limit === 0) return { items: [], total };
    const dir = query.order === 'asc' ? 1 : -1;
    const sort: Sort = [
      [query.sort, dir],
      ['_id', dir],
    ];
    const docs = await this.docs.find(filter).sort(sort).skip(query.offset).limit(query.limit).toArray();
    return { items: docs.map(fromStored), total };
  }

  async countByTag(statuses: readonly DocumentStatus[]): Promise<Map<string, number>> {
    this.assertOpen();
    // A tag listed twice on one document counts once, as in SQLite.
    const groups = await this.docs
      .aggregate<{ _id: string; n: number }>([
        { $match: { status: { $in: [...statuses] } } },
        { $project: { tags: { $setUnion: ['$containerTags', []] } } },
        { $unwind: '$tags' },
        { $group: { _id: '$tags', n: { $sum: 1 } } },
      ])
      .toArray();
    return new Map(groups.map((g) => [g._id, g.n]));
  }

  async countByStatus(): Promise<Record<DocumentStatus, number>> {
    this.assertOpen();
    const counts = Object.fromEntries(DOCUMENT_STATUSES.map((s) => [s, 0])) as Record<DocumentStatus, number>;
    const groups = await this.docs
      .aggregate<{ _id: string; n: number }>([{ $group: { _id: '$status', n: { $sum: 1 } } }])
      .toArray();
    for (const { _id, n } of groups) {
      if ((DOCUMENT_STATUSES as readonly string[]).includes(_id)) counts[_id as DocumentStatus] = n;
    }
    return counts;
  }

  async *all(): AsyncIterable<DocumentView> {
    this.assertOpen();
    // The cursor fetches BATCH_SIZE documents per round trip, so the collection is never held in memory at once.
    const cursor = this.docs.find({}).sort({ _id: 1 }).batchSize(BATCH_SIZE);
    try {
      for await (const doc of cursor) yield fromStored(doc);
    } finally {
      await cursor.close();
    }
  }

  async ping(): Promise<void> {
    this.assertOpen();
    await this.db.command({ ping: 1 });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.client.close();
  }

  // The driver reconnects on demand after close(); failing instead matches the SQLite adapter and surfaces use-after-close bugs.
  private assertOpen(): void {
    if (this.closed) throw new Error('MongoDocumentViews is closed');
  }
}

function toStored(view: DocumentView, version: number): StoredView {
  return {
    _id: view.id,
    customId: view.customId,
    revision: view.revision,
    status: view.status,
    title: view.title,
    type: view.type,
    content: view.content,
    summary: view.summary,
    url: view.url,
    filepath: view.filepath,
    source: view.source,
    metadataEntries: toMetadataEntries(view.metadata),
    containerTags: view.containerTags,
    taskType: view.taskType,
    contentHash: view.contentHash,
    error: view.error,
    chunkCount: view.chunkCount,
    metadataVersion: view.metadataVersion,
    createdAt: view.createdAt,
    updatedAt: view.updatedAt,
    version,
  };
}

function fromStored(doc: StoredView): DocumentView {
  return {
    id: doc._id,
    customId: doc.customId,
    revision: doc.revision,
    status: doc.status,
    title: doc.title,
    type: doc.type,
    content: doc.content,
    summary: doc.summary,
    url: doc.url,
    filepath: doc.filepath,
    source: doc.source,
    metadata: Object.fromEntries(doc.metadataEntries.map((e) => [e.k, e.v])) as Metadata,
    containerTags: doc.containerTags,
    taskType: doc.taskType,
    contentHash: doc.contentHash,
    error: doc.error,
    chunkCount: doc.chunkCount,
    metadataVersion: doc.metadataVersion ?? 0,
    createdAt: doc.createdAt,
    updatedAt: doc.updatedAt,
    version: doc.version,
  };
}

/** Metadata as the entry array MongoDB stores, with the lower-cased and numeric forms filters compare against. */
export function toMetadataEntries(metadata: Record<string, unknown>): MetadataEntry[] {
  return Object.entries(metadata).map(([k, v]): MetadataEntry => {
    if (typeof v === 'string') {
      const n = v.trim() !== '' ? Number(v) : NaN;
      return Number.isNaN(n) ? { k, t: 'string', v, l: v.toLowerCase() } : { k, t: 'string', v, l: v.toLowerCase(), n };
    }
    if (typeof v === 'number') return { k, t: 'number', v, l: v, n: v };
    if (typeof v === 'boolean') return { k, t: 'boolean', v, l: v };
    if (Array.isArray(v)) return { k, t: 'array', v, l: v.map((x: unknown) => (typeof x === 'string' ? x.toLowerCase() : x)) };
    return { k, t: 'other', v };
  });
}

/** The MongoDB query selecting what a `ListQuery` selects (paging and sorting aside). */
export function listQueryToMongo(query: ListSelection): Document {
  const parts: Document[] = [];
  if (query.containerTags && query.containerTags.length > 0) parts.push({ containerTags: { $in: query.containerTags } });
  if (query.statuses && query.statuses.length > 0) parts.push({ status: { $in: query.statuses } });
  if (query.filepath !== undefined) {
    parts.push(query.filepath.endsWith('/') ? { filepath: { $regex: '^' + query.filepath.replace(/[.*+?^${}()|[\]\\]/g, '\\$&') } } : { filepath: query.filepath });
  }
  if (query.filter) parts.push(filterToMongo(query.filter));
  if (parts.length === 0) return {};
  return parts.length === 1 ? (parts[0] as Document) : { $and: parts };
}

/** Matches no document; MongoDB rejects an empty `$or`, so an empty OR group becomes this. */
export const MATCH_NOTHING: Document = Object.freeze({ _id: { $in: [] } });

const MONGO_OPERATORS: Record<FilterCondition['numericOperator'], string> = {
  '>': '$gt',
  '<': '$lt',
  '>=': '$gte',
  '<=': '$lte',
  '=': '$eq',
};

/** Translate a filter into a MongoDB query over `metadataEntries` with exactly `matchesFilter`'s semantics. */
export function filterToMongo(e: FilterExpr): Document {
  if (e.op === 'and') return e.items.length === 0 ? {} : { $and: e.items.map(filterToMongo) };
  if (e.op === 'or') return e.items.length === 0 ? MATCH_NOTHING : { $or: e.items.map(filterToMongo) };
  const hit = conditionToMongo(e);
  if (!e.negate) return hit ?? MATCH_NOTHING;
  // $nor also matches documents without the key, just as negating a missing key matches in matchesFilter.
  return hit === null ? {} : { $nor: [hit] };
}

/** The query for "the key exists and its value satisfies the condition", or null when nothing can. */
function conditionToMongo(c: FilterCondition): Document | null {
  const value = c.ignoreCase ? c.value.toLowerCase() : c.value;
  const field = c.ignoreCase ? 'l' : 'v';
  const entry = (test: Document): Document => ({ metadataEntries: { $elemMatch: { k: c.key, ...test } } });
  switch (c.filterType) {
    case 'numeric': {
      const target = Number(c.value);
      if (Number.isNaN(target)) return null;
      return entry({ n: { [MONGO_OPERATORS[c.numericOperator]]: target } });
    }
    case 'array_contains':
      return entry({ t: 'array', [field]: { $in: stringifiedCandidates(value) } });
    case 'string_contains':
      return entry({ t: 'string', [field]: { $regex: escapeRegex(value) } });
    case 'metadata':
      // Equality on an array field matches when any element is equal: the array rule of the metadata filterType.
      return entry({ [field]: { $in: stringifiedCandidates(value) } });
  }
}

/**
 * Every stored value whose `String()` is `value`: the string itself, the number it canonically spells
 * ("5" but not "5.0", whose String() is "5"), and the boolean for "true" / "false".
 */
export function stringifiedCandidates(value: string): Array<string | number | boolean> {
  const out: Array<string | number | boolean> = [value];
  const n = Number(value);
  if (Number.isFinite(n) && String(n) === value) out.push(n);
  if (value === 'true') out.push(true);
  if (value === 'false') out.push(false);
  return out;
}

/** `s` as a regular expression matching exactly that text, for MongoDB's PCRE. */
export function escapeRegex(s: string): string {
  // PCRE cannot take a raw NUL in a pattern, so it is spelled as an escape.
  return s.replace(/[\\^$.*+?()[\]{}|]/g, '\\$&').replace(/\0/g, '\\x00');
}
