import { readFileSync, readdirSync } from 'node:fs';
import { mkdtemp, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PermanentError, createLogger } from '@memstream/kit';
import { DEFAULT_LIMITS, type ExtractContext, type ExtractLimits, type SourceFile } from '../kinds.js';
import { extractFile, kindOf } from '../registry.js';
import { extractIsolated, treeRss } from '../sandbox.js';
import {
  CSV_FIXTURE,
  DOCX_FIXTURE,
  DOC_FIXTURE,
  PPTX_FIXTURE,
  XLSX_FIXTURE,
  makeCsv,
  makeDoc,
  makeDocx,
  makePptx,
  makeXlsx,
  makeZipBombDocx,
} from '../testing/fixtures.js';
import { htmlToMarkdown } from './office.js';
import { checkZip, readZipEntry } from './zip-guard.js';

let dir: string;
let bomb: string;

async function context(limits: Partial<ExtractLimits> = {}): Promise<ExtractContext> {
  const workDir = await mkdtemp(path.join(dir, 'work-'));
  return { limits: { ...DEFAULT_LIMITS, ...limits }, log: createLogger('test', { level: 'silent' }), workDir, signal: new AbortController().signal };
}

async function source(file: string, filename: string | null = path.basename(file)): Promise<SourceFile> {
  return { path: file, size: (await stat(file)).size, filename, mimeType: null, fileType: null };
}

/** Resident memory of this process's descendants (the sandbox child and anything it runs), sampled until stopped. */
function watchChildrenRss(): () => number {
  const children = () =>
    readdirSync(`/proc/${process.pid}/task`).flatMap((t) => {
      try {
        return readFileSync(`/proc/${process.pid}/task/${t}/children`, 'utf8').split(/\s+/).filter(Boolean).map(Number);
      } catch {
        return [];
      }
    });
  let peak = 0;
  const timer = setInterval(() => {
    peak = Math.max(peak, children().reduce((sum, pid) => sum + treeRss(pid), 0));
  }, 20);
  return () => {
    clearInterval(timer);
    return peak;
  };
}

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'memstream-office-'));
  bomb = await makeZipBombDocx(dir);
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('DOCX (mammoth)', () => {
  it('keeps headings, paragraphs and list items as Markdown', async () => {
    const file = await source(await makeDocx(dir));
    const ctx = await context();
    const out = await extractFile(file, 'docx', ctx);
    expect(out).toMatchObject({ title: DOCX_FIXTURE.title, type: 'text', format: 'markdown' });
    expect(out.text).toBe(
      [
        `# ${DOCX_FIXTURE.heading1}`,
        '',
        DOCX_FIXTURE.paragraph,
        '',
        `## ${DOCX_FIXTURE.heading2}`,
        '',
        ...DOCX_FIXTURE.bullets.map((b) => `- ${b}`),
        '',
        'Closing remarks & thanks <all>.',
      ].join('\n'),
    );
    expect(await readdir(ctx.workDir)).toEqual([]);
  });

  it('is sniffed as docx when [Content_Types].xml comes first, as Word writes it', async () => {
    expect(await kindOf(await source(bomb, null))).toBe('docx');
  });

  // The docx library writes [Content_Types].xml last, past the sniffed bytes: file-type sees a
  // plain zip, and the .docx name decides.
  it('is sniffed as docx when [Content_Types].xml comes last (docx library output)', async () => {
    expect(await kindOf(await source(await makeDocx(dir)))).toBe('docx');
  });

  it('converts nested and ordered lists, tables and line breaks', () => {
    const html =
      '<h3>Plan &amp; scope</h3><ol><li>First<ul><li>Inner a</li><li>Inner b</li></ul></li><li>Second</li></ol>' +
      '<p>Line one<br />line two</p><table><tr><td><p>Cell 1</p></td><td>Cell &#8220;2&#8221;</td></tr><tr><td>x</td><td>y</td></tr></table><p><a href="http://e">link</a> text</p>';
    expect(htmlToMarkdown(html)).toBe(
      ['### Plan & scope', '', '1. First', '  - Inner a', '  - Inner b', '2. Second', '', 'Line one', 'line two', '', '| Cell 1 | Cell “2” |', '| x | y |', '', 'link text'].join('\n'),
    );
  });

  it('fails permanently on a corrupt file', async () => {
    const junk = path.join(dir, 'junk.docx');
    await writeFile(junk, randomBytes(4096));
    const err = await extractFile(await source(junk), 'docx', await context()).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PermanentError);
    expect((err as Error).message).toBe('corrupt Office file');
  });
});

