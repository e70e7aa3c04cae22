import type { FilterExpr, MemoryCommit, MemoryRecord } from '@memstream/contracts';

export interface MemorySearchQuery {
  /** Restricts before ranking: a memory of another tag is never a candidate. */
  containerTags: string[] | undefined;
  text: string;
  /** The query's vector, of the store's embedding model. */
  vector: Float32Array;
  filter?: FilterExpr | undefined;
  limit: number;
  /** Forgotten and expired memories are left out unless this is set. */
  includeForgotten?: boolean;
  /** Superseded versions are left out unless this is set. */
  includeSuperseded?: boolean;
  now: Date;
}

export interface MemoryHit {
  memory: MemoryRecord;
  /** RRF of the dense and keyword ranks, normalised to 0..1 (first in both lists = 1). */
  score: number;
}

/** What a set of candidates may concern in a tag (resolution reads only these, never the whole tag). */
export interface RelatedMemoriesQuery {
  /** Memories with one of these (subject, attribute). */
  attributes: { subject: string; key: string }[];
  /** Memories stating one of these (compared as `sameStatement` does). */
  statements: string[];
  /** Memories by id (ones an extractor named in `updates` / `extends`). */
  ids: string[];
  /** Only live latest memories at this time are returned. */
  liveAt: Date;
}

export interface MemoryListQuery {
  containerTags: string[] | undefined;
  filter?: FilterExpr | undefined;
  sort: 'createdAt' | 'updatedAt';
  order: 'asc' | 'desc';
  limit: number;
  offset: number;
}

/**
 * The memory store: the fold of the MEMORY stream, plus dense and keyword search over the
 * memories. Commits are applied in their tag's subject order; each tag remembers the sequence of
 * the last commit applied, so applying one twice (a redelivery, a crash between publish and
 * apply, a replay) changes nothing.
 */
export interface MemoryStore {
  /** The embedding model of the stored vectors. */
  readonly model: string;
  /** Apply a commit found at stream sequence `seq`; false when the tag had already applied it. */
  apply(commit: MemoryCommit, seq: number): Promise<boolean>;
  /** The stream sequence of the last commit applied for a tag (0: none). */
  tagSeq(containerTag: string): Promise<number>;
  get(id: string): Promise<MemoryRecord | null>;
  /** Every version of the chain `id` belongs to, oldest first. */
  chain(id: string): Promise<MemoryRecord[]>;
  /** The tag's memories; by default every version, forgotten or not. */
  tagMemories(containerTag: string, opts?: { liveAt?: Date }): Promise<MemoryRecord[]>;
  /** The tag's live latest memories a set of candidates may concern: indexed lookups, bounded by the candidates, not the tag. */
  related(containerTag: string, q: RelatedMemoriesQuery): Promise<MemoryRecord[]>;
  /** What an extractor is shown: the tag's `limit` newest live latest static memories, then its `limit` newest others. */
  recent(containerTag: string, q: { liveAt: Date; limit: number }): Promise<MemoryRecord[]>;
  /** Memories learned from a document (in any tag). */
  documentMemories(documentId: string): Promise<MemoryRecord[]>;
  /** Whether an extraction of this document revision was committed for the tag. */
  memorized(documentId: string, containerTag: string): Promise<{ revision: number } | null>;
  list(q: MemoryListQuery): Promise<{ items: MemoryRecord[]; total: number }>;
  search(q: MemorySearchQuery): Promise<MemoryHit[]>;
  /** A digest of every record and tag sequence: two stores with equal digests hold the same memories. */
  digest(): Promise<string>;
  ping(): Promise<void>;
  close(): Promise<void>;
}
