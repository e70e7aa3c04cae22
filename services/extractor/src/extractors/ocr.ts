/**
 * OCR with tesseract.js. The English model comes from the @tesseract.js-data/eng npm package on
 * local disk and images are handed over as bytes, so nothing is fetched: tesseract.js's defaults
 * download the model from a CDN, which fails (or hangs) without a network.
 */
import { execFile } from 'node:child_process';
import { open, mkdtemp, readFile, rm } from 'node:fs/promises';
import type { FileHandle } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { promisify } from 'node:util';
import type { Worker as ThreadWorker } from 'node:worker_threads';
import Tesseract from 'tesseract.js';
import { PermanentError, RetryableError, errorMessage } from '@memstream/kit';
import type { ExtractContext } from '../kinds.js';

const run = promisify(execFile);

/**
 * The integer-quantised "best" LSTM model: as accurate as "best" on printed text, a third of its
 * size (2.9 MB gzipped), and the one tesseract.js itself uses by default for LSTM-only work.
 */
const LANG_PATH = path.join(path.dirname(createRequire(import.meta.url).resolve('@tesseract.js-data/eng/package.json')), '4.0.0_best_int');

export type ImageFormat = 'png' | 'jpeg' | 'gif' | 'webp';
export interface ImageInfo {
  format: ImageFormat;
  width: number;
  height: number;
}

async function readAt(fh: FileHandle, position: number, length: number): Promise<Buffer> {
  const buf = Buffer.alloc(length);
  const { bytesRead } = await fh.read(buf, 0, length, position);
  return buf.subarray(0, bytesRead);
}

/** JPEG start-of-frame markers (baseline, progressive, lossless, arithmetic); C4, C8 and CC are not frames. */
const SOF = new Set([0xc0, 0xc1, 0xc2, 0xc3, 0xc5, 0xc6, 0xc7, 0xc9, 0xca, 0xcb, 0xcd, 0xce, 0xcf]);

/** Walks the JPEG segments (EXIF and ICC segments before the frame header can be large) to the first SOFn. */
async function jpegSize(fh: FileHandle): Promise<{ width: number; height: number } | null> {
  let pos = 2;
  // A bounded walk: a corrupt file with zero-length segments must not loop for ever.
  for (let i = 0; i < 10_000; i++) {
    const head = await readAt(fh, pos, 9);
    if (head.length < 4 || head[0] !== 0xff) return null;
    const marker = head[1]!;
    if (marker === 0xff) {
      pos += 1; // fill byte
      continue;
    }
    // Markers without a length field.
    if (marker === 0x01 || (marker >= 0xd0 && marker <= 0xd7)) {
      pos += 2;
      continue;
    }
    if (marker === 0xd9 || marker === 0xda) return null; // end of image or scan data before any frame header
    const len = head.readUInt16BE(2);
    if (SOF.has(marker)) {
      if (head.length < 9) return null;
      return { height: head.readUInt16BE(5), width: head.readUInt16BE(7) };
    }
    if (len < 2) return null;
    pos += 2 + len;
  }
  return null;
}

/**
 * Format and size of a PNG, JPEG, GIF or WebP from its header alone, so an image is measured
 * before anything decodes it (a small file can declare an enormous canvas). Null for anything else.
 */
export async function imageInfo(file: string): Promise<ImageInfo | null> {
  const fh = await open(file, 'r');
  try {
    const b = await readAt(fh, 0, 32);
    if (b.length >= 24 && b.readUInt32BE(0) === 0x89504e47 && b.toString('latin1', 12, 16) === 'IHDR') {
      return { format: 'png', width: b.readUInt32BE(16), height: b.readUInt32BE(20) };
    }
    if (b.length >= 10 && (b.toString('latin1', 0, 6) === 'GIF87a' || b.toString('latin1', 0, 6) === 'GIF89a')) {
      return { format: 'gif', width: b.readUInt16LE(6), height: b.readUInt16LE(8) };
    }
    if (b.length >= 3 && b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff) {
      const size = await jpegSize(fh);
      return size && { format: 'jpeg', ...size };
    }
    if (b.length >= 30 && b.toString('latin1', 0, 4) === 'RIFF' && b.toString('latin1', 8, 12) === 'WEBP') {
      const chunk = b.toString('latin1', 12, 16);
      if (chunk === 'VP8 ') {
        // Lossy: a 3-byte frame tag, the start code 9d 01 2a, then 14-bit width and height.
        if (b[23] !== 0x9d || b[24] !== 0x01 || b[25] !== 0x2a) return null;
        return { format: 'webp', width: b.readUInt16LE(26) & 0x3fff, height: b.readUInt16LE(28) & 0x3fff };
      }
      if (chunk === 'VP8L') {
        // Lossless: signature 0x2f, then width-1 and height-1 in 14 bits each, little-endian bit order.
        if (b[20] !== 0x2f) return null;
        const bits = b.readUInt32LE(21);
        return { format: 'webp', width: (bits & 0x3fff) + 1, height: ((bits >>> 14) & 0x3fff) + 1 };
      }
      if (chunk === 'VP8X') {
        // Extended: the canvas size as 24-bit width-1 and height-1.
        return { format: 'webp', width: b.readUIntLE(24, 3) + 1, height: b.readUIntLE(27, 3) + 1 };
      }
    }
    return null;
  } finally {
    await fh.close();
  }
}

