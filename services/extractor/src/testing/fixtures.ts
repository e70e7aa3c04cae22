/**
 * Real document fixtures, made on the fly with the real libraries (no binary files in the repo).
 * Each function writes one file into `dir` and returns its path. The words the files contain are
 * exported so tests assert on the same strings the generators wrote.
 */
import { execFile } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { open, writeFile } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { promisify } from 'node:util';
import { crc32, createDeflateRaw, deflateSync } from 'node:zlib';
import PDFDocument from 'pdfkit';
import { Document, HeadingLevel, Packer, Paragraph, TextRun } from 'docx';
import pptxgen from 'pptxgenjs';
import ExcelJS from 'exceljs';

const run = promisify(execFile);

/**
 * pptxgenjs's types describe its CommonJS build (default export under `.default`), while an ESM
 * import gets the ES build whose default export is the class itself: accept either.
 */
type PptxCtor = typeof pptxgen.default;
const PptxGenJS: PptxCtor = 'default' in pptxgen && typeof pptxgen.default === 'function' ? pptxgen.default : (pptxgen as unknown as PptxCtor);

/** ImageMagick proper: /usr/local/bin/convert on this image is a stand-in. */
const CONVERT = '/usr/bin/convert';

export const PDF_FIXTURE = {
  title: 'Quarterly Lighthouse Survey',
  pages: [
    'Aardvark quorum lighthouse beacon calibration notes for the northern coast.',
    'Zephyr marmalade oscillator readings were stable through the winter storms.',
    'Quixotic tangerine viaduct inspection closed the survey on the third page.',
  ],
} as const;

export const SCANNED_PDF_TEXT = 'Invoice 4821 total 317 dollars';

export const DOCX_FIXTURE = {
  title: 'Pelican Harbour Handbook',
  heading1: 'Pelican Harbour Handbook',
  heading2: 'Mooring Procedures',
  paragraph: 'Every vessel registers with the harbourmaster before the cormorant tide turns.',
  bullets: ['Check the saffron buoy', 'Log the barnacle count', 'Signal the lantern keeper'],
} as const;

export const PPTX_FIXTURE = {
  title: 'Glacier Expedition Briefing',
  slides: [
    { title: 'Glacier Expedition Briefing', body: 'Crampons and ice axes for every walrus team member.', notes: 'Mention the aurora borealis photography permit.' },
    { title: 'Supply Manifest', body: 'Pemmican rations for forty days and spare kerosene.', notes: 'Remind the quartermaster about the penguin decoys.' },
  ],
} as const;

export const XLSX_FIXTURE = {
  sheets: [
    {
      name: 'Inventory',
      headers: ['Item', 'Quantity', 'Warehouse'],
      rows: [
        ['Tungsten sprocket', 42, 'Reykjavik'],
        ['Obsidian gasket', 7, 'Ulaanbaatar'],
      ],
    },
    {
      name: 'Staff',
      headers: ['Name', 'Role'],
      rows: [
        ['Marguerite Okonkwo', 'Falconer'],
        ['Tobias Lindqvist', 'Cartographer'],
      ],
    },
  ],
} as const;

/** A CSV with a quoted comma and an escaped quote, to prove the parser (not a split on ',') reads it. */
export const CSV_FIXTURE = {
  headers: ['City', 'Motto', 'Population'],
  rows: [
    ['Timbuktu', 'Salt, gold, and books', '54453'],
    ['Valparaiso', 'The "jewel" of the Pacific', '296655'],
  ],
} as const;

/** Text for a generated .doc: body paragraphs (Word separates paragraphs with \r). */
export const DOC_FIXTURE = {
  paragraphs: ['Heliotrope saxophone committee minutes.', 'The albatross subcommittee approved the budget.'],
} as const;

