import { follow, type Handler } from '@memstream/bus';
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

/** extracted → stage-started(chunking), then chunked: structure-aware chunks with content hashes. */
export function createChunkHandler(opts: ChunkerOptions): Handler {
  return async (event, ctx) => {
    if (event.type !== 'document.extracted.v1') return [];
    await ctx.emit(follow(event, 'document.stage-started.v1', { stage: 'chunking' }));
    const redrive = event.data.redrive;
    if (redrive && (redrive.from === 'embed' || redrive.from === 'index')) {
      const prior = await opts.chunkedOf?.(event.documentId, redrive.ofRevision);
      if (prior) {
        ctx.log.info({ redrive }, 're-drive: re-emitting the chunks of the re-driven revision');
        return [follow(event, 'document.chunked.v1', { ...prior, redrive })];
      }
      ctx.log.info({ redrive }, 're-drive: the re-driven revision has no chunks in the log, chunking again');
    }
    const chunks = chunkText(event.data.text, event.data.format, { maxTokens: opts.maxTokens });
    if (chunks.length === 0) throw new PermanentError('no extractable text');
    return [follow(event, 'document.chunked.v1', { tokenizer: TOKENIZER, chunks, ...(redrive ? { redrive } : {}) })];
  };
}
