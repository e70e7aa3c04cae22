import type { AddDocumentResponse, DocumentResponse, ListDocumentsResponse, V4SearchResponse } from '@memstream/contracts';

/** Who is calling: the admin key (every tag) or a scoped key (only its tags). */
export interface Caller {
  kind: 'admin' | 'scoped';
  keyId?: string;
  /** null: every container tag (the admin key). */
  containerTags: string[] | null;
}

/**
 * What the MCP tools need from memstream, for one caller: the HTTP operations of the same names,
 * with the same bodies, the same validation and the same tag scope. Errors are the AppError
 * family (status, message, details), which the tools turn into tool errors.
 */
export interface MemoryBackend {
  readonly caller: Caller;
  /** POST /v4/search */
  searchMemories(body: Record<string, unknown>): Promise<V4SearchResponse>;
  /** POST /v3/documents */
  addDocument(body: Record<string, unknown>): Promise<AddDocumentResponse>;
  /** GET /v3/documents/{id or customId} */
  getDocument(idOrCustomId: string): Promise<DocumentResponse>;
  /** DELETE /v3/documents/{id or customId}; returns the document id. */
  deleteDocument(idOrCustomId: string): Promise<string>;
  /** POST /v3/documents/list */
  listDocuments(body: Record<string, unknown>): Promise<ListDocumentsResponse>;
  /** The memory layer, when the gateway has one: memories learned from documents, and profiles. */
  memoryLayer?: MemoryLayer;
}

/** POST /v4/memories/list and POST /v4/profile, the fields the tools use. */
export interface MemoryLayer {
  listMemories(body: Record<string, unknown>): Promise<{
    memoryEntries: Array<{ id: string; memory: string; isStatic: boolean; isLatest: boolean; isForgotten: boolean; containerTags: string[]; updatedAt: string }>;
    pagination: { currentPage: number; totalPages: number; totalItems: number };
  }>;
  profile(body: Record<string, unknown>): Promise<{ profile: { static: string[]; dynamic: string[] } }>;
}
