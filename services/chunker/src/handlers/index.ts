import { follow, type Handler } from '@memstream/bus';
import { PermanentError } from '@memstream/kit';
import { TOKENIZER, chunkText } from './chunk.js';

export { chunkText, TOKENIZER } from './chunk.js';

/** extracted → stage-started(chunking), then chunked: structure-aware chunks with content hashes. */
export function createChunkHandler(opts: { maxTokens: number }): Handler {
  return async (event, ctx) => {
    if (event.type !== 'document.extracted.v1') return [];
    await ctx.emit(follow(event, 'document.stage-started.v1', { stage: 'chunking' }));
    const chunks = chunkText(event.data.text, event.data.format, { maxTokens: opts.maxTokens });
    if (chunks.length === 0) throw new PermanentError('no extractable text');
    return [follow(event, 'document.chunked.v1', { tokenizer: TOKENIZER, chunks })];
  };
}
