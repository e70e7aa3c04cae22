import { open } from 'node:fs/promises';
import { PermanentError } from '@memstream/kit';
import type { ExtractContext, ExtractResult, FileExtractor, Kind, SourceFile } from './kinds.js';
import { sniffKind } from './sniff.js';

/**
 * One extractor per kind, loaded when first needed: a sandbox child extracting one image should
 * not pay the memory and start-up time of the Office and PDF parsers.
 */
const LOADERS: Record<Kind, () => Promise<FileExtractor>> = {
  text: async () => (await import('./extractors/text.js')).textExtractor,
  markdown: async () => (await import('./extractors/text.js')).textExtractor,
  json: async () => (await import('./extractors/text.js')).textExtractor,
  code: async () => (await import('./extractors/text.js')).textExtractor,
  conversation: async () => (await import('./extractors/text.js')).textExtractor,
  html: async () => (await import('./extractors/html.js')).htmlExtractor,
  pdf: async () => (await import('./extractors/pdf.js')).pdfExtractor,
  docx: async () => (await import('./extractors/office.js')).officeExtractor,
  doc: async () => (await import('./extractors/office.js')).officeExtractor,
  pptx: async () => (await import('./extractors/office.js')).officeExtractor,
  xlsx: async () => (await import('./extractors/office.js')).officeExtractor,
  csv: async () => (await import('./extractors/office.js')).officeExtractor,
  image: async () => (await import('./extractors/media.js')).imageExtractor,
  audio: async () => (await import('./extractors/media.js')).mediaExtractor,
  video: async () => (await import('./extractors/media.js')).mediaExtractor,
};

/** Kinds parsed in a child process with its own memory and time limits (binary formats, big parsers). */
export const ISOLATED_KINDS: ReadonlySet<Kind> = new Set(['pdf', 'docx', 'doc', 'pptx', 'xlsx', 'csv', 'image', 'audio', 'video']);

export async function readHead(path: string, bytes = 4100): Promise<Uint8Array> {
  const fh = await open(path, 'r');
  try {
    const buf = Buffer.alloc(bytes);
    const { bytesRead } = await fh.read(buf, 0, bytes, 0);
    return buf.subarray(0, bytesRead);
  } finally {
    await fh.close();
  }
}

/** The kind of a file, or a permanent failure naming what it looked like. */
export async function kindOf(file: SourceFile): Promise<Kind> {
  const kind = await sniffKind(await readHead(file.path), file);
  if (!kind) throw new PermanentError(`unsupported file type${file.mimeType ? ` (${file.mimeType})` : ''}${file.filename ? `: ${file.filename}` : ''}`);
  return kind;
}

/** Run the extractor of `kind` in this process. */
export async function extractFile(file: SourceFile, kind: Kind, ctx: ExtractContext): Promise<ExtractResult> {
  const ex = await LOADERS[kind]();
  return ex.extract(file, kind, ctx);
}
