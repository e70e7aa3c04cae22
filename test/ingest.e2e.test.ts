import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createReadStream, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Supermemory from 'supermemory';
import {
  CSV_FIXTURE,
  DOC_FIXTURE,
  DOCX_FIXTURE,
  PDF_FIXTURE,
  PPTX_FIXTURE,
  XLSX_FIXTURE,
  makeCorruptPdf,
  makeCsv,
  makeDoc,
  makeDocx,
  makePdf,
  makePptx,
  makeScannedPdf,
  makeXlsx,
  makeZipBombDocx,
} from '../services/extractor/src/testing/fixtures.js';
import { makeBlankImage, makeSpeechWav, makeTextImage, makeVideoMp4 } from '../services/extractor/src/testing/media-fixtures.js';
import { startTestStack, waitFor, type TestStack } from './support/stack.js';

const OCR_TEXT = 'Invoice Number 4821 Total due 317 dollars';
const SPEECH = 'hello world this is a test of the memory service';

/**
 * Every kind the spec lists, as a user sends it: files made here by the real tools, uploaded
 * with the official SDK, through the real pipeline. Each must reach done with its distinctive
 * words in GET's content; each failure case must end failed with a reason.
 */
describe('ingest: every content kind, end to end', () => {
  let stack: TestStack;
  let client: Supermemory;
  let dir: string;
  let site: Server;
  let siteUrl: string;

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'memstream-ingest-'));
    // A web server on a second loopback address: allowed for fetching, while 127.0.0.1 stays refused.
    const pdfBytes = await readFile(await makePdf(dir, { name: 'served.pdf' }));
    site = createServer((req, res) => {
      if (req.url === '/article') {
        res.setHeader('content-type', 'text/html; charset=utf-8');
        res.end(
          '<!doctype html><html><head><title>Ferret Almanac</title></head><body><nav>Home | About</nav>' +
            '<article><h1>Ferret Almanac</h1><p>The marzipan ferret sleeps nineteen hours a day in the orangery.</p>' +
            '<h2>Diet</h2><p>Mostly gooseberries, according to the almanac of the ferret society.</p></article><footer>Copyright footer text</footer></body></html>',
        );
      } else if (req.url === '/paper.pdf') {
        res.setHeader('content-type', 'application/pdf');
        res.end(pdfBytes);
      } else {
        res.statusCode = 404;
        res.end();
      }
    });
    await new Promise<void>((r) => site.listen(0, '127.0.0.2', () => r()));
    const addr = site.address();
    siteUrl = `http://127.0.0.2:${typeof addr === 'object' && addr ? addr.port : 0}`;
    stack = await startTestStack({ env: { MEMSTREAM_FETCH_ALLOW: '127.0.0.2/32', MEMSTREAM_FETCH_TIMEOUT_MS: '3000' } });
    client = new Supermemory({ apiKey: stack.apiKey, baseURL: stack.baseUrl, maxRetries: 0 });
  }, 120_000);

  afterAll(async () => {
    await stack?.teardown();
    await new Promise<void>((r) => (site ? site.close(() => r()) : r()));
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  async function settle(id: string, timeoutMs = 120_000) {
    return waitFor(
      `document ${id} to finish`,
      async () => {
        const d = await client.documents.get(id);
        return d.status === 'done' || d.status === 'failed' ? d : undefined;
      },
      timeoutMs,
      250,
    );
  }

  async function upload(file: string, tag: string) {
    const r = await client.documents.uploadFile({ file: createReadStream(file), containerTag: tag });
    expect(Object.keys(r).sort()).toEqual(['id', 'status']);
    return r.id;
  }

  it('files of every kind reach done, with their words in the content', async () => {
    const files: Array<[string, string, string[], string]> = [
      ['pdf', await makePdf(dir), [PDF_FIXTURE.pages[0].split(' ')[1]!, 'tangerine'], 'pdf'],
      ['scanned pdf (OCR)', await makeScannedPdf(dir), ['Invoice', '4821'], 'pdf'],
      ['docx', await makeDocx(dir), ['cormorant', DOCX_FIXTURE.bullets[0].split(' ')[2]!], 'text'],
      ['doc', await makeDoc(dir), [DOC_FIXTURE.paragraphs[1]!.split(' ')[1]!], 'text'],
      ['pptx', await makePptx(dir), ['walrus', 'penguin'], 'google_slide'],
      ['xlsx', await makeXlsx(dir), [XLSX_FIXTURE.sheets[0].rows[0][0].split(' ')[0]!, 'Cartographer'], 'google_sheet'],
      ['csv', await makeCsv(dir), [CSV_FIXTURE.rows[0][0], 'jewel'], 'google_sheet'],
      ['png', await makeTextImage(dir, OCR_TEXT, 'png'), ['Invoice', '4821'], 'image'],
      ['jpg', await makeTextImage(dir, OCR_TEXT, 'jpg'), ['Invoice', '4821'], 'image'],
      ['gif', await makeTextImage(dir, OCR_TEXT, 'gif'), ['Invoice', '4821'], 'image'],
      ['webp', await makeTextImage(dir, OCR_TEXT, 'webp'), ['Invoice', '4821'], 'image'],
      ['wav (speech)', await makeSpeechWav(dir, SPEECH), ['hello', 'world'], 'audio'],
      ['mp4 (video)', await makeVideoMp4(dir, SPEECH), ['hello', 'world'], 'video'],
    ];
    const text = (name: string, body: string) => {
      const p = path.join(dir, name);
      writeFileSync(p, body);
      return p;
    };
    files.push(
      ['md', text('notes.md', '# Walnut Ledger\n\n- the pistachio account\n- the hazelnut account\n'), ['pistachio', 'Walnut'], 'text'],
      ['txt', text('plain.txt', 'The persimmon committee meets on Thursdays.'), ['persimmon'], 'text'],
      ['json', text('data.json', '{"fruit":"kumquat","count":3}'), ['kumquat'], 'text'],
      ['code', text('main.ts', 'export function quokkaCounter(n: number) { return n + 1; }\n'), ['quokkaCounter'], 'text'],
    );
    const ids = await Promise.all(files.map(async ([name, file]) => [name, await upload(file, 'ingest-files')] as const));
    const t0 = Date.now();
    for (const [name, id] of ids) {
      const doc = await settle(id);
      const [, , words, type] = files.find((f) => f[0] === name)!;
      expect(doc.status, `${name}: ${JSON.stringify((doc as { error?: unknown }).error)}`).toBe('done');
      expect(doc.type, name).toBe(type);
      for (const w of words) expect(doc.content ?? '', `${name} contains ${w}`).toContain(w);
    }
    console.log(`[ingest] ${files.length} files of ${new Set(files.map((f) => f[3])).size} types done within ${Date.now() - t0} ms after upload`);
  }, 300_000);

  it('strings: HTML, Markdown and conversations', async () => {
    const html = await client.documents.add({ content: '<html><body><article><h1>Okapi Notes</h1><p>The okapi hides in the rainforest of the Congo basin.</p></article></body></html>' });
    const conv = await client.documents.add({ content: 'user: what does the axolotl eat?\nassistant: worms and small crustaceans.\nuser: and the tapir?' });
    const d1 = await settle(html.id);
    expect(d1.status).toBe('done');
    expect(d1.title).toBe('Okapi Notes');
    const d2 = await settle(conv.id);
    expect(d2.status).toBe('done');
    expect(d2.content).toContain('axolotl');
  }, 60_000);

  it('URLs: an HTML page gives its main content as Markdown; a PDF URL goes to the PDF extractor', async () => {
    const page = await settle((await client.documents.add({ content: `${siteUrl}/article` })).id);
    expect(page.status, JSON.stringify(page)).toBe('done');
    expect(page.type).toBe('webpage');
    expect(page.url).toBe(`${siteUrl}/article`);
    expect(page.title).toBe('Ferret Almanac');
    const full = await client.documents.get(page.id);
    expect(full.status).toBe('done');
    const pdf = await settle((await client.documents.add({ content: `${siteUrl}/paper.pdf` })).id);
    expect(pdf.status).toBe('done');
    expect(pdf.type).toBe('pdf');
  }, 120_000);

  it('failures end failed with a reason, and nothing is left in progress', async () => {
    const elf = path.join(dir, 'program.bin');
    writeFileSync(elf, Buffer.concat([Buffer.from([0x7f, 0x45, 0x4c, 0x46, 2, 1, 1, 0]), Buffer.alloc(4096, 7)]));
    const cases: Array<[string, () => Promise<string>, RegExp]> = [
      ['corrupt pdf', async () => upload(await makeCorruptPdf(dir), 'ingest-fail'), /pdf/i],
      ['zip bomb disguised as a docx', async () => upload(await makeZipBombDocx(dir), 'ingest-fail'), /zip bomb/i],
      ['image with no text', async () => upload(await makeBlankImage(dir), 'ingest-fail'), /no extractable text/],
      ['unsupported binary', async () => upload(elf, 'ingest-fail'), /unsupported file type/],
      ['URL resolving to 127.0.0.1', async () => (await client.documents.add({ content: `http://127.0.0.1:${stack.baseUrl.split(':').pop()}/` })).id, /SSRF/],
      ['URL of the cloud metadata address', async () => (await client.documents.add({ content: 'http://169.254.169.254/latest/meta-data/' })).id, /SSRF/],
    ];
    for (const [name, send, reason] of cases) {
      const doc = (await settle(await send())) as { status: string; reason?: string | null };
      expect(doc.status, name).toBe('failed');
      expect(doc.reason ?? '', name).toMatch(reason);
    }
    const processing = await client.documents.listProcessing();
    expect(processing.totalCount).toBe(0);
  }, 180_000);
});
