/**
 * PDF extraction benchmark: one large PDF (~50 MB, text on every page, incompressible images on
 * some) through the sandboxed extractor, as the extractor service runs it.
 *
 *   node --import tsx bench/extract-pdf.ts [--mb 50] [--pages 400] [--json]
 *
 * Reports file size, pages, text bytes, seconds, the peak RSS of the sandbox child's process
 * tree, and this (parent) process's RSS before and after. For reading those: the same child on
 * a 3-page PDF (its start-up and module cost, which every file pays) and the extractor run in
 * this process without the sandbox (the extraction alone). The ceiling, measured in the same run
 * on the same file: poppler's pdftotext converting the whole document in one go, with its own
 * peak RSS and time. Figures, not assertions.
 */
import { execFile, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { cpus, tmpdir, totalmem } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { createLogger } from '@memstream/kit';
import { DEFAULT_LIMITS, type ExtractContext } from '../services/extractor/src/kinds.js';
import { extractIsolated, treeRss } from '../services/extractor/src/sandbox.js';
import { pdfExtractor } from '../services/extractor/src/extractors/pdf.js';
import { makeLargePdf, makePdf } from '../services/extractor/src/testing/fixtures.js';
import { commandArgs } from '@memstream/cli';

const run = promisify(execFile);

const USAGE = `usage: ./memstream bench extract-pdf [--mb 50] [--pages 400] [--json]

one large PDF through the sandboxed extractor: seconds and peak memory.`;
const { values } = commandArgs('bench extract-pdf', USAGE, {
  options: { mb: { type: 'string', default: '50' }, pages: { type: 'string', default: '400' }, json: { type: 'boolean', default: false } },
});
const TARGET = Number(values.mb) * 1024 * 1024;
const PAGES = Number(values.pages);

const MB = (n: number) => +(n / 1048576).toFixed(1);
const secs = (ms: number) => +(ms / 1000).toFixed(2);

/**
 * pdftotext on the whole file, the way one would run it by hand: its wall time and peak RSS.
 * GNU time reports the peak exactly (getrusage); without it, /proc is polled.
 */
async function pdftotextCeiling(file: string, out: string): Promise<{ seconds: number; peakRssBytes: number; textBytes: number; how: string }> {
  const args = ['-layout', '-enc', 'UTF-8', file, out];
  const t0 = performance.now();
  let peak = 0;
  let how: string;
  if (existsSync('/usr/bin/time')) {
    const { stderr } = await run('/usr/bin/time', ['-v', 'pdftotext', ...args], { maxBuffer: 16 * 1024 * 1024 });
    const kb = /Maximum resident set size \(kbytes\): (\d+)/.exec(stderr);
    peak = kb ? Number(kb[1]) * 1024 : 0;
    how = '/usr/bin/time -v';
  } else {
    const child = spawn('pdftotext', args, { stdio: 'ignore' });
    const poll = setInterval(() => {
      if (child.pid) peak = Math.max(peak, treeRss(child.pid));
    }, 20);
    await new Promise<void>((resolve, reject) => {
      child.once('error', reject);
      child.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`pdftotext exited ${code}`))));
    });
    clearInterval(poll);
    how = '/proc polling (20 ms)';
  }
  const seconds = (performance.now() - t0) / 1000;
  return { seconds, peakRssBytes: peak, textBytes: (await stat(out)).size, how };
}

