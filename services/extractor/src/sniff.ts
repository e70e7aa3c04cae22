import { fileTypeFromBuffer } from 'file-type';
import type { Kind, SourceFile } from './kinds.js';

const BY_MIME: Array<[RegExp, Kind]> = [
  [/^application\/pdf$/, 'pdf'],
  [/^application\/vnd\.openxmlformats-officedocument\.wordprocessingml\.document$/, 'docx'],
  [/^application\/msword$/, 'doc'],
  [/^application\/vnd\.openxmlformats-officedocument\.presentationml\.presentation$/, 'pptx'],
  [/^application\/vnd\.openxmlformats-officedocument\.spreadsheetml\.sheet$/, 'xlsx'],
  [/^text\/csv$/, 'csv'],
  [/^text\/html$|^application\/xhtml\+xml$/, 'html'],
  [/^text\/markdown$|^text\/x-markdown$/, 'markdown'],
  [/^application\/json$/, 'json'],
  [/^image\/(png|jpeg|gif|webp)$/, 'image'],
  [/^audio\//, 'audio'],
  [/^video\//, 'video'],
  [/^text\//, 'text'],
];

const BY_EXT: Record<string, Kind> = {
  pdf: 'pdf',
  docx: 'docx',
  doc: 'doc',
  pptx: 'pptx',
  xlsx: 'xlsx',
  csv: 'csv',
  html: 'html',
  htm: 'html',
  md: 'markdown',
  markdown: 'markdown',
  json: 'json',
  txt: 'text',
  png: 'image',
  jpg: 'image',
  jpeg: 'image',
  gif: 'image',
  webp: 'image',
  mp3: 'audio',
  wav: 'audio',
  m4a: 'audio',
  ogg: 'audio',
  flac: 'audio',
  mp4: 'video',
  webm: 'video',
  mov: 'video',
  mkv: 'video',
};

const CODE_EXT = new Set(['ts', 'tsx', 'js', 'jsx', 'mjs', 'cjs', 'py', 'rb', 'go', 'rs', 'java', 'kt', 'c', 'h', 'cc', 'cpp', 'hpp', 'cs', 'php', 'swift', 'scala', 'sh', 'bash', 'sql', 'yaml', 'yml', 'toml', 'xml', 'css', 'scss', 'lua', 'r', 'pl', 'ex', 'exs', 'hs', 'clj', 'dart', 'vue', 'svelte']);

const BY_SNIFFED: Record<string, Kind> = {
  'application/pdf': 'pdf',
  'application/vnd.openxmlformats-officedocument.wordprocessingml.document': 'docx',
  'application/vnd.openxmlformats-officedocument.presentationml.presentation': 'pptx',
  'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet': 'xlsx',
  'application/x-cfb': 'doc',
  'image/png': 'image',
  'image/jpeg': 'image',
  'image/gif': 'image',
  'image/webp': 'image',
};

/** Whether the first bytes look like text: valid UTF-8 with no NUL bytes. */
export function looksLikeText(head: Uint8Array): boolean {
  if (head.includes(0)) return false;
  try {
    // A multi-byte character cut at the end of the sample is not a reason to call it binary.
    new TextDecoder('utf-8', { fatal: true }).decode(head.subarray(0, Math.max(0, head.length - 4)));
    return true;
  } catch {
    return false;
  }
}

/**
 * Choose the kind of a file: the bytes first (magic numbers), then the declared fileType and
 * MIME type, then the file name. Returns null for content nothing here can read.
 */
export async function sniffKind(head: Uint8Array, file: Pick<SourceFile, 'filename' | 'mimeType' | 'fileType'>): Promise<Kind | null> {
  const sniffed = await fileTypeFromBuffer(head);
  if (sniffed?.mime === 'application/zip') {
    // Office files are zips; file-type tells them apart by [Content_Types].xml, which some
    // writers put last, past the bytes sniffed. A plain zip then defers to the declared type or
    // the name, but only for the Office kinds (the zip guard checks it before any parser runs).
    const declared = await sniffKind(new Uint8Array(0), file);
    return declared === 'docx' || declared === 'pptx' || declared === 'xlsx' ? declared : null;
  }
  if (sniffed) {
    const k = BY_SNIFFED[sniffed.mime];
    if (k) return k;
    if (sniffed.mime.startsWith('audio/')) return 'audio';
    if (sniffed.mime.startsWith('video/')) return sniffed.mime === 'video/webm' && file.mimeType?.startsWith('audio/') ? 'audio' : 'video';
    // A zip that is not an Office file, an executable, an archive: nothing to read.
    return null;
  }
  const declared = file.mimeType?.toLowerCase().split(';')[0]?.trim();
  if (file.fileType === 'pdf') return 'pdf';
  if (file.fileType === 'image') return 'image';
  if (file.fileType === 'video') return declared?.startsWith('audio/') ? 'audio' : 'video';
  if (file.fileType === 'webpage') return 'html';
  if (file.fileType === 'google_sheet') return 'csv';
  if (declared) for (const [re, k] of BY_MIME) if (re.test(declared)) return k === 'text' && !looksLikeText(head) ? null : k;
  const ext = file.filename?.toLowerCase().match(/\.([a-z0-9]+)$/)?.[1];
  if (ext && BY_EXT[ext]) return BY_EXT[ext]!;
  if (ext && CODE_EXT.has(ext) && looksLikeText(head)) return 'code';
  return looksLikeText(head) ? 'text' : null;
}
