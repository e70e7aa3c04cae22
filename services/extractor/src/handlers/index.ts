import { createWriteStream } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import { follow, stageHandler, type BlobStore, type Handler, type StageHandler } from '@memstream/bus';
import type { ExtractedData } from '@memstream/contracts';
import { PermanentError } from '@memstream/kit';
import { DEFAULT_LIMITS, type ExtractContext, type ExtractLimits, type ExtractResult, type SourceFile } from '../kinds.js';
import { ISOLATED_KINDS, extractFile, kindOf } from '../registry.js';
import { extractIsolated } from '../sandbox.js';
import { extractString } from '../extractors/text.js';
import { MAX_IN_PROCESS_HTML_DEPTH, extractHtmlString, htmlDepth, looksLikeHtml } from '../extractors/html.js';

export { extractText, looksLikeMarkdown, titleOf } from './extract-text.js';

/** Fetches a URL (SSRF-safe) into a local file. */
export type UrlFetcher = (url: string, ctx: ExtractContext) => Promise<SourceFile & { finalUrl: string }>;

export interface ExtractorPorts {
  blobs: Pick<BlobStore, 'getStream'>;
  fetchUrl: UrlFetcher;
  limits?: ExtractLimits;
  /** Parse binary formats in a child process with limits (default); tests of single extractors may turn it off. */
  isolate?: boolean;
  /**
   * What the extractor emitted for an earlier revision of the document (its extracted event's
   * data), or null: a re-drive from a later stage re-emits it instead of extracting again.
   */
  extractedOf?: (documentId: string, revision: number) => Promise<ExtractedData | null>;
  /** Test only (MEMSTREAM_TEST_POISON_MARKER): text containing it throws on every attempt, like a parser bug. */
  poisonMarker?: string | undefined;
}

const URL_ONLY = /^https?:\/\/[^\s<>"]+$/i;

/** Content that is nothing but a URL is fetched and extracted. */
export function isUrlContent(content: string): boolean {
  return URL_ONLY.test(content.trim());
}

/**
 * submitted → extracted; or a permanent failure with a reason. The runner's stage wrapper
 * announces stage-started(extracting) and re-emits the earlier text on a re-drive from a later stage.
 */
export function createExtractHandler(ports: ExtractorPorts): Handler {
  return stageHandler('extractor', { handle: extractHandler(ports), ...(ports.extractedOf ? { outputOf: ports.extractedOf } : {}) });
}

function extractHandler(ports: ExtractorPorts): StageHandler<'extractor'> {
  const limits = ports.limits ?? DEFAULT_LIMITS;
  return async (event, ctx) => {
    const redrive = event.data.redrive;
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
        if (ports.poisonMarker && input.content.includes(ports.poisonMarker)) {
          // Deliberately not a PermanentError: the runner must find out by retrying that it is poison.
          throw new TypeError('test poison marker found: this content breaks the extractor on every attempt');
        }
        if (!looksLikeHtml(input.content)) out = extractString(input.content);
        else if ((ports.isolate ?? true) && htmlDepth(input.content, MAX_IN_PROCESS_HTML_DEPTH + 1) > MAX_IN_PROCESS_HTML_DEPTH) {
          // Pathologically deep markup: parsed in the sandbox, under its time and memory limits.
          const local = path.join(workDir, 'input.html');
          await writeFile(local, input.content);
          const file = { path: local, size: Buffer.byteLength(input.content), filename: null, mimeType: 'text/html', fileType: null };
          const { peakRssBytes: _rss, ...result } = await extractIsolated(file, 'html', xctx);
          out = result;
        } else out = extractHtmlString(input.content, null);
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
      const bytes = Buffer.byteLength(out.text, 'utf8');
      if (bytes > limits.maxTextBytes) {
        throw new PermanentError(`the extracted text is ${mb(bytes)}, more than the ${mb(limits.maxTextBytes)} one document may have (EXTRACT_MAX_TEXT_BYTES); split it into several documents`);
      }
      const chunkSize = event.data.settings?.chunkSize;
      const data: ExtractedData = { title: out.title, type: out.type, text: out.text, url: out.url ?? null, format: out.format, ...(redrive ? { redrive } : {}), ...(chunkSize ? { chunkSize } : {}) };
      return [follow(event, 'document.extracted.v1', data)];
    } finally {
      await rm(workDir, { recursive: true, force: true });
    }
  };
}

const mb = (bytes: number): string => (bytes < 1048576 ? `${Math.ceil(bytes / 1024)} KB` : `${(bytes / 1048576).toFixed(1)} MB`);

async function extractFromFile(file: SourceFile, ctx: ExtractContext, isolate: boolean): Promise<ExtractResult> {
  const kind = await kindOf(file);
  const deepHtml = kind === 'html' && isolate && htmlDepth(await readFile(file.path, 'latin1'), MAX_IN_PROCESS_HTML_DEPTH + 1) > MAX_IN_PROCESS_HTML_DEPTH;
  if (isolate && (ISOLATED_KINDS.has(kind) || deepHtml)) {
    const { peakRssBytes, ...result } = await extractIsolated(file, kind, ctx);
    ctx.log.info({ kind, bytes: file.size, peakRssMb: Math.round(peakRssBytes / 1048576) }, 'extracted in a child process');
    return result;
  }
  return extractFile(file, kind, ctx);
}
