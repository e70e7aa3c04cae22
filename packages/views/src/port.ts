import type { DocumentStatus, DocumentType, FailureClass, FilterExpr, Metadata, Stage } from '@memstream/contracts';

/** One document as the projection sees it: the queryable view that GET and list read. */
export interface DocumentView {
  id: string;
  customId: string | null;
  /** The revision this view describes; a stale revision never overwrites a newer one. */
  revision: number;
  status: DocumentStatus;
  title: string | null;
  type: DocumentType;
  content: string | null;
  summary: string | null;
  url: string | null;
  filepath: string | null;
  source: string | null;
  metadata: Metadata;
  containerTags: string[];
  taskType: 'memory' | 'superrag';
  /** sha256 of what was submitted for this revision. */
  contentHash: string | null;
  error: { stage: Stage; reason: string; class: FailureClass } | null;
  chunkCount: number;
  /** The metadata version the tags and metadata come from: a lower one never overwrites them. */
  metadataVersion: number;
  createdAt: string;
  updatedAt: string;
  /** Optimistic-concurrency token: bumped by every successful put. */
  version: number;
}

/** One write of `writeMany`: store `view` (or delete the document, when null) if the stored version equals `expectedVersion`. */
export interface ViewWrite {
  id: string;
  view: DocumentView | null;
  expectedVersion: number;
}

/** What `list` selects and how it pages; every given criterion must hold. */
export interface ListQuery {
  /** A document matches when it carries any of these tags. Absent or empty: no restriction. */
  containerTags?: string[];
  /** A document matches when its status is one of these. Absent or empty: no restriction. */
  statuses?: DocumentStatus[];
  /** Metadata filter with exactly the semantics of `matchesFilter`, evaluated inside the store. */
  filter?: FilterExpr;
  /** An exact filepath, or every path under it when it ends with '/'. */
  filepath?: string;
  sort: 'createdAt' | 'updatedAt';
  /** Direction of the sort; documents with equal sort keys are ordered by id in the same direction. */
  order: 'asc' | 'desc';
  limit: number;
  offset: number;
}

/** What a list selects, without its order and paging. */
export type ListSelection = Pick<ListQuery, 'containerTags' | 'statuses' | 'filter' | 'filepath'>;

/** The adapters' rule for a count argument (limit, offset): a RangeError unless a non-negative safe integer. */
export function checkCount(name: string, n: number): void {
  if (!Number.isSafeInteger(n) || n < 0) throw new RangeError(`${name} must be a non-negative integer, got ${n}`);
}

/** The document view store. Writers are the projection; readers are the gateway and replay. */
export interface DocumentViews {
  get(id: string): Promise<DocumentView | null>;
  /**
   * The views of several documents (from one snapshot where the store has them: the projection
   * reads a batch's documents this way): one per id, in order, null where there is none.
   */
  getMany(ids: string[]): Promise<Array<DocumentView | null>>;
  /**
   * Store `view` if the stored version equals `expectedVersion` (0: the document must not exist yet).
   * The stored version becomes expectedVersion + 1. Returns false, writing nothing, on a conflict.
   */
  put(view: DocumentView, expectedVersion: number): Promise<boolean>;
  /** Remove a document; true when it existed. */
  delete(id: string): Promise<boolean>;
  /**
   * Several compare-and-set writes of different documents at once (one transaction where the
   * store has them: the projection writes a batch of events this way). Each succeeds or fails on
   * its own, exactly as `put` would; a write with `view` null deletes the document if its stored
   * version is still `expectedVersion`. One result per write, in order.
   */
  writeMany(writes: ViewWrite[]): Promise<boolean[]>;
  /** One page of the matching documents, and how many match in all (ignoring limit and offset). */
  list(query: ListQuery): Promise<{ items: DocumentView[]; total: number }>;
  /**
   * How many documents in one of `statuses` each container tag has; a tag with none is absent. The
   * gateway reads it once a second for every tag at once (its lanes, docs/pipeline.md "Fairness"):
   * one pass over those documents however many tags ask, where a count per tag cost a pass over
   * the whole backlog for every quiet tag. Not a snapshot: a document that changes status during
   * the read may be counted in both or in neither, and the store's other callers are not held up
   * by it (SQLite reads it in pages, yielding between them).
   */
  countByTag(statuses: readonly DocumentStatus[]): Promise<Map<string, number>>;
  /** How many documents are in each status; every status is present, zero included. */
  countByStatus(): Promise<Record<DocumentStatus, number>>;
  /** Every document, in id order: for replay comparison and export. */
  all(): AsyncIterable<DocumentView>;
  /** Throws when the store cannot be reached. */
  ping(): Promise<void>;
  close(): Promise<void>;
}
