import { mkdtemp, readdir, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PermanentError, createLogger } from '@memstream/kit';
import { DEFAULT_LIMITS, type ExtractContext, type ExtractLimits, type SourceFile } from '../kinds.js';
import { extractFile, kindOf } from '../registry.js';
import { extractIsolated } from '../sandbox.js';
import { PDF_FIXTURE, makeCorruptPdf, makeEncryptedPdf, makeLargePdf, makePdf, makeScannedPdf } from '../testing/fixtures.js';
import { terminateOcr } from './ocr.js';

let dir: string;

async function context(limits: Partial<ExtractLimits> = {}): Promise<ExtractContext> {
  const workDir = await mkdtemp(path.join(dir, 'work-'));
  return { limits: { ...DEFAULT_LIMITS, ...limits }, log: createLogger('test', { level: 'silent' }), workDir, signal: new AbortController().signal };
}

async function source(file: string, filename: string | null = path.basename(file)): Promise<SourceFile> {
  return { path: file, size: (await stat(file)).size, filename, mimeType: null, fileType: null };
}

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'memstream-pdf-'));
});

afterAll(async () => {
  await terminateOcr();
  await rm(dir, { recursive: true, force: true });
});

describe('PDF extractor (poppler)', () => {
  it('reads every page of the text layer in order, titled from the document info', async () => {
    const file = await source(await makePdf(dir));
    expect(await kindOf({ ...file, filename: null })).toBe('pdf');
    const ctx = await context();
    const out = await extractFile(file, 'pdf', ctx);
    expect(out).toMatchObject({ title: PDF_FIXTURE.title, type: 'pdf', format: 'plain' });
    const at = PDF_FIXTURE.pages.map((p) => out.text.indexOf(p));
    expect(at.every((i) => i >= 0)).toBe(true);
    expect(at).toEqual([...at].sort((a, b) => a - b));
    // Pages are joined by a blank line, with no form feeds or layout padding left over.
    expect(out.text).toContain(`${PDF_FIXTURE.pages[0]}\n\n${PDF_FIXTURE.pages[1]}`);
    expect(out.text).not.toMatch(/\f| +$/m);
    // Scratch files are removed as the extractor goes.
    expect(await readdir(ctx.workDir)).toEqual([]);
  });

  it('titles a PDF without an Info title by its first line', async () => {
    const file = await source(await makePdf(dir, { name: 'untitled.pdf', title: null }));
    const out = await extractFile(file, 'pdf', await context());
    expect(out.title).toBe('Survey');
  });

  it('skips pages past maxPages and says so', async () => {
    const file = await source(await makePdf(dir, { name: 'capped.pdf' }));
    const out = await extractFile(file, 'pdf', await context({ maxPages: 2 }));
    expect(out.text).toContain(PDF_FIXTURE.pages[1]);
    expect(out.text).not.toContain(PDF_FIXTURE.pages[2]);
    expect(out.text).toMatch(/\[Pages 3–3 of 3 were not extracted: the limit is 2 pages\.\]$/);
  });

  it('reads a document across page windows without losing or reordering pages', async () => {
    const { path: large, pages } = await makeLargePdf(dir, 3 * 1024 * 1024, { pages: 45, name: 'windows.pdf' });
    const out = await extractFile(await source(large), 'pdf', await context());
    const markers = [...out.text.matchAll(/marker page (\d+)/g)].map((m) => Number(m[1]));
    expect(markers).toEqual(Array.from({ length: pages }, (_, i) => i + 1));
    expect(out.title).toBe('Large Benchmark Document');
  });

  it('OCRs a page that has no text layer', async () => {
    const file = await source(await makeScannedPdf(dir));
    expect(await kindOf(file)).toBe('pdf');
    const out = await extractFile(file, 'pdf', await context());
    expect(out.text).toContain('Invoice');
    expect(out.text).toContain('4821');
    expect(out.title).toContain('Invoice');
  });

  it('fails permanently on a corrupt PDF', async () => {
    const file = await source(await makeCorruptPdf(dir));
    expect(await kindOf(file)).toBe('pdf');
    const err = await extractFile(file, 'pdf', await context()).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PermanentError);
    expect((err as Error).message).toMatch(/^corrupt or unreadable PDF/);
  });

  it('fails permanently on a password-protected PDF', async () => {
    const file = await source(await makeEncryptedPdf(dir));
    const err = await extractFile(file, 'pdf', await context()).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PermanentError);
    expect((err as Error).message).toMatch(/encrypted PDF/);
  });
});

describe('PDF extractor in the sandbox child process', () => {
  it('extracts text and reports the child tree peak RSS', async () => {
    const file = await source(await makePdf(dir, { name: 'child.pdf' }));
    const out = await extractIsolated(file, 'pdf', await context());
    expect(out.title).toBe(PDF_FIXTURE.title);
    for (const p of PDF_FIXTURE.pages) expect(out.text).toContain(p);
    expect(out.peakRssBytes).toBeGreaterThan(0);
    expect(out.peakRssBytes).toBeLessThan(DEFAULT_LIMITS.maxRssBytes);
  });

  it('OCRs a scanned page in the child', { timeout: 90_000 }, async () => {
    const file = await source(await makeScannedPdf(dir));
    const out = await extractIsolated(file, 'pdf', await context());
    expect(out.text).toContain('Invoice');
    expect(out.text).toContain('4821');
  });

  it('reports a corrupt PDF as a permanent failure, not a crash', async () => {
    const file = await source(await makeCorruptPdf(dir));
    const err = await extractIsolated(file, 'pdf', await context()).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PermanentError);
    expect((err as Error).message).toMatch(/^corrupt or unreadable PDF/);
  });
});