/** A PDF with title metadata and three pages of text. */
export async function makePdf(dir: string, opts: { name?: string; title?: string | null } = {}): Promise<string> {
  const file = path.join(dir, opts.name ?? 'survey.pdf');
  const title = opts.title === undefined ? PDF_FIXTURE.title : opts.title;
  const doc = new PDFDocument({ autoFirstPage: false, info: title ? { Title: title } : {} });
  const done = pipeTo(doc, file);
  for (const [i, text] of PDF_FIXTURE.pages.entries()) {
    doc.addPage();
    if (i === 0) doc.fontSize(20).text(title ?? 'Survey', { underline: false }).moveDown();
    doc.fontSize(12).text(text);
  }
  doc.end();
  await done;
  return file;
}

/** A PDF whose only page is a picture of text: no text layer, so only OCR can read it. */
export async function makeScannedPdf(dir: string): Promise<string> {
  const png = path.join(dir, 'scan.png');
  await run(CONVERT, ['-size', '1200x300', 'xc:white', '-font', 'DejaVu-Sans', '-pointsize', '48', '-fill', 'black', '-annotate', '+40+150', SCANNED_PDF_TEXT, png]);
  const file = path.join(dir, 'scanned.pdf');
  const doc = new PDFDocument({ autoFirstPage: false });
  const done = pipeTo(doc, file);
  doc.addPage({ size: 'A4' });
  doc.image(png, 40, 60, { width: 515 });
  doc.end();
  await done;
  return file;
}

const VOCAB = (
  'ledger harbour quorum beacon tundra sextant meridian lantern archive vellum cobalt ' +
  'orchard granite tributary cinnabar falcon parchment compass juniper estuary bastion ' +
  'monsoon quarry saffron tamarind zenith obsidian lagoon pylon isthmus'
).split(' ');

/**
 * A large PDF of about `targetBytes`: text on every page (each page says "marker page N") and,
 * on enough pages, an uncompressed noise image so the size is reached without thousands of
 * pages. Streams are uncompressed (compress: false) as many real scanned-and-OCR'd files are.
 */
export async function makeLargePdf(dir: string, targetBytes: number, opts: { pages?: number; name?: string } = {}): Promise<{ path: string; pages: number }> {
  const pages = opts.pages ?? 400;
  const file = path.join(dir, opts.name ?? 'large.pdf');
  const doc = new PDFDocument({ autoFirstPage: false, compress: false, info: { Title: 'Large Benchmark Document' } });
  const out = createWriteStream(file);
  const done = new Promise<void>((resolve, reject) => {
    out.on('finish', resolve);
    out.on('error', reject);
    doc.on('error', reject);
  });
  doc.pipe(out);
  // pdfkit pushes without regard to backpressure; what it made is what reached the file plus what
  // waits in either stream's buffer.
  const produced = () => out.bytesWritten + out.writableLength + doc.readableLength;
  // ~1.2 MB of noise per image; with no filter and no compression it is as large in the file.
  const noise = noisePng(640, 640);
  let seed = 1;
  const word = () => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return VOCAB[seed % VOCAB.length]!;
  };
  for (let p = 1; p <= pages; p++) {
    doc.addPage({ size: 'A4', margin: 50 });
    doc.fontSize(14).text(`Section ${p}: marker page ${p}`).moveDown(0.5);
    doc.fontSize(9).text(Array.from({ length: 380 }, word).join(' '));
    // Spread images evenly so the size grows with the page count instead of all at the end.
    if (produced() + noise.length < (targetBytes * p) / pages) doc.image(noise, 50, 500, { width: 300 });
    // Let the file catch up, so making a large file does not hold it all in memory.
    while (doc.readableLength + out.writableLength > 16 * 1024 * 1024) await new Promise((r) => setTimeout(r, 5));
  }
  doc.end();
  await done;
  return { path: file, pages };
}

