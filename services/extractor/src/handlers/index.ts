import { follow, type BlobStore, type Handler } from '@memstream/bus';
import { PermanentError } from '@memstream/kit';
import { extractText } from './extract-text.js';

export { extractText, looksLikeMarkdown, titleOf } from './extract-text.js';

export interface ExtractorPorts {
  blobs: Pick<BlobStore, 'get'>;
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** submitted → stage-started(extracting), then extracted; or a permanent failure with a reason. */
export function createExtractHandler(ports: ExtractorPorts): Handler {
  return async (event, ctx) => {
    if (event.type !== 'document.submitted.v1') return [];
    await ctx.emit(follow(event, 'document.stage-started.v1', { stage: 'extracting' }));
    const input = event.data.input;
    let raw: string;
    if (input.kind === 'text') {
      raw = input.content;
    } else {
      const bytes = await ports.blobs.get(input.key);
      if (!bytes) throw new PermanentError(`uploaded file ${input.key} is missing from the blob store`);
      try {
        raw = utf8.decode(bytes);
      } catch {
        throw new PermanentError(`unsupported file type${input.mimeType ? ` (${input.mimeType})` : ''}: only text files are extracted so far`);
      }
    }
    const out = extractText(raw);
    if (out.text.trim() === '') throw new PermanentError('no extractable text');
    return [follow(event, 'document.extracted.v1', { ...out, url: null })];
  };
}
