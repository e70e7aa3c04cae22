import { createReadStream } from 'node:fs';
import { open, readFile, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import ExcelJS from 'exceljs';
import mammoth from 'mammoth';
import Papa from 'papaparse';
import { PermanentError, errorMessage } from '@memstream/kit';
import { titleOf } from '../handlers/extract-text.js';
import type { ExtractContext, ExtractResult, FileExtractor, Kind, SourceFile } from '../kinds.js';
import { checkZip, openZipReader, readZipEntry, type ZipReader } from './zip-guard.js';

/*
 * Document types, as the closest of the SDK's types (it has no "word" or "slides" type):
 *   DOC, DOCX  → 'text'          (a Word file is prose; 'google_doc' would claim a source it is not)
 *   PPTX       → 'google_slide'  (the SDK's only slide-deck type)
 *   XLSX, CSV  → 'google_sheet'  (the SDK's only spreadsheet type)
 */

/** Rows written per sheet (or CSV); the rest are counted and noted, not written. */
const MAX_ROWS_PER_SHEET = 100_000;

/**
 * Text written for one spreadsheet or CSV. Every row repeats its headers, so a 50 MB CSV could
 * become several times that; the result travels as one string (and one JSON file out of the
 * sandbox), so it is capped and the cut is noted.
 */
const MAX_TABLE_TEXT_BYTES = 32 * 1024 * 1024;

/** One XML part of a PPTX (a slide, its notes, the relationship files) read into memory at most. */
const MAX_PART_BYTES = 32 * 1024 * 1024;

/** word-extractor ships no types; this is the part of its API used here. */
interface WordDocument {
  getBody(): string;
  getFootnotes(): string;
  getEndnotes(): string;
  getHeaders(opts?: { includeFooters?: boolean }): string;
  getFooters(): string;
}
type WordExtractorCtor = new () => { extract(input: string | Buffer): Promise<WordDocument> };
const WordExtractor = createRequire(import.meta.url)('word-extractor') as WordExtractorCtor;

const ENTITIES: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'", nbsp: '\u00a0' };

/** XML/HTML character references to text. */
function decodeEntities(s: string): string {
  return s.replace(/&(#x[0-9a-f]+|#\d+|[a-z]+);/gi, (whole, ref: string) => {
    if (ref[0] === '#') {
      const code = ref[1] === 'x' || ref[1] === 'X' ? parseInt(ref.slice(2), 16) : parseInt(ref.slice(1), 10);
      return Number.isFinite(code) && code >= 0 && code <= 0x10ffff ? String.fromCodePoint(code) : whole;
    }
    return ENTITIES[ref.toLowerCase()] ?? whole;
  });
}

const baseName = (file: SourceFile) => file.filename?.replace(/\.[^.]+$/, '') || null;

/**
 * Text written to a file in the work directory in ~1 MB batches and read back once: building a
 * large sheet's text as an array of lines and then joining it would hold it twice.
 */
class TextSink {
  private pending: string[] = [];
  private pendingBytes = 0;
  bytes = 0;
  private constructor(
    private readonly file: string,
    private readonly fh: Awaited<ReturnType<typeof open>>,
  ) {}

  static async open(dir: string, name: string): Promise<TextSink> {
    const file = path.join(dir, name);
    return new TextSink(file, await open(file, 'w'));
  }

  async line(s: string): Promise<void> {
    const chunk = s + '\n';
    const n = Buffer.byteLength(chunk);
    this.pending.push(chunk);
    this.pendingBytes += n;
    this.bytes += n;
    if (this.pendingBytes >= 1024 * 1024) await this.flush();
  }

  private async flush(): Promise<void> {
    if (!this.pending.length) return;
    await this.fh.write(this.pending.join(''));
    this.pending = [];
    this.pendingBytes = 0;
  }

  /** Everything written, as one string; the file is removed. */
  async finish(): Promise<string> {
    try {
      await this.flush();
    } finally {
      await this.fh.close();
    }
    const text = await readFile(this.file, 'utf8');
    await rm(this.file, { force: true });
    return text.trimEnd();
  }

  async abandon(): Promise<void> {
    await this.fh.close().catch(() => undefined);
    await rm(this.file, { force: true });
  }
}

/**
 * Writes a table as "Header: value | Header: value" lines, the first non-empty row being the
 * headers, so each row stands alone in a chunk and still says what its values are.
 */
class TableWriter {
  private headers: string[] | null = null;
  private rows = 0;
  private skipped = 0;
  private stopped = false;
  /** `preamble` (a sheet's heading) is written with the first row, so an empty sheet leaves no trace. */
  constructor(
    private readonly sink: TextSink,
    private readonly label: string,
    private readonly preamble: readonly string[] = [],
  ) {}

  async row(cells: readonly string[]): Promise<void> {
    if (!cells.some((c) => c !== '')) return;
    if (!this.headers) {
      for (const l of this.preamble) await this.sink.line(l);
      this.headers = cells.map((c, i) => c || `Column ${i + 1}`);
      await this.sink.line(`Columns: ${this.headers.join(' | ')}`);
      return;
    }
    if (this.stopped || this.rows >= MAX_ROWS_PER_SHEET || this.sink.bytes >= MAX_TABLE_TEXT_BYTES) {
      this.stopped = true;
      this.skipped++;
      return;
    }
    this.rows++;
    const parts: string[] = [];
    for (const [i, v] of cells.entries()) if (v !== '') parts.push(`${this.headers[i] ?? `Column ${i + 1}`}: ${v}`);
    await this.sink.line(parts.join(' | '));
  }

  /** A note for the rows not written, if any. */
  async end(): Promise<void> {
    if (this.skipped === 0) return;
    const why = this.rows >= MAX_ROWS_PER_SHEET ? `the limit is ${MAX_ROWS_PER_SHEET} rows per sheet` : `the text limit of ${MAX_TABLE_TEXT_BYTES / 1048576} MB was reached`;
    await this.sink.line(`[${this.skipped} more rows of ${this.label} were not extracted: ${why}.]`);
  }
}

/** A spreadsheet cell as text, whatever exceljs made of it. */
function cellText(v: ExcelJS.CellValue | undefined): string {
  if (v === null || v === undefined) return '';
  if (typeof v === 'string') return v.replace(/\s+/g, ' ').trim();
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  if (v instanceof Date) return Number.isNaN(v.getTime()) ? '' : v.toISOString().replace(/T00:00:00\.000Z$/, '');
  if ('richText' in v) return v.richText.map((r) => r.text).join('').replace(/\s+/g, ' ').trim();
  if ('formula' in v || 'sharedFormula' in v) return cellText((v as { result?: ExcelJS.CellValue }).result);
  if ('hyperlink' in v) return cellText(v.text as ExcelJS.CellValue);
  if ('error' in v) return String(v.error);
  return '';
}

/** Core properties' title (docProps/core.xml), when the author set one. */
async function coreTitle(file: string): Promise<string | null> {
  const xml = await readZipEntry(file, 'docProps/core.xml', 1024 * 1024);
  const m = xml && /<dc:title>([\s\S]*?)<\/dc:title>/.exec(xml.toString('utf8'));
  const t = m ? decodeEntities(m[1]!).replace(/\s+/g, ' ').trim() : '';
  return t || null;
}

// ---------------------------------------------------------------------------------------------
// DOCX

/**
 * mammoth's HTML as Markdown-ish text: headings as '#' lines, list items as '- ' or '1. ' lines
 * (indented when nested), paragraphs separated by blank lines, table rows as '| a | b |' lines;
 * all other markup dropped. mammoth emits a small, regular subset of HTML, which is why a
 * tokenizer is enough here.
 */
export function htmlToMarkdown(html: string): string {
  const out: string[] = [];
  const lists: Array<{ ordered: boolean; n: number }> = [];
  let cur = '';
  let prefix = '';
  let cell: string[] | null = null;
  let row: string[] = [];
  const blank = () => {
    if (out.length && out[out.length - 1] !== '') out.push('');
  };
  const flush = () => {
    const lines = cur
      .split('\n')
      .map((l) => l.replace(/[ \t\r\f\v]+/g, ' ').trim())
      .filter((l) => l !== '');
    lines.forEach((l, i) => out.push(i === 0 ? prefix + l : ' '.repeat(prefix.length) + l));
    cur = '';
    prefix = '';
  };
  const TOKEN = /<(\/?)([a-zA-Z][a-zA-Z0-9]*)\b[^>]*>|([^<]+)/g;
  for (let m = TOKEN.exec(html); m; m = TOKEN.exec(html)) {
    if (m[3] !== undefined) {
      const text = decodeEntities(m[3]);
      if (cell) cell.push(text);
      else cur += text;
      continue;
    }
    const closing = m[1] === '/';
    const tag = m[2]!.toLowerCase();
    if (cell && tag !== 'td' && tag !== 'th' && tag !== 'tr' && tag !== 'table') {
      // Inside a table cell only the text matters; paragraphs in it become spaces.
      if (tag === 'p' || tag === 'br' || tag === 'li') cell.push(' ');
      continue;
    }
    switch (tag) {
      case 'h1':
      case 'h2':
      case 'h3':
      case 'h4':
      case 'h5':
      case 'h6':
        flush();
        blank();
        if (!closing) prefix = '#'.repeat(Number(tag[1])) + ' ';
        break;
      case 'p':
        if (lists.length) {
          // A paragraph inside a list item continues the item's line.
          if (closing) cur += '\n';
          break;
        }
        flush();
        blank();
        break;
      case 'ul':
      case 'ol':
        flush();
        if (!closing) {
          if (!lists.length) blank();
          lists.push({ ordered: tag === 'ol', n: 0 });
        } else {
          lists.pop();
          if (!lists.length) blank();
        }
        break;
      case 'li': {
        flush();
        const list = lists[lists.length - 1];
        if (!closing && list) {
          list.n++;
          prefix = '  '.repeat(lists.length - 1) + (list.ordered ? `${list.n}. ` : '- ');
        }
        break;
      }
      case 'br':
        cur += '\n';
        break;
      case 'table':
        flush();
        blank();
        break;
      case 'tr':
        if (closing && row.length) out.push(`| ${row.join(' | ')} |`);
        row = [];
        break;
      case 'td':
      case 'th':
        if (closing) {
          row.push((cell ?? []).join('').replace(/\s+/g, ' ').trim());
          cell = null;
        } else cell = [];
        break;
      default:
        // Inline markup (strong, em, a, sup, img…) carries no text of its own.
        break;
    }
  }
  flush();
  while (out.length && out[out.length - 1] === '') out.pop();
  return out.join('\n');
}

async function extractDocx(file: SourceFile): Promise<ExtractResult> {
  let html: string;
  try {
    const result = await mammoth.convertToHtml(
      { path: file.path },
      {
        // Images would come back as base64 data URIs: memory for nothing the text needs.
        convertImage: mammoth.images.imgElement(() => Promise.resolve({ src: '' })),
        // A DOCX can link to files by path; never read anything but the upload itself.
        externalFileAccess: false,
      },
    );
    html = result.value;
  } catch (err) {
    throw new PermanentError(`corrupt Office file: ${errorMessage(err).slice(0, 200)}`);
  }
  const text = htmlToMarkdown(html);
  return { title: (await coreTitle(file.path)) ?? titleOf(text) ?? baseName(file), type: 'text', text, format: 'markdown' };
}

// ---------------------------------------------------------------------------------------------
// DOC

async function extractDoc(file: SourceFile): Promise<ExtractResult> {
  let doc: WordDocument;
  try {
    doc = await new WordExtractor().extract(file.path);
  } catch (err) {
    throw new PermanentError(`corrupt Word document: ${errorMessage(err).slice(0, 200)}`);
  }
  const tidy = (s: string) => s.replace(/\r\n?/g, '\n').replace(/[ \t]+\n/g, '\n').replace(/\n{3,}/g, '\n\n').trim();
  const body = tidy(doc.getBody());
  // Headers, footers and notes are cheap to get (the same piece table) and often carry names and dates.
  const extras = [
    ['Headers and footers', tidy(doc.getHeaders({ includeFooters: true }))],
    ['Footnotes', tidy(doc.getFootnotes())],
    ['Endnotes', tidy(doc.getEndnotes())],
  ].filter(([, t]) => t);
  const text = [body, ...extras.map(([label, t]) => `${label}:\n${t}`)].filter(Boolean).join('\n\n');
  return { title: titleOf(body) ?? baseName(file), type: 'text', text, format: 'plain' };
}

// ---------------------------------------------------------------------------------------------
// PPTX

interface Rel {
  id: string;
  type: string;
  target: string;
}

/** A relationships part; targets resolved to zip entry names relative to the part `from`. */
function parseRels(xml: string, from: string): Rel[] {
  const rels: Rel[] = [];
  for (const m of xml.matchAll(/<Relationship\b([^>]*)\/?>/g)) {
    const attrs = m[1]!;
    const get = (name: string) => new RegExp(`\\b${name}="([^"]*)"`).exec(attrs)?.[1];
    const id = get('Id');
    const target = get('Target');
    if (!id || !target || get('TargetMode') === 'External') continue;
    const resolved = target.startsWith('/') ? target.slice(1) : path.posix.normalize(path.posix.join(path.posix.dirname(from), decodeEntities(target)));
    rels.push({ id, type: get('Type') ?? '', target: resolved });
  }
  return rels;
}

const relsOf = (part: string) => path.posix.join(path.posix.dirname(part), '_rels', `${path.posix.basename(part)}.rels`);

/** DrawingML paragraphs (<a:p>) in document order: their runs joined, line breaks kept. */
function paragraphs(xml: string): Array<{ at: number; text: string }> {
  const out: Array<{ at: number; text: string }> = [];
  for (const p of xml.matchAll(/<a:p>([\s\S]*?)<\/a:p>|<a:p\s[^>]*>([\s\S]*?)<\/a:p>/g)) {
    const inner = p[1] ?? p[2] ?? '';
    let text = '';
    for (const t of inner.matchAll(/<a:t>([^<]*)<\/a:t>|<a:t\s[^>]*>([^<]*)<\/a:t>|<a:br\b[^>]*\/>/g)) {
      text += t[0].startsWith('<a:br') ? '\n' : decodeEntities(t[1] ?? t[2] ?? '');
    }
    text = text.replace(/[ \t]+/g, ' ').trim();
    if (text) out.push({ at: p.index ?? 0, text });
  }
  return out;
}

/** Shapes (<p:sp>) with their placeholder type and span in the XML. */
function shapes(xml: string): Array<{ start: number; end: number; ph: string | null }> {
  const out: Array<{ start: number; end: number; ph: string | null }> = [];
  for (const m of xml.matchAll(/<p:sp>[\s\S]*?<\/p:sp>|<p:sp\s[^>]*>[\s\S]*?<\/p:sp>/g)) {
    const start = m.index ?? 0;
    const ph = /<p:ph\b([^>]*)\/?>/.exec(m[0]);
    // A placeholder with no type attribute is a body ("obj") placeholder.
    const type = ph ? (/\btype="([^"]*)"/.exec(ph[1]!)?.[1] ?? 'body') : null;
    out.push({ start, end: start + m[0].length, ph: type });
  }
  return out;
}

