import type { FilterExpr, Metadata } from '@memstream/contracts';

export interface ChunkInput {
  index: number;
  /** sha256 of the text */
  hash: string;
  text: string;
  vector: Float32Array;
}

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

export interface SearchQuery {
  mode: 'dense' | 'keyword' | 'hybrid';
  /** Required for dense and hybrid. */
  vector?: Float32Array;
  /** The model that made `vector`: only chunks embedded by it are searched. */
  model?: string;
  /** Required for keyword and hybrid. */
  text?: string;
  /** A hit must carry at least one of these tags. Absent: no tag restriction. */
  containerTags?: string[];
  filter?: FilterExpr;
  documentIds?: string[];
  limit: number;
}

export interface SearchHit {
  documentId: string;
  index: number;
  text: string;
  /** Higher is better. Dense: cosine similarity; keyword: BM25 normalised to (0,1]; hybrid: fused. */
  score: number;
  containerTags: string[];
  metadata: Metadata;
}

/** The vector + keyword index of chunks. The indexer writes it; the gateway searches it. */
export interface ChunkIndex {
  /**
   * Make the index hold exactly `chunks` for the document. A stored revision newer than
   * `revision` wins (nothing is written, stale: true). Unchanged chunks (same index and hash)
   * are kept, new ones upserted, the rest removed.
   */
  replaceDocument(input: ReplaceDocumentInput): Promise<{ upserted: number; removed: number; stale: boolean }>;
  /** Change tags or metadata of every chunk of a document in place, without re-embedding. */
  updateDocumentMeta(documentId: string, patch: { containerTags?: string[]; metadata?: Metadata }): Promise<void>;
  /** Remove every chunk of a document; returns how many were removed. */
  deleteDocument(documentId: string): Promise<number>;
  /** The chunks of a document in index order (without vectors). */
  getDocumentChunks(documentId: string): Promise<StoredChunk[]>;
  search(query: SearchQuery): Promise<SearchHit[]>;
  stats(): Promise<{ documents: number; chunks: number }>;
  ping(): Promise<void>;
  close(): Promise<void>;
}