/** A truecolour PNG of random pixels, stored (deflate level 0) so it does not shrink. */
function noisePng(width: number, height: number): Buffer {
  const raw = Buffer.alloc((width * 3 + 1) * height);
  const px = randomBytes(width * 3 * height);
  for (let y = 0; y < height; y++) px.copy(raw, y * (width * 3 + 1) + 1, y * width * 3, (y + 1) * width * 3);
  const chunk = (type: string, data: Buffer) => {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(data.length);
    const body = Buffer.concat([Buffer.from(type, 'latin1'), data]);
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(crc32(body) >>> 0);
    return Buffer.concat([len, body, crc]);
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr.writeUInt8(8, 8); // bit depth
  ihdr.writeUInt8(2, 9); // truecolour
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr),
    chunk('IDAT', deflateSync(raw, { level: 0 })),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

/** A DOCX with a title, two heading levels, a paragraph and a bullet list. */
export async function makeDocx(dir: string): Promise<string> {
  const f = DOCX_FIXTURE;
  const doc = new Document({
    title: f.title,
    sections: [
      {
        children: [
          new Paragraph({ text: f.heading1, heading: HeadingLevel.HEADING_1 }),
          new Paragraph({ children: [new TextRun(f.paragraph)] }),
          new Paragraph({ text: f.heading2, heading: HeadingLevel.HEADING_2 }),
          ...f.bullets.map((b) => new Paragraph({ text: b, bullet: { level: 0 } })),
          new Paragraph({ children: [new TextRun({ text: 'Closing remarks & thanks <all>.', bold: true })] }),
        ],
      },
    ],
  });
  const file = path.join(dir, 'handbook.docx');
  await writeFile(file, await Packer.toBuffer(doc));
  return file;
}

/** A PPTX with two slides, each with a title, body text and speaker notes. */
export async function makePptx(dir: string): Promise<string> {
  const pptx = new PptxGenJS();
  pptx.title = PPTX_FIXTURE.title;
  for (const s of PPTX_FIXTURE.slides) {
    const slide = pptx.addSlide();
    slide.addText(s.title, { x: 0.5, y: 0.3, w: 9, h: 1, fontSize: 32, bold: true });
    slide.addText(s.body, { x: 0.5, y: 1.6, w: 9, h: 2, fontSize: 18 });
    slide.addNotes(s.notes);
  }
  const file = path.join(dir, 'briefing.pptx');
  const out = await pptx.write({ outputType: 'nodebuffer' });
  await writeFile(file, out as Uint8Array);
  return file;
}

/** An XLSX with two sheets, each with a header row and data rows. */
export async function makeXlsx(dir: string): Promise<string> {
  const wb = new ExcelJS.Workbook();
  wb.title = 'Logistics Ledger';
  for (const s of XLSX_FIXTURE.sheets) {
    const ws = wb.addWorksheet(s.name);
    ws.addRow([...s.headers]);
    for (const r of s.rows) ws.addRow([...r]);
  }
  const file = path.join(dir, 'ledger.xlsx');
  await wb.xlsx.writeFile(file);
  return file;
}

/** A CSV with a header row, a quoted comma and an escaped ("") quote. */
export async function makeCsv(dir: string): Promise<string> {
  const cell = (v: string) => (/[",\n]/.test(v) ? `"${v.replace(/"/g, '""')}"` : v);
  const lines = [CSV_FIXTURE.headers, ...CSV_FIXTURE.rows].map((r) => r.map(cell).join(','));
  const file = path.join(dir, 'cities.csv');
  await writeFile(file, lines.join('\r\n') + '\r\n');
  return file;
}

/** A PDF that needs a password to open (RC4/AES via pdfkit's security handler). */
export async function makeEncryptedPdf(dir: string): Promise<string> {
  const file = path.join(dir, 'locked.pdf');
  const doc = new PDFDocument({ autoFirstPage: false, pdfVersion: '1.7', userPassword: 'open sesame', ownerPassword: 'owner secret' });
  const done = pipeTo(doc, file);
  doc.addPage();
  doc.text('Confidential walnut ledger.');
  doc.end();
  await done;
  return file;
}

/**
 * A Word 97 (.doc) file, written byte by byte: nothing offline can generate one (no LibreOffice,
 * no .doc writer on npm). It is the minimum a reader needs — a compound file (CFB v3, 512-byte
 * sectors) holding a WordDocument stream (FIB and the text as UTF-16) and a 1Table stream
 * (the piece table, CLX) — and no formatting, styles or summary information. Word itself may
 * refuse it; parsers that read text the standard way (via the piece table) read it.
 */
export async function makeDoc(dir: string, paragraphs: readonly string[] = DOC_FIXTURE.paragraphs): Promise<string> {
  const SECTOR = 512;
  const STREAM_SECTORS = 8; // 4096 bytes: at the mini-stream cutoff, so both streams are regular streams
  const FREE = -1;
  const END = -2;
  const FATSECT = -3;

  // Word separates (and ends) paragraphs with \r.
  const text = paragraphs.join('\r') + '\r';
  const TEXT_AT = 0x800;
  const word = Buffer.alloc(STREAM_SECTORS * SECTOR);
  word.writeUInt16LE(0xa5ec, 0x00); // wIdent
  word.writeUInt16LE(0x00c1, 0x02); // nFib: Word 97
  word.writeUInt16LE(0x0200, 0x0a); // fWhichTblStm: the table stream is 1Table
  word.writeUInt32LE(TEXT_AT, 0x18); // fcMin
  word.writeUInt32LE(TEXT_AT + text.length * 2, 0x1c); // fcMac
  word.writeUInt16LE(14, 0x20); // csw
  word.writeUInt16LE(22, 0x3e); // cslw
  word.writeUInt32LE(text.length, 0x4c); // ccpText; every other story (footnotes, headers…) is empty
  word.writeUInt16LE(0x5d, 0x98); // cbRgFcLcb: the Word 97 FibRgFcLcb97
  const clx = Buffer.alloc(1 + 4 + 8 + 8);
  clx.writeUInt8(0x02, 0); // Pcdt
  clx.writeUInt32LE(16, 1); // lcb of the PlcPcd: two CPs and one PCD
  clx.writeUInt32LE(0, 5); // CP 0
  clx.writeUInt32LE(text.length, 9); // CP end
  clx.writeUInt16LE(0, 13); // PCD flags
  clx.writeUInt32LE(TEXT_AT, 15); // fc without the compressed bit: UTF-16LE text at this offset
  clx.writeUInt16LE(0, 19); // prm
  const CLX_AT = 0;
  word.writeUInt32LE(CLX_AT, 0x1a2); // fcClx
  word.writeUInt32LE(clx.length, 0x1a6); // lcbClx
  word.write(text, TEXT_AT, 'utf16le');
  const table = Buffer.alloc(STREAM_SECTORS * SECTOR);
  clx.copy(table, CLX_AT);

  // Sectors: 0 FAT, 1 directory, 2–9 WordDocument, 10–17 1Table.
  const WORD_AT = 2;
  const TABLE_AT = WORD_AT + STREAM_SECTORS;
  const fat = Buffer.alloc(SECTOR, 0xff);
  fat.writeInt32LE(FATSECT, 0);
  fat.writeInt32LE(END, 4);
  for (const start of [WORD_AT, TABLE_AT]) {
    for (let i = 0; i < STREAM_SECTORS; i++) fat.writeInt32LE(i === STREAM_SECTORS - 1 ? END : start + i + 1, (start + i) * 4);
  }

  const entry = (name: string, type: number, opts: { left?: number; right?: number; child?: number; start?: number; size?: number }) => {
    const e = Buffer.alloc(128);
    e.write(name, 0, 'utf16le');
    e.writeUInt16LE((name.length + 1) * 2, 64);
    e.writeUInt8(type, 66);
    e.writeUInt8(1, 67); // black
    e.writeInt32LE(opts.left ?? FREE, 68);
    e.writeInt32LE(opts.right ?? FREE, 72);
    e.writeInt32LE(opts.child ?? FREE, 76);
    e.writeInt32LE(opts.start ?? END, 116);
    e.writeUInt32LE(opts.size ?? 0, 120);
    return e;
  };
  const unused = Buffer.alloc(128);
  unused.writeInt32LE(FREE, 68);
  unused.writeInt32LE(FREE, 72);
  unused.writeInt32LE(FREE, 76);
  // Siblings sort by name length first: "1Table" < "WordDocument".
  const directory = Buffer.concat([
    entry('Root Entry', 5, { child: 1 }),
    entry('WordDocument', 2, { left: 2, start: WORD_AT, size: word.length }),
    entry('1Table', 2, { start: TABLE_AT, size: table.length }),
    unused,
  ]);

  const header = Buffer.alloc(SECTOR);
  Buffer.from('d0cf11e0a1b11ae1', 'hex').copy(header, 0);
  header.writeUInt16LE(0x003e, 24); // minor version
  header.writeUInt16LE(0x0003, 26); // major version 3
  header.writeUInt16LE(0xfffe, 28); // byte order
  header.writeUInt16LE(9, 30); // 512-byte sectors
  header.writeUInt16LE(6, 32); // 64-byte mini sectors
  header.writeUInt32LE(1, 44); // FAT sectors
  header.writeInt32LE(1, 48); // first directory sector
  header.writeUInt32LE(4096, 56); // mini stream cutoff
  header.writeInt32LE(END, 60); // no mini FAT
  header.writeUInt32LE(0, 64);
  header.writeInt32LE(END, 68); // no DIFAT sectors
  header.writeUInt32LE(0, 72);
  header.fill(0xff, 76, SECTOR); // DIFAT: all free but the first
  header.writeInt32LE(0, 76); // the FAT is sector 0

  const file = path.join(dir, 'minutes.doc');
  await writeFile(file, Buffer.concat([header, fat, directory, word, table]));
  return file;
}

/** '%PDF-1.7' and then noise: sniffs as a PDF, parses as nothing. */
export async function makeCorruptPdf(dir: string): Promise<string> {
  const file = path.join(dir, 'corrupt.pdf');
  await writeFile(file, Buffer.concat([Buffer.from('%PDF-1.7\n'), randomBytes(16 * 1024)]));
  return file;
}

const CONTENT_TYPES_DOCX =
  '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>' +
  '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">' +
  '<Default Extension="xml" ContentType="application/xml"/>' +
  '<Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/>' +
  '</Types>';

/**
 * A zip bomb dressed as a DOCX: [Content_Types].xml and a word/document.xml of `expandBytes`
 * zeros (600 MB by default) that deflates to well under 1 MB. Written by streaming deflate in
 * 1 MB steps, so making it never holds more than a megabyte either.
 */
export async function makeZipBombDocx(dir: string, expandBytes = 600 * 1024 * 1024): Promise<string> {
  const file = path.join(dir, 'bomb.docx');
  const zip = await ZipWriter.create(file);
  await zip.addStored('[Content_Types].xml', Buffer.from(CONTENT_TYPES_DOCX));
  await zip.addDeflatedZeros('word/document.xml', expandBytes);
  await zip.finish();
  return file;
}

/**
 * A minimal zip writer: stored and deflated entries, no zip64 (every size here fits 32 bits).
 * Its central directory tells the truth about sizes, as real Office files do, so the guard is
 * tested against an honest bomb rather than a malformed archive.
 */
class ZipWriter {
  private offset = 0;
  private readonly central: Buffer[] = [];
  private constructor(private readonly fh: Awaited<ReturnType<typeof open>>) {}

  static async create(file: string): Promise<ZipWriter> {
    return new ZipWriter(await open(file, 'w'));
  }

  private async write(buf: Buffer): Promise<void> {
    await this.fh.write(buf, 0, buf.length, this.offset);
    this.offset += buf.length;
  }

  private localHeader(name: Buffer, method: number, crc: number, csize: number, usize: number): Buffer {
    const h = Buffer.alloc(30);
    h.writeUInt32LE(0x04034b50, 0);
    h.writeUInt16LE(20, 4); // version needed
    h.writeUInt16LE(0x0800, 6); // UTF-8 names
    h.writeUInt16LE(method, 8);
    h.writeUInt32LE(0, 10); // time, date
    h.writeUInt32LE(crc >>> 0, 14);
    h.writeUInt32LE(csize, 18);
    h.writeUInt32LE(usize, 22);
    h.writeUInt16LE(name.length, 26);
    h.writeUInt16LE(0, 28);
    return Buffer.concat([h, name]);
  }

  private centralHeader(name: Buffer, method: number, crc: number, csize: number, usize: number, at: number): Buffer {
    const h = Buffer.alloc(46);
    h.writeUInt32LE(0x02014b50, 0);
    h.writeUInt16LE(20, 4); // made by
    h.writeUInt16LE(20, 6); // needed
    h.writeUInt16LE(0x0800, 8);
    h.writeUInt16LE(method, 10);
    h.writeUInt32LE(0, 12);
    h.writeUInt32LE(crc >>> 0, 16);
    h.writeUInt32LE(csize, 20);
    h.writeUInt32LE(usize, 24);
    h.writeUInt16LE(name.length, 28);
    h.writeUInt32LE(at, 42);
    return Buffer.concat([h, name]);
  }

  async addStored(nameStr: string, data: Buffer): Promise<void> {
    const name = Buffer.from(nameStr);
    const at = this.offset;
    const crc = crc32(data);
    await this.write(this.localHeader(name, 0, crc, data.length, data.length));
    await this.write(data);
    this.central.push(this.centralHeader(name, 0, crc, data.length, data.length, at));
  }

  /**
   * Deflate `size` zeros. The compressed form is computed first in memory (zeros deflate about
   * 1000:1, so 600 MB is ~600 KB) one megabyte of input at a time, then written after a header
   * that already carries the true sizes.
   */
  async addDeflatedZeros(nameStr: string, size: number): Promise<void> {
    const name = Buffer.from(nameStr);
    const at = this.offset;
    const zeros = Buffer.alloc(1024 * 1024);
    const deflate = createDeflateRaw({ level: 9 });
    const out: Buffer[] = [];
    deflate.on('data', (c: Buffer) => out.push(c));
    const ended = new Promise<void>((resolve, reject) => {
      deflate.on('end', resolve);
      deflate.on('error', reject);
    });
    let crc = 0;
    for (let left = size; left > 0; ) {
      const n = Math.min(left, zeros.length);
      const piece = n === zeros.length ? zeros : zeros.subarray(0, n);
      crc = crc32(piece, crc);
      if (!deflate.write(piece)) await new Promise((r) => deflate.once('drain', r));
      left -= n;
    }
    deflate.end();
    await ended;
    const compressed = Buffer.concat(out);
    await this.write(this.localHeader(name, 8, crc, compressed.length, size));
    await this.write(compressed);
    this.central.push(this.centralHeader(name, 8, crc, compressed.length, size, at));
  }

  async finish(): Promise<void> {
    const cdStart = this.offset;
    for (const c of this.central) await this.write(c);
    const eocd = Buffer.alloc(22);
    eocd.writeUInt32LE(0x06054b50, 0);
    eocd.writeUInt16LE(this.central.length, 8);
    eocd.writeUInt16LE(this.central.length, 10);
    eocd.writeUInt32LE(this.offset - cdStart, 12);
    eocd.writeUInt32LE(cdStart, 16);
    await this.write(eocd);
    await this.fh.close();
  }
}

function pipeTo(doc: PDFKit.PDFDocument, file: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const out = createWriteStream(file);
    out.on('finish', resolve);
    out.on('error', reject);
    doc.on('error', reject);
    doc.pipe(out);
  });
}