async function part(zip: ZipReader, name: string): Promise<string | null> {
  const buf = await zip.read(name, MAX_PART_BYTES);
  return buf ? buf.toString('utf8') : null;
}

async function extractPptx(file: SourceFile): Promise<ExtractResult> {
  const zip = await openZipReader(file.path);
  try {
    return await readPresentation(file, zip);
  } finally {
    zip.close();
  }
}

async function readPresentation(file: SourceFile, zip: ZipReader): Promise<ExtractResult> {
  const presentation = await part(zip, 'ppt/presentation.xml');
  const presRels = await part(zip, 'ppt/_rels/presentation.xml.rels');
  if (!presentation || !presRels) throw new PermanentError('corrupt Office file: not a PowerPoint presentation');
  const rels = new Map(parseRels(presRels, 'ppt/presentation.xml').map((r) => [r.id, r]));
  // Slide order is the order of <p:sldId> in presentation.xml, not the part names.
  const slideParts = [...presentation.matchAll(/<p:sldId\b[^>]*\br:id="([^"]+)"/g)].map((m) => rels.get(m[1]!)?.target).filter((t): t is string => !!t);
  const sections: string[] = [];
  let firstTitle: string | null = null;
  let anyText = false;
  for (const [i, slidePart] of slideParts.entries()) {
    const xml = await part(zip, slidePart);
    if (!xml) continue;
    const paras = paragraphs(xml);
    const titleShape = shapes(xml).find((s) => s.ph === 'title' || s.ph === 'ctrTitle');
    const inTitle = (p: { at: number }) => !!titleShape && p.at >= titleShape.start && p.at < titleShape.end;
    // The title placeholder when there is one; else the slide's first line of text.
    let title = paras.filter(inTitle).map((p) => p.text.replace(/\n/g, ' ')).join(' ') || null;
    let body = paras.filter((p) => !inTitle(p)).map((p) => p.text);
    if (!title && body.length) {
      title = body[0]!.replace(/\n/g, ' ');
      body = body.slice(1);
    }
    firstTitle ??= title;
    const lines = [`## Slide ${i + 1}${title ? `: ${title}` : ''}`];
    if (body.length) lines.push('', body.join('\n'));
    const notes = await slideNotes(zip, slidePart);
    if (notes) lines.push('', `Notes: ${notes}`);
    anyText ||= !!(title || body.length || notes);
    sections.push(lines.join('\n'));
  }
  // A deck of pictures alone is no text, not a list of empty slide headings.
  const text = anyText ? sections.join('\n\n') : '';
  return { title: (await coreTitle(file.path)) ?? firstTitle ?? baseName(file), type: 'google_slide', text, format: 'markdown' };
}