describe('DOC (word-extractor)', () => {
  it('reads the body of a Word 97 file', async () => {
    const file = await source(await makeDoc(dir));
    expect(await kindOf({ ...file, filename: null })).toBe('doc');
    const out = await extractFile(file, 'doc', await context());
    expect(out).toMatchObject({ title: DOC_FIXTURE.paragraphs[0], type: 'text', format: 'plain' });
    expect(out.text).toBe(DOC_FIXTURE.paragraphs.join('\n'));
  });

  it('fails permanently on a file that only claims to be a .doc', async () => {
    const junk = path.join(dir, 'claims.doc');
    await writeFile(junk, Buffer.concat([Buffer.from('d0cf11e0a1b11ae1', 'hex'), randomBytes(4096)]));
    expect(await kindOf(await source(junk))).toBe('doc');
    // Through the sandbox, as the service runs it: on some random bytes word-extractor does not
    // throw but builds a runaway sparse table until V8 aborts the whole process (it took a test
    // worker down once). In the child that is a permanent failure of this file alone.
    const err = await extractIsolated(await source(junk), 'doc', await context()).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PermanentError);
    expect((err as Error).message).toMatch(/^corrupt Word document|ran out of memory|used more than|crashed/);
  });
});

describe('PPTX (slide XML)', () => {
  it('writes each slide with its title, text and speaker notes, in order', async () => {
    const file = await source(await makePptx(dir));
    expect(await kindOf({ ...file, filename: null })).toBe('pptx');
    const out = await extractFile(file, 'pptx', await context());
    expect(out).toMatchObject({ title: PPTX_FIXTURE.title, type: 'google_slide', format: 'markdown' });
    const expected = PPTX_FIXTURE.slides.map((s, i) => `## Slide ${i + 1}: ${s.title}\n\n${s.body}\n\nNotes: ${s.notes}`).join('\n\n');
    expect(out.text).toBe(expected);
  });

  it('runs in the sandbox child process', async () => {
    const file = await source(await makePptx(dir));
    const out = await extractIsolated(file, 'pptx', await context());
    for (const s of PPTX_FIXTURE.slides) {
      expect(out.text).toContain(s.body);
      expect(out.text).toContain(`Notes: ${s.notes}`);
    }
    expect(out.peakRssBytes).toBeGreaterThan(0);
  });

  it('refuses a part larger than the cap while reading it', async () => {
    const file = await makePptx(dir);
    await expect(readZipEntry(file, 'ppt/slides/slide1.xml', 100)).rejects.toThrow(PermanentError);
    expect(await readZipEntry(file, 'ppt/slides/slide99.xml', 1e6)).toBeNull();
    expect((await readZipEntry(file, 'ppt/slides/slide1.xml', 1e6))?.toString('utf8')).toContain(PPTX_FIXTURE.slides[0].body);
  });
});

describe('XLSX (exceljs streaming reader)', () => {
  it('writes each sheet with its headers and one "Header: value" line per row', async () => {
    const file = await source(await makeXlsx(dir));
    expect(await kindOf({ ...file, filename: null })).toBe('xlsx');
    const out = await extractFile(file, 'xlsx', await context());
    expect(out).toMatchObject({ title: 'Logistics Ledger', type: 'google_sheet', format: 'markdown' });
    const expected = XLSX_FIXTURE.sheets
      .map((s) =>
        [`## Sheet: ${s.name}`, '', `Columns: ${s.headers.join(' | ')}`, ...s.rows.map((r) => r.map((v, i) => `${s.headers[i]}: ${v}`).join(' | '))].join('\n'),
      )
      .join('\n\n');
    expect(out.text).toBe(expected);
  });

  it('runs in the sandbox child process', async () => {
    const file = await source(await makeXlsx(dir));
    const out = await extractIsolated(file, 'xlsx', await context());
    expect(out.text).toContain('Name: Marguerite Okonkwo | Role: Falconer');
  });
});

