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
  const isolate = ports.isolate ?? true;
  return async (event, ctx) => {
    const redrive = event.data.redrive;
    const input = event.data.input;
    let out: ExtractResult;
    if (input.kind === 'text' && !isUrlContent(input.content)) {
      if (ports.poisonMarker && input.content.includes(ports.poisonMarker)) {
        // Deliberately not a PermanentError: the runner must find out by retrying that it is poison.
        throw new TypeError('test poison marker found: this content breaks the extractor on every attempt');
      }
      // Text is extracted in memory: only markup too deep to parse here needs a file (for the sandbox).
      if (!looksLikeHtml(input.content)) out = extractString(input.content);
      else if (isolate && htmlDepth(input.content, MAX_IN_PROCESS_HTML_DEPTH + 1) > MAX_IN_PROCESS_HTML_DEPTH) {
        // Pathologically deep markup: parsed in the sandbox, under its time and memory limits.
        out = await inWorkDir(limits, ctx.log, async (xctx) => {
          const local = path.join(xctx.workDir, 'input.html');
          await writeFile(local, input.content);
          const file = { path: local, size: Buffer.byteLength(input.content), filename: null, mimeType: 'text/html', fileType: null };
          const { peakRssBytes: _rss, ...result } = await extractIsolated(file, 'html', xctx);
          return result;
        });
      } else out = extractHtmlString(input.content, null);
    } else if (input.kind === 'text') {
      const url = input.content.trim();
      out = await inWorkDir(limits, ctx.log, async (xctx) => {
        const file = await ports.fetchUrl(url, xctx);
        const fetched = await extractFromFile({ ...file, fileType: event.data.fileType ?? file.fileType }, xctx, isolate);
        return { ...fetched, url: file.finalUrl, type: fetched.type === 'text' ? 'webpage' : fetched.type };
      });
    } else {
      out = await inWorkDir(limits, ctx.log, async (xctx) => {
        const stream = await ports.blobs.getStream(input.key);
        if (!stream) throw new PermanentError(`uploaded file ${input.key} is missing from the blob store`);
        const local = path.join(xctx.workDir, 'input');
        // To disk, not memory: parsers read files, and a 50 MB upload stays off the heap.
        await pipeline(Readable.fromWeb(stream as unknown as WebReadableStream<Uint8Array>), createWriteStream(local));
        return extractFromFile(
          { path: local, size: input.size, filename: input.filename, mimeType: event.data.mimeType ?? input.mimeType, fileType: event.data.fileType },
          xctx,
          isolate,
        );
      });
    }
    if (out.text.trim() === '') throw new PermanentError('no extractable text');
    const bytes = Buffer.byteLength(out.text, 'utf8');
    if (bytes > limits.maxTextBytes) {
      throw new PermanentError(`the extracted text is ${mb(bytes)}, more than the ${mb(limits.maxTextBytes)} one document may have (EXTRACT_MAX_TEXT_BYTES); split it into several documents`);
    }
    const chunkSize = event.data.settings?.chunkSize;
    const data: ExtractedData = { title: out.title, type: out.type, text: out.text, url: out.url ?? null, format: out.format, ...(redrive ? { redrive } : {}), ...(chunkSize ? { chunkSize } : {}) };
    return [follow(event, 'document.extracted.v1', data)];
  };
}

/**
 * Runs `extract` with a private temporary directory (a download, an upload, the sandbox's files),
 * removed afterwards whatever happens. Only what touches files asks for one: making and removing a
 * directory cost a plain-text document several times its whole extraction.
 */
async function inWorkDir<T>(limits: ExtractLimits, log: ExtractContext['log'], extract: (ctx: ExtractContext) => Promise<T>): Promise<T> {
  const workDir = await mkdtemp(path.join(tmpdir(), 'memstream-extract-'));
  try {
    return await extract({ limits, log, workDir, signal: new AbortController().signal });
  } finally {
    await rm(workDir, { recursive: true, force: true });
  }
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
