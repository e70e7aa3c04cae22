import type { FilterExpr, Metadata } from '@memstream/contracts';

/** One chunk of a document as the indexer hands it over: its position, text, and embedding. */
export interface ChunkInput {
  index: number;
  /** sha256 of the text */
  hash: string;
  text: string;
  vector: Float32Array;
}

/** The full current state of one document's chunks, at one revision. */
export interface ReplaceDocumentInput {
  documentId: string;
  revision: number;
  /** Which embedding model made the vectors, and their dimension: search never mixes two models. */
  model: string;
  dim: number;
  containerTags: string[];
  metadata: Metadata;
  chunks: ChunkInput[];
}

/** A chunk as stored, with its document's revision, tags and metadata (no vector). */
export interface StoredChunk {
  documentId: string;
  revision: number;
  index: number;
  hash: string;
  text: string;
  model: string;
  dim: number;
  containerTags: string[];
  metadata: Metadata;
}

/**
 * A search. Restrictions (tags, documentIds, filter) are applied before ranking, so `limit` hits
 * are returned whenever that many chunks pass them. An empty `containerTags` or `documentIds`
 * list matches nothing.
 */
export interface SearchQuery {
  mode: 'dense' | 'keyword' | 'hybrid';
  /** Required for dense and hybrid. */
  vector?: Float32Array;
  /**
   * The model that made `vector`: only chunks embedded by it (and of the vector's dimension) are
   * searched. Required for dense and hybrid; for keyword search it restricts to that model's
   * chunks, and without it keyword search spans every model.
   */
  model?: string;
  /** Required for keyword and hybrid. */
  text?: string;
  /** A hit must carry at least one of these tags. Absent: no tag restriction. */
  containerTags?: string[];
  /** Metadata filter with the semantics of `matchesFilter`. */
  filter?: FilterExpr;
  /** A hit must belong to one of these documents. Absent: no restriction. */
  documentIds?: string[];
  limit: number;
  /**
   * Hybrid only: how the two lists are weighed (default DEFAULT_FUSION). A caller with a strong
   * embedding model gives dense a larger weight; see docs/search.md.
   */
  fusion?: { denseWeight: number; denseFloor: number };
}

/** One ranked chunk with its document's tags and metadata. */
export interface SearchHit {
  documentId: string;
  index: number;
  text: string;
  /**
   * Higher is better, and on a scale that does not depend on the other hits. Dense: cosine
   * similarity; keyword: 0..1, BM25 over the query's best possible BM25 (SQLite) or x/(1+x) of
   * the sparse BM25 (Qdrant); hybrid: 0..1, the weighted sum of the keyword score and the
   * rescaled cosine (see `Fusion` in shared.ts).
   */
  score: number;
  containerTags: string[];
  metadata: Metadata;
}

/** The vector + keyword index of chunks. The indexer writes it; the gateway searches it. */
export interface ChunkIndex {
  /**
   * Make the index hold exactly `chunks` for the document. A stored revision newer than
   * `revision` wins (nothing is written, stale: true). Unchanged chunks (same index and hash)
   * are kept, new ones upserted, the rest removed. An equal revision is applied (redelivery is
   * harmless); a change of model or dimension replaces every chunk.
   */
  replaceDocument(input: ReplaceDocumentInput): Promise<{ upserted: number; removed: number; stale: boolean }>;
  /**
   * `replaceDocument` for several documents (each at most once) at once: in one transaction where
   * the store has them (the indexer writes a batch this way). One result per input, in order;
   * throws, writing nothing where it can, when any input is invalid.
   */
  replaceDocuments(inputs: ReplaceDocumentInput[]): Promise<Array<{ upserted: number; removed: number; stale: boolean }>>;
  /**
   * Change tags or metadata of every chunk of a document in place, without re-embedding. A given
   * field replaces the stored one whole (metadata is not merged); an unknown document is ignored.
   */
  updateDocumentMeta(documentId: string, patch: { containerTags?: string[]; metadata?: Metadata }): Promise<void>;
  /** Remove every chunk of a document; returns how many were removed. */
  deleteDocument(documentId: string): Promise<number>;
  /** The chunks of a document in index order (without vectors). */
  getDocumentChunks(documentId: string): Promise<StoredChunk[]>;
  /** Ranked hits, best first. Throws on a malformed query (e.g. dense without vector or model). */
  search(query: SearchQuery): Promise<SearchHit[]>;
  /** How many documents (including ones with no chunks) and chunks the index holds. */
  stats(): Promise<{ documents: number; chunks: number }>;
  /** Resolves when the backing store answers. */
  ping(): Promise<void>;
  /** Release the store; safe to call twice. */
  close(): Promise<void>;
}