async function main(): Promise<void> {
  const dir = await mkdtemp(path.join(tmpdir(), 'memstream-bench-pdf-'));
  try {
    const g0 = performance.now();
    const pdf = await makeLargePdf(dir, TARGET, { pages: PAGES });
    const genMs = performance.now() - g0;
    const fileBytes = (await stat(pdf.path)).size;

    const context = async (): Promise<ExtractContext> => ({
      limits: DEFAULT_LIMITS,
      log: createLogger('bench', { level: 'silent' }),
      workDir: await mkdtemp(path.join(dir, 'work-')),
      signal: new AbortController().signal,
    });
    const small = await makePdf(dir);
    const s0 = performance.now();
    const baseline = await extractIsolated({ path: small, size: (await stat(small)).size, filename: 'survey.pdf', mimeType: null, fileType: null }, 'pdf', await context());
    const baselineMs = performance.now() - s0;

    const ctx = await context();
    const parentBefore = process.memoryUsage().rss;
    const t0 = performance.now();
    const out = await extractIsolated({ path: pdf.path, size: fileBytes, filename: 'large.pdf', mimeType: 'application/pdf', fileType: null }, 'pdf', ctx);
    const extractMs = performance.now() - t0;
    const parentAfter = process.memoryUsage().rss;
    const textBytes = Buffer.byteLength(out.text);

    const i0 = performance.now();
    await pdfExtractor.extract({ path: pdf.path, size: fileBytes, filename: 'large.pdf', mimeType: null, fileType: null }, 'pdf', await context());
    const inProcessMs = performance.now() - i0;

    const ceiling = await pdftotextCeiling(pdf.path, path.join(dir, 'ceiling.txt'));

    const result = {
      machine: `${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.versions.node}`,
      fileMb: MB(fileBytes),
      pages: pdf.pages,
      generateSeconds: secs(genMs),
      textBytes,
      extractSeconds: secs(extractMs),
      childPeakRssMb: MB(out.peakRssBytes),
      childBaselineSeconds: secs(baselineMs),
      childBaselinePeakRssMb: MB(baseline.peakRssBytes),
      inProcessSeconds: secs(inProcessMs),
      rssLimitMb: MB(DEFAULT_LIMITS.maxRssBytes),
      parentRssBeforeMb: MB(parentBefore),
      parentRssAfterMb: MB(parentAfter),
      ceilingPdftotextSeconds: +ceiling.seconds.toFixed(2),
      ceilingPdftotextPeakRssMb: MB(ceiling.peakRssBytes),
      ceilingPdftotextTextBytes: ceiling.textBytes,
      ceilingMeasuredWith: ceiling.how,
      timeVsCeiling: +(extractMs / 1000 / ceiling.seconds).toFixed(2),
      inProcessTimeVsCeiling: +(inProcessMs / 1000 / ceiling.seconds).toFixed(2),
    };
    if (values.json) {
      process.stdout.write(JSON.stringify(result) + '\n');
      return;
    }
    process.stdout.write(
      [
        `memstream PDF extraction bench — ${result.machine}`,
        `  file                          ${result.fileMb} MB, ${result.pages} pages (generated in ${result.generateSeconds} s)`,
        `  extracted text                ${result.textBytes} bytes`,
        `  time (sandboxed extractor)    ${result.extractSeconds} s, including the child's start-up`,
        `  child process tree peak RSS   ${result.childPeakRssMb} MB (limit ${result.rssLimitMb} MB)`,
        `  parent RSS                    ${result.parentRssBeforeMb} MB before, ${result.parentRssAfterMb} MB after (before includes making the PDF here)`,
        `  same child, 3-page PDF        ${result.childBaselineSeconds} s, peak RSS ${result.childBaselinePeakRssMb} MB (start-up and modules)`,
        `  extractor without sandbox     ${result.inProcessSeconds} s`,
        `  ceiling: pdftotext, one run   ${result.ceilingPdftotextSeconds} s, peak RSS ${result.ceilingPdftotextPeakRssMb} MB, ${result.ceilingPdftotextTextBytes} bytes of text (${result.ceilingMeasuredWith})`,
        `  time ratio to ceiling         ${result.timeVsCeiling}× sandboxed, ${result.inProcessTimeVsCeiling}× without sandbox`,
        '',
      ].join('\n'),
    );
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

main().catch((err) => {
  process.stderr.write(`bench failed: ${(err as Error).stack ?? err}\n`);
  process.exit(1);
});
