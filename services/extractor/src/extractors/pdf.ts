import { execFile } from 'node:child_process';
import { open, readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { PermanentError, errorMessage } from '@memstream/kit';
import { titleOf } from '../handlers/extract-text.js';
import type { ExtractContext, FileExtractor, Kind, SourceFile } from '../kinds.js';
import { ocrImage } from './ocr.js';

const run = promisify(execFile);

/**
 * Pages converted per pdftotext run. Each window's text is read, split into pages and appended to
 * a file on disk, so memory follows the window, not the document.
 */
const WINDOW = 20;

/** The resolution scanned pages are rendered at for OCR (lowered for huge pages, see ocrPage). */
const OCR_DPI = 150;

/**
 * A page with fewer visible characters than this in its text layer is treated as having none: a
 * scanned page often carries only a stamped page number as text, and that is not its content.
 */
const MIN_LAYER_CHARS = 4;

interface PdfInfo {
  pages: number;
  title: string | null;
}

/** poppler's tools are the parser: the PDF never enters this process, only their text output. */
async function poppler(cmd: string, args: string[], ctx: ExtractContext): Promise<string> {
  try {
    const { stdout } = await run(cmd, args, { signal: ctx.signal, encoding: 'utf8', maxBuffer: 4 * 1024 * 1024 });
    return stdout;
  } catch (err) {
    const e = err as NodeJS.ErrnoException & { stderr?: string };
    // A missing tool is the deployment's fault, not the file's: let it retry elsewhere.
    if (e.code === 'ENOENT') throw new Error(`${cmd} is not installed (poppler-utils)`);
    if (e.name === 'AbortError') throw err;
    const said = (e.stderr ?? '').trim();
    if (/password/i.test(said)) throw new PermanentError('encrypted PDF: it needs a password to open');
    // poppler prints a warning per damaged object first; its last line is why it gave up.
    const why = said.split('\n').at(-1)?.replace(/^Syntax Error:\s*/, '').slice(0, 200);
    throw new PermanentError(`corrupt or unreadable PDF${why ? ` (${why})` : ''}`);
  }
}

async function pdfInfo(file: string, ctx: ExtractContext): Promise<PdfInfo> {
  const out = await poppler('pdfinfo', ['-enc', 'UTF-8', file], ctx);
  const pages = /^Pages:\s+(\d+)\s*$/m.exec(out);
  if (!pages) throw new PermanentError('corrupt or unreadable PDF (no page count)');
  const title = /^Title:[ \t]*(.*)$/m.exec(out)?.[1]?.trim();
  return { pages: Number(pages[1]), title: title ? title : null };
}

/** Layout text tidied: no trailing spaces from column padding, no runs of blank lines. */
function tidy(page: string): string {
  return page
    .replace(/\u0000/g, '')
    .split('\n')
    .map((l) => l.trimEnd())
    .join('\n')
    .replace(/\n{3,}/g, '\n\n')
    .trim();
}

/**
 * Render one page to PNG and OCR it. The resolution drops below OCR_DPI when the page is so
 * large that the image would exceed maxPixels (posters, engineering drawings).
 */
async function ocrPage(file: string, page: number, ctx: ExtractContext): Promise<string> {
  const info = await poppler('pdfinfo', ['-f', String(page), '-l', String(page), file], ctx);
  const size = /size:\s+([\d.]+) x ([\d.]+) pts/.exec(info);
  let dpi = OCR_DPI;
  if (size) {
    const inches = (Number(size[1]) / 72) * (Number(size[2]) / 72);
    if (inches > 0) dpi = Math.max(36, Math.min(OCR_DPI, Math.floor(Math.sqrt(ctx.limits.maxPixels / inches))));
  }
  const prefix = path.join(ctx.workDir, `pdf-page-${page}`);
  await poppler('pdftoppm', ['-q', '-r', String(dpi), '-png', '-f', String(page), '-l', String(page), '-singlefile', file, prefix], ctx);
  const png = `${prefix}.png`;
  try {
    const { text, confidence } = await ocrImage(png, ctx);
    ctx.log.debug({ page, dpi, confidence }, 'OCR of a PDF page without a text layer');
    return tidy(text);
  } finally {
    await rm(png, { force: true });
  }
}

/**
 * PDF: the text layer via pdftotext, page windows at a time, appended to a file in the work
 * directory; pages without a text layer are rendered and OCR'd. Pages past maxPages are skipped
 * with a note at the end saying so.
 */
export const pdfExtractor: FileExtractor = {
  kinds: ['pdf'] satisfies Kind[],
  async extract(file: SourceFile, _kind: Kind, ctx: ExtractContext) {
    const info = await pdfInfo(file.path, ctx);
    const last = Math.min(info.pages, ctx.limits.maxPages);
    const windowFile = path.join(ctx.workDir, 'pdf-window.txt');
    const outFile = path.join(ctx.workDir, 'pdf-text.txt');
    const out = await open(outFile, 'w');
    let written = 0;
    let ocred = 0;
    const append = async (text: string) => {
      await out.write(written > 0 ? `\n\n${text}` : text);
      written++;
    };
    try {
      for (let from = 1; from <= last; from += WINDOW) {
        const to = Math.min(from + WINDOW - 1, last);
        // -q: a damaged file can print an error per object; none of it is wanted.
        await poppler('pdftotext', ['-q', '-layout', '-enc', 'UTF-8', '-f', String(from), '-l', String(to), file.path, windowFile], ctx);
        // pdftotext ends every page with a form feed, so page k of the window is part k.
        const parts = (await readFile(windowFile, 'utf8')).split('\f');
        for (let page = from; page <= to; page++) {
          let text = tidy(parts[page - from] ?? '');
          if (text.replace(/\s/g, '').length < MIN_LAYER_CHARS) {
            try {
              const seen = await ocrPage(file.path, page, ctx);
              if (seen.length > text.length) text = seen;
              ocred++;
            } catch (err) {
              // One unreadable scan (too many pixels, say) should not cost the rest of the document.
              if (!(err instanceof PermanentError)) throw err;
              ctx.log.warn({ page, err: errorMessage(err) }, 'OCR of a PDF page failed; skipping it');
            }
          }
          if (text) await append(text);
        }
      }
      if (info.pages > last) {
        await append(`[Pages ${last + 1}–${info.pages} of ${info.pages} were not extracted: the limit is ${ctx.limits.maxPages} pages.]`);
      }
    } finally {
      await out.close();
      await rm(windowFile, { force: true });
    }
    const text = await readFile(outFile, 'utf8');
    await rm(outFile, { force: true });
    ctx.log.debug({ pages: info.pages, extracted: last, ocred, chars: text.length }, 'PDF extracted');
    const name = file.filename?.replace(/\.pdf$/i, '') || null;
    return { title: info.title ?? titleOf(text) ?? name, type: 'pdf', text, format: 'plain' };
  },
};
