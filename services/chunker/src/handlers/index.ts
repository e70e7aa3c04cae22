import { follow, stageHandler, type Handler, type StageHandler } from '@memstream/bus';
import type { Chunk, ChunkedData } from '@memstream/contracts';
import { PermanentError } from '@memstream/kit';
import { TOKENIZER, chunkText, type TextFormat } from './chunk.js';

export { chunkText, TOKENIZER } from './chunk.js';

export interface ChunkerOptions {
  maxTokens: number;
  /** Where the chunking runs (adapters/chunk-thread.ts moves long texts off the main thread); default: here. */
  chunk?: (text: string, format: TextFormat, opts: { maxTokens: number }) => Promise<Chunk[]>;
  /**
   * What the chunker emitted for an earlier revision of the document (its chunked event's data),
   * or null: a re-drive from the embed or index stage re-emits it instead of chunking again.
   */
  chunkedOf?: (documentId: string, revision: number) => Promise<ChunkedData | null>;
}

/**
 * extracted → chunked: structure-aware chunks with content hashes. The runner's stage wrapper
 * announces stage-started(chunking) and re-emits the earlier chunks on a re-drive from embed or index.
 */
export function createChunkHandler(opts: ChunkerOptions): Handler {
  const chunk = opts.chunk ?? (async (text: string, format: TextFormat, o: { maxTokens: number }) => chunkText(text, format, o));
  const handle: StageHandler<'chunker'> = async (event) => {
    const redrive = event.data.redrive;
    // The submitting key's chunkSize (/v3/settings), carried from its submission, else the service's.
    const chunks = await chunk(event.data.text, event.data.format, { maxTokens: event.data.chunkSize ?? opts.maxTokens });
    if (chunks.length === 0) throw new PermanentError('no extractable text');
    return [follow(event, 'document.chunked.v1', { tokenizer: TOKENIZER, chunks, ...(redrive ? { redrive } : {}) })];
  };
  return stageHandler('chunker', { handle, ...(opts.chunkedOf ? { outputOf: opts.chunkedOf } : {}) });
}