describe('CSV (papaparse streaming)', () => {
  it('treats the first row as headers and keeps quoted commas and escaped quotes', async () => {
    const file = await source(await makeCsv(dir));
    expect(await kindOf(file)).toBe('csv');
    const out = await extractFile(file, 'csv', await context());
    expect(out).toMatchObject({ title: 'cities', type: 'google_sheet', format: 'plain' });
    const h = CSV_FIXTURE.headers;
    expect(out.text).toBe([`Columns: ${h.join(' | ')}`, ...CSV_FIXTURE.rows.map((r) => r.map((v, i) => `${h[i]}: ${v}`).join(' | '))].join('\n'));
    expect(out.text).toContain('Motto: Salt, gold, and books');
    expect(out.text).toContain('Motto: The "jewel" of the Pacific');
  });
});

describe('row cap', () => {
  it('writes at most 100000 rows of a CSV and notes the rest', async () => {
    const big = path.join(dir, 'big.csv');
    const rows = Array.from({ length: 100_005 }, (_, i) => `${i + 1},v${i + 1}`);
    await writeFile(big, ['n,value', ...rows].join('\n'));
    const out = await extractFile(await source(big), 'csv', await context());
    const lines = out.text.split('\n');
    expect(lines[1]).toBe('n: 1 | value: v1');
    expect(lines[100_000]).toBe('n: 100000 | value: v100000');
    expect(lines.at(-1)).toBe('[5 more rows of big.csv were not extracted: the limit is 100000 rows per sheet.]');
    expect(lines).toHaveLength(100_002);
  });
});

describe('zip bomb guard', () => {
  it('refuses a 600 MB-expanding DOCX in the child, holding far less than the limit', async () => {
    expect((await stat(bomb)).size).toBeLessThan(2 * 1024 * 1024);
    const stop = watchChildrenRss();
    const err = await extractIsolated(await source(bomb), 'docx', await context()).catch((e: unknown) => e);
    const peak = stop();
    console.log(`zip bomb: child peak RSS ${(peak / 1048576).toFixed(1)} MB (limit ${DEFAULT_LIMITS.maxRssBytes / 1048576} MB): ${(err as Error).message}`);
    expect(err).toBeInstanceOf(PermanentError);
    expect((err as Error).message).toMatch(/^zip bomb: .*over the limit of 500 MB \(maxZipExpandedBytes\)/);
    expect(peak).toBeGreaterThan(0);
    expect(peak).toBeLessThan(DEFAULT_LIMITS.maxRssBytes * 0.75);
  });

  it('names the limit that was hit', async () => {
    const at = (limits: Partial<ExtractLimits>) => checkZip(bomb, { ...DEFAULT_LIMITS, ...limits }).then(() => 'passed', (e: Error) => e.message);
    expect(await at({ maxZipEntries: 1 })).toMatch(/^zip bomb: 2 entries, over the limit of 1 \(maxZipEntries\)/);
    expect(await at({ maxZipExpandedBytes: 2 ** 31 })).toMatch(/^zip bomb: word\/document\.xml expands \d+×, over the per-entry limit of 1000× \(maxZipRatio × 5\)/);
    expect(await at({ maxZipExpandedBytes: 2 ** 31, maxZipRatio: 300 })).toMatch(/^zip bomb: expands \d+× \(600 MB from 1 MB\), over the limit of 300× \(maxZipRatio\)/);
    expect(await at({ maxZipExpandedBytes: 2 ** 31, maxZipRatio: 2000 })).toBe('passed');
  });

  it('passes real Office files and rejects a file that is not a zip', async () => {
    for (const f of [await makeDocx(dir), await makePptx(dir), await makeXlsx(dir)]) await checkZip(f, DEFAULT_LIMITS);
    const err = await checkZip(await makeCsv(dir), DEFAULT_LIMITS).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PermanentError);
    expect((err as Error).message).toBe('corrupt Office file');
  });
});