/**
 * tesseract.js's worker exposes its thread as `worker` (not in its typings). The thread is
 * unref'ed while idle so it never keeps a finished process alive (that is what "terminate on
 * exit" amounts to for a thread), and watched so a thread that dies fails its job instead of
 * leaving it pending for ever.
 */
type OcrWorker = Tesseract.Worker & { worker?: ThreadWorker | null; died: Promise<never> };

let workerPromise: Promise<OcrWorker> | null = null;
/** One job at a time: the worker is one thread, and callers (PDF pages) may ask concurrently. */
let queue: Promise<unknown> = Promise.resolve();

/** The process's one OCR worker, started on first use (about a second: the WASM core and the model). */
function ocrWorker(): Promise<OcrWorker> {
  if (workerPromise) return workerPromise;
  let starting = true;
  let failStart: (err: unknown) => void = () => {};
  // createWorker never settles when loading the model fails (it swallows that error and only
  // reports it to errorHandler), so the first error while starting fails the start instead.
  const startFailed = new Promise<never>((_, reject) => (failStart = reject));
  const created = Tesseract.createWorker('eng', Tesseract.OEM.LSTM_ONLY, {
    langPath: LANG_PATH,
    gzip: true,
    // 'none': never read or write a cached model in the working directory.
    cacheMethod: 'none',
    // Without an errorHandler, tesseract.js throws a failed job's error from its message listener,
    // which crashes the process; with one, a failed job just rejects its own promise.
    errorHandler: (err: unknown) => {
      if (starting) failStart(err);
    },
    logger: () => {},
  });
  const started: Promise<OcrWorker> = Promise.race([created, startFailed])
    .then((w: Tesseract.Worker) => {
      starting = false;
      const ocr = w as OcrWorker;
      const thread = ocr.worker;
      ocr.died = new Promise<never>((_, reject) => {
        thread?.once('exit', (code) => {
          if (workerPromise === started) workerPromise = null;
          reject(new RetryableError(`the OCR worker stopped (exit ${code})`));
        });
      });
      ocr.died.catch(() => undefined);
      // Idle, the worker thread must not keep the process alive; it is ref'ed while a job runs.
      thread?.unref();
      return ocr;
    })
    .catch((err: unknown) => {
      starting = false;
      workerPromise = null;
      // A half-started worker would hold its thread (and the process) for nothing.
      void created.then((w) => w.terminate(), () => undefined);
      throw new RetryableError(`the OCR engine did not start: ${errorMessage(err)}`);
    });
  workerPromise = started;
  return started;
}

/** Stops the OCR worker (graceful shutdown, tests). The next OCR starts a new one. */
export async function terminateOcr(): Promise<void> {
  const p = workerPromise;
  workerPromise = null;
  if (!p) return;
  const w = await p.catch(() => null);
  await w?.terminate();
}

async function recognize(image: Buffer): Promise<{ text: string; confidence: number }> {
  const job = queue.then(async () => {
    const w = await ocrWorker();
    w.worker?.ref();
    try {
      const { data } = await Promise.race([w.recognize(image), w.died]);
      return { text: data.text, confidence: data.confidence };
    } finally {
      w.worker?.unref();
    }
  });
  queue = job.catch(() => undefined);
  return job;
}

/**
 * Text in an image, with tesseract's mean word confidence (0–100). Refuses images over
 * ctx.limits.maxPixels before decoding them. GIF and WebP that tesseract cannot decode itself
 * (animated, unusual encodings) are converted to PNG with ffmpeg first.
 */
export async function ocrImage(imagePath: string, ctx: ExtractContext): Promise<{ text: string; confidence: number }> {
  ctx.signal.throwIfAborted();
  const info = await imageInfo(imagePath);
  if (!info) throw new PermanentError('not a readable PNG, JPEG, GIF or WebP image');
  const pixels = info.width * info.height;
  if (pixels === 0) throw new PermanentError(`the image has no pixels (${info.width}×${info.height})`);
  if (pixels > ctx.limits.maxPixels) {
    throw new PermanentError(`the image is ${info.width}×${info.height} pixels, over the limit of ${(ctx.limits.maxPixels / 1e6).toFixed(1)} megapixels`);
  }
  try {
    return await recognize(await readFile(imagePath));
  } catch (err) {
    if (err instanceof RetryableError) throw err;
    if (info.format !== 'gif' && info.format !== 'webp') throw new PermanentError(`could not read the image: ${errorMessage(err)}`);
    ctx.log.debug({ format: info.format, err: errorMessage(err) }, 'tesseract could not decode the image; converting it to PNG');
  }
  const dir = await mkdtemp(path.join(ctx.workDir, 'ocr-'));
  try {
    const png = path.join(dir, 'frame.png');
    try {
      await run('ffmpeg', ['-hide_banner', '-loglevel', 'error', '-nostdin', '-y', '-i', imagePath, '-frames:v', '1', png], { signal: ctx.signal });
    } catch (err) {
      throw new PermanentError(`could not read the ${info.format.toUpperCase()} image: ${lastLine(err)}`);
    }
    try {
      return await recognize(await readFile(png));
    } catch (err) {
      if (err instanceof RetryableError) throw err;
      throw new PermanentError(`could not read the image: ${errorMessage(err)}`);
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

function lastLine(err: unknown): string {
  const stderr = (err as { stderr?: unknown }).stderr;
  const text = typeof stderr === 'string' && stderr.trim() ? stderr : errorMessage(err);
  return text.trim().split('\n').at(-1)?.slice(0, 300) ?? '';
}
