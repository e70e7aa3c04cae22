import type { DocumentType, ExtractedData } from '@memstream/contracts';
import type { Logger } from '@memstream/kit';

/**
 * What the extractor can read. The kind is chosen by sniffing the bytes first, then the
 * declared fileType/mimeType, then the file name (sniff.ts).
 */
export const KINDS = [
  'text',
  'markdown',
  'html',
  'conversation',
  'json',
  'code',
  'csv',
  'pdf',
  'docx',
  'doc',
  'pptx',
  'xlsx',
  'image',
  'audio',
  'video',
] as const;
export type Kind = (typeof KINDS)[number];

/** A file on local disk (downloaded from the Object Store or fetched from a URL) with what is known of it. */
export interface SourceFile {
  path: string;
  size: number;
  filename: string | null;
  /** The MIME type the client or the server declared. */
  mimeType: string | null;
  /** The client's fileType override. */
  fileType: DocumentType | null;
}

/** Limits every extraction runs under; the README lists them. */
export interface ExtractLimits {
  /** Wall-clock time for one file. */
  timeoutMs: number;
  /** Resident memory of the process doing the parsing. */
  maxRssBytes: number;
  /** PDF pages read; pages beyond are skipped and said so. */
  maxPages: number;
  /** Pixels of one image (width × height) before OCR refuses it. */
  maxPixels: number;
  /** Zip containers (DOCX, PPTX, XLSX): entries, total expanded bytes, and expansion ratio. */
  maxZipEntries: number;
  maxZipExpandedBytes: number;
  maxZipRatio: number;
  /** Audio and video length transcribed. */
  maxMediaSeconds: number;
  /**
   * UTF-8 bytes of text one document may yield: more fails the document (permanently, saying
   * so) rather than keep the chunker, the embedder and the index busy with it for every tenant.
   */
  maxTextBytes: number;
}

export const DEFAULT_LIMITS: ExtractLimits = {
  timeoutMs: 5 * 60_000,
  maxRssBytes: 300 * 1024 * 1024,
  maxPages: 2_000,
  // OCR of a 36-megapixel image peaks near 320 MB; 20 MP (an A4 page at ~450 dpi) fits the 300 MB default.
  maxPixels: 20_000_000,
  maxZipEntries: 10_000,
  maxZipExpandedBytes: 500 * 1024 * 1024,
  maxZipRatio: 200,
  maxMediaSeconds: 3 * 60 * 60,
  maxTextBytes: 5 * 1024 * 1024,
};

export interface ExtractContext {
  limits: ExtractLimits;
  log: Logger;
  /** A scratch directory for this one extraction, removed afterwards. */
  workDir: string;
  signal: AbortSignal;
}

/** What an extractor returns: text (possibly large) with its title, type and format. */
export type ExtractResult = Omit<ExtractedData, 'url'> & { url?: string | null };

/** One extractor per kind: a file in, text out. Throws PermanentError for content it cannot read. */
export interface FileExtractor {
  kinds: readonly Kind[];
  extract(file: SourceFile, kind: Kind, ctx: ExtractContext): Promise<ExtractResult>;
}