/** The speaker notes of a slide: the body placeholder of its notesSlide part (found via the slide's rels). */
async function slideNotes(zip: ZipReader, slidePart: string): Promise<string | null> {
  const relsXml = await part(zip, relsOf(slidePart));
  const notesPart = relsXml && parseRels(relsXml, slidePart).find((r) => r.type.endsWith('/notesSlide'))?.target;
  const xml = notesPart ? await part(zip, notesPart) : null;
  if (!xml) return null;
  // A notes page also has the slide image, slide number, header, footer and date placeholders.
  const bodies = shapes(xml).filter((s) => s.ph === 'body');
  const text = paragraphs(xml)
    .filter((p) => bodies.some((s) => p.at >= s.start && p.at < s.end))
    .map((p) => p.text)
    .join('\n');
  return text || null;
}

// ---------------------------------------------------------------------------------------------
// XLSX and CSV

async function extractXlsx(file: SourceFile, ctx: ExtractContext): Promise<ExtractResult> {
  const sink = await TextSink.open(ctx.workDir, 'xlsx-text.txt');
  try {
    // Streaming: a worksheet is parsed row by row, never loaded whole. Styles are read (not
    // ignored) because only the number formats tell a date from a number.
    const reader = new ExcelJS.stream.xlsx.WorkbookReader(file.path, {
      sharedStrings: 'cache',
      hyperlinks: 'ignore',
      styles: 'cache',
      worksheets: 'emit',
      entries: 'ignore',
    });
    for await (const sheet of reader) {
      const name = (sheet as unknown as { name?: string }).name ?? 'Sheet';
      const table = new TableWriter(sink, `sheet ${name}`, [...(sink.bytes > 0 ? [''] : []), `## Sheet: ${name}`, '']);
      // Every row is read even past the caps: the zip stream only moves on once a sheet is drained.
      for await (const row of sheet) {
        const values = (row as ExcelJS.Row).values;
        const cells = Array.isArray(values) ? Array.from({ length: Math.max(0, values.length - 1) }, (_, i) => cellText(values[i + 1] as ExcelJS.CellValue)) : [];
        await table.row(cells);
      }
      await table.end();
    }
  } catch (err) {
    await sink.abandon();
    if (err instanceof PermanentError) throw err;
    throw new PermanentError(`corrupt Office file: ${errorMessage(err).slice(0, 200)}`);
  }
  const text = await sink.finish();
  return { title: (await coreTitle(file.path)) ?? baseName(file), type: 'google_sheet', text, format: 'markdown' };
}

