import { createWriteStream } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import { follow, type BlobStore, type Handler } from '@memstream/bus';
import type { ExtractedData } from '@memstream/contracts';
import { PermanentError } from '@memstream/kit';
import { DEFAULT_LIMITS, type ExtractContext, type ExtractLimits, type ExtractResult, type SourceFile } from '../kinds.js';
import { ISOLATED_KINDS, extractFile, kindOf } from '../registry.js';
import { extractIsolated } from '../sandbox.js';
import { extractString } from '../extractors/text.js';
import { extractHtmlString, looksLikeHtml } from '../extractors/html.js';

export { extractText, looksLikeMarkdown, titleOf } from './extract-text.js';

/** Fetches a URL (SSRF-safe) into a local file. */
export type UrlFetcher = (url: string, ctx: ExtractContext) => Promise<SourceFile & { finalUrl: string }>;

export interface ExtractorPorts {
  blobs: Pick<BlobStore, 'getStream'>;
  fetchUrl: UrlFetcher;
  limits?: ExtractLimits;
  /** Parse binary formats in a child process with limits (default); tests of single extractors may turn it off. */
  isolate?: boolean;
}

const URL_ONLY = /^https?:\/\/[^\s<>"]+$/i;

/** Content that is nothing but a URL is fetched and extracted. */
export function isUrlContent(content: string): boolean {
  return URL_ONLY.test(content.trim());
}

/** submitted → stage-started(extracting), then extracted; or a permanent failure with a reason. */
export function createExtractHandler(ports: ExtractorPorts): Handler {
  const limits = ports.limits ?? DEFAULT_LIMITS;
  return async (event, ctx) => {
    if (event.type !== 'document.submitted.v1') return [];
    await ctx.emit(follow(event, 'document.stage-started.v1', { stage: 'extracting' }));
    const workDir = await mkdtemp(path.join(tmpdir(), 'memstream-extract-'));
    const xctx: ExtractContext = { limits, log: ctx.log, workDir, signal: new AbortController().signal };
    try {
      const input = event.data.input;
      let out: ExtractResult;
      if (input.kind === 'text' && isUrlContent(input.content)) {
        const file = await ports.fetchUrl(input.content.trim(), xctx);
        out = await extractFromFile({ ...file, fileType: event.data.fileType ?? file.fileType }, xctx, ports.isolate ?? true);
        out = { ...out, url: file.finalUrl, type: out.type === 'text' ? 'webpage' : out.type };
      } else if (input.kind === 'text') {
        out = looksLikeHtml(input.content) ? extractHtmlString(input.content, null) : extractString(input.content);
      } else {
        const stream = await ports.blobs.getStream(input.key);
        if (!stream) throw new PermanentError(`uploaded file ${input.key} is missing from the blob store`);
        const local = path.join(workDir, 'input');
        // To disk, not memory: parsers read files, and a 50 MB upload stays off the heap.
        await pipeline(Readable.fromWeb(stream as unknown as WebReadableStream<Uint8Array>), createWriteStream(local));
        out = await extractFromFile(
          { path: local, size: input.size, filename: input.filename, mimeType: event.data.mimeType ?? input.mimeType, fileType: event.data.fileType },
          xctx,
          ports.isolate ?? true,
        );
      }
      if (out.text.trim() === '') throw new PermanentError('no extractable text');
      const data: ExtractedData = { title: out.title, type: out.type, text: out.text, url: out.url ?? null, format: out.format };
      return [follow(event, 'document.extracted.v1', data)];
    } finally {
      await rm(workDir, { recursive: true, force: true });
    }
  };
}

async function extractFromFile(file: SourceFile, ctx: ExtractContext, isolate: boolean): Promise<ExtractResult> {
  const kind = await kindOf(file);
  if (isolate && ISOLATED_KINDS.has(kind)) {
    const { peakRssBytes, ...result } = await extractIsolated(file, kind, ctx);
    ctx.log.info({ kind, bytes: file.size, peakRssMb: Math.round(peakRssBytes / 1048576) }, 'extracted in a child process');
    return result;
  }
  return extractFile(file, kind, ctx);
}
