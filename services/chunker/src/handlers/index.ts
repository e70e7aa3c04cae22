import { follow, stageHandler, type Handler, type StageHandler } from '@memstream/bus';
import type { ChunkedData } from '@memstream/contracts';
import { PermanentError } from '@memstream/kit';
import { TOKENIZER, chunkText } from './chunk.js';

export { chunkText, TOKENIZER } from './chunk.js';

export interface ChunkerOptions {
  maxTokens: number;
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
  const handle: StageHandler<'chunker'> = async (event) => {
    const redrive = event.data.redrive;
    const chunks = chunkText(event.data.text, event.data.format, { maxTokens: opts.maxTokens });
    if (chunks.length === 0) throw new PermanentError('no extractable text');
    return [follow(event, 'document.chunked.v1', { tokenizer: TOKENIZER, chunks, ...(redrive ? { redrive } : {}) })];
  };
  return stageHandler('chunker', { handle, ...(opts.chunkedOf ? { outputOf: opts.chunkedOf } : {}) });
}