async function extractCsv(file: SourceFile, ctx: ExtractContext): Promise<ExtractResult> {
  const sink = await TextSink.open(ctx.workDir, 'csv-text.txt');
  const table = new TableWriter(sink, file.filename ?? 'the CSV');
  let first = true;
  const writeRows = async (rows: string[][]) => {
    for (const row of rows) {
      const cells = row.map((c) => String(c).replace(/\s+/g, ' ').trim());
      // A UTF-8 byte order mark would otherwise become part of the first header.
      if (first && cells[0] !== undefined) cells[0] = cells[0].replace(/^\uFEFF/, '');
      first = false;
      await table.row(cells);
    }
  };
  try {
    // Papa's chunk callback, not its Duplex stream: iterating that Duplex row by row is ~70×
    // slower (15 s for 100k rows). Parsing pauses while a chunk is written, so memory holds one
    // chunk of rows at a time, whatever the file's size.
    await new Promise<void>((resolve, reject) => {
      let pending: Promise<void> = Promise.resolve();
      Papa.parse<string[]>(createReadStream(file.path, { encoding: 'utf8' }), {
        skipEmptyLines: 'greedy',
        chunk: (results, parser) => {
          parser.pause();
          pending = writeRows(results.data).then(() => parser.resume());
          pending.catch((err: unknown) => {
            reject(err);
            parser.abort();
          });
        },
        // Papa completes only after the last chunk's resume; waiting on it anyway costs nothing.
        complete: () => void pending.then(resolve, reject),
        error: (err) => reject(err),
      });
    });
    await table.end();
  } catch (err) {
    await sink.abandon();
    throw new PermanentError(`unreadable CSV: ${errorMessage(err).slice(0, 200)}`);
  }
  const text = await sink.finish();
  return { title: baseName(file), type: 'google_sheet', text, format: 'plain' };
}

async function isZip(file: string): Promise<boolean> {
  const fh = await open(file, 'r');
  try {
    const head = Buffer.alloc(4);
    const { bytesRead } = await fh.read(head, 0, 4, 0);
    return bytesRead === 4 && head.readUInt32LE(0) === 0x04034b50;
  } finally {
    await fh.close();
  }
}

/**
 * Word, PowerPoint, Excel and CSV. Every zip-based kind passes the zip-bomb guard before a parser
 * opens it.
 */
export const officeExtractor: FileExtractor = {
  kinds: ['docx', 'doc', 'pptx', 'xlsx', 'csv'] satisfies Kind[],
  async extract(file, kind, ctx) {
    // word-extractor also opens DOCX (a zip) when handed one as .doc, so a .doc that is a zip is guarded too.
    if (kind === 'docx' || kind === 'pptx' || kind === 'xlsx' || (kind === 'doc' && (await isZip(file.path)))) await checkZip(file.path, ctx.limits);
    switch (kind) {
      case 'docx':
        return extractDocx(file);
      case 'doc':
        return extractDoc(file);
      case 'pptx':
        return extractPptx(file);
      case 'xlsx':
        return extractXlsx(file, ctx);
      case 'csv':
        return extractCsv(file, ctx);
      default:
        throw new PermanentError(`the Office extractor cannot read ${kind}`);
    }
  },
};
