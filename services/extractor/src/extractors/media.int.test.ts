import { execFile } from 'node:child_process';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PermanentError, createLogger } from '@memstream/kit';
import { DEFAULT_LIMITS, type ExtractContext, type ExtractLimits, type Kind, type SourceFile } from '../kinds.js';
import { extractIsolated } from '../sandbox.js';
import { makeBlankImage, makeSilentVideoMp4, makeSpeechWav, makeTextImage, makeVideoMp4, makeVideoWebm } from '../testing/media-fixtures.js';
import { imageExtractor, mediaExtractor } from './media.js';
import { imageInfo, terminateOcr } from './ocr.js';
import { pocketsphinxTranscriber, probeMedia } from './transcribers.js';

const run = promisify(execFile);

const PHRASE = 'Invoice Number 4821 Total due 317 dollars';
/** Short common words pocketsphinx's language model knows; espeak's Klatt voice reads them clearly. */
const SENTENCE = 'hello world this is a test of the memory service';
const EXPECTED = ['hello', 'world', 'test', 'memory', 'service'];

let dir: string;

async function context(limits: Partial<ExtractLimits> = {}): Promise<ExtractContext> {
  const workDir = await mkdtemp(path.join(dir, 'work-'));
  return { limits: { ...DEFAULT_LIMITS, ...limits }, log: createLogger('media-test', { level: 'silent' }), workDir, signal: new AbortController().signal };
}

async function source(file: string): Promise<SourceFile> {
  return { path: file, size: (await stat(file)).size, filename: path.basename(file), mimeType: null, fileType: null };
}

/** Expected words that appear as whole words in a transcript. */
function heard(transcript: string): string[] {
  const words = new Set(transcript.toLowerCase().split(/\W+/));
  return EXPECTED.filter((w) => words.has(w));
}

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'memstream-media-'));
});

afterAll(async () => {
  await terminateOcr();
  await rm(dir, { recursive: true, force: true });
});

describe('image OCR (tesseract.js, local English model)', () => {
  it.each(['png', 'jpg', 'gif', 'webp'] as const)('reads the words of a %s image', async (format) => {
    const img = await makeTextImage(dir, PHRASE, format, `invoice-scan.${format}`);
    const out = await imageExtractor.extract(await source(img), 'image', await context());
    expect(out.text).toContain('Invoice');
    expect(out.text).toContain('4821');
    expect(out).toMatchObject({ type: 'image', format: 'plain', title: 'invoice-scan' });
  });

  it('titles an image without a file name by its first line', async () => {
    const img = await makeTextImage(dir, PHRASE, 'png', 'untitled.png');
    const out = await imageExtractor.extract({ ...(await source(img)), filename: null }, 'image', await context());
    expect(out.title).toContain('Invoice Number 4821');
  });

  it('returns empty text for an image with nothing written on it', async () => {
    const img = await makeBlankImage(dir);
    const out = await imageExtractor.extract(await source(img), 'image', await context());
    expect(out.text).toBe('');
    expect(out.type).toBe('image');
  });

  it('refuses an image over maxPixels before decoding it', async () => {
    const img = await makeTextImage(dir, PHRASE, 'png', 'big.png');
    const err = await imageExtractor.extract(await source(img), 'image', await context({ maxPixels: 100_000 })).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PermanentError);
    expect((err as Error).message).toMatch(/1400×300 pixels, over the limit/);
  });

  it('refuses a file that is not an image it can read', async () => {
    const notImage = path.join(dir, 'fake.png');
    await run('sh', ['-c', `printf 'not a picture' > '${notImage}'`]);
    await expect(imageExtractor.extract(await source(notImage), 'image', await context())).rejects.toThrow(PermanentError);
  });

  it('measures PNG, JPEG, GIF and the three WebP encodings from their headers', async () => {
    for (const f of ['png', 'jpg', 'gif', 'webp'] as const) {
      expect(await imageInfo(await makeTextImage(dir, 'x', f, `dims.${f}`))).toMatchObject({ width: 1400, height: 300 });
    }
    const lossless = path.join(dir, 'lossless.webp');
    await run('/usr/bin/convert', ['-size', '640x480', 'xc:white', '-define', 'webp:lossless=true', lossless]);
    expect(await imageInfo(lossless)).toEqual({ format: 'webp', width: 640, height: 480 });
    const extended = path.join(dir, 'alpha.webp');
    await run('/usr/bin/convert', ['-size', '321x123', 'xc:none', '-fill', 'black', '-draw', 'rectangle 1,1 9,9', extended]);
    expect(await imageInfo(extended)).toEqual({ format: 'webp', width: 321, height: 123 });
    expect(await imageInfo(await makeSpeechWav(dir, 'x', 'not-image.wav'))).toBeNull();
  });
});

describe('audio and video (pocketsphinx, the offline default)', () => {
  it('transcribes a speech WAV', async () => {
    const wav = await makeSpeechWav(dir, SENTENCE, 'greeting.wav');
    const out = await mediaExtractor.extract(await source(wav), 'audio', await context());
    console.log(`pocketsphinx (wav): "${out.text}"`);
    expect(out).toMatchObject({ type: 'audio', format: 'plain', title: 'greeting' });
    // pocketsphinx is weak; measured on this voice it hears most words, so 3 of 5 is a real but safe bar.
    expect(heard(out.text).length).toBeGreaterThanOrEqual(3);
  });

  it('transcribes the sound track of an MP4 video', async () => {
    const mp4 = await makeVideoMp4(dir, SENTENCE, 'talk.mp4');
    const out = await mediaExtractor.extract(await source(mp4), 'video', await context());
    console.log(`pocketsphinx (mp4): "${out.text}"`);
    expect(out).toMatchObject({ type: 'video', format: 'plain', title: 'talk' });
    expect(heard(out.text).length).toBeGreaterThanOrEqual(3);
  });

  it('probes a WebM (VP8 + Opus) as video with sound', async () => {
    const webm = await makeVideoWebm(dir, 'short', 'clip.webm');
    const probe = await probeMedia(webm, await context());
    expect(probe).toMatchObject({ hasAudio: true, hasVideo: true });
    expect(probe.durationSeconds).toBeGreaterThan(0.5);
  });

  it('reads long audio in pieces, one after another', async () => {
    const wav = await makeSpeechWav(dir, SENTENCE, 'pieces.wav');
    // Two-second pieces cut words at the seams, so only non-empty text across pieces is asserted.
    const text = await pocketsphinxTranscriber({ segmentSeconds: 2 }).transcribe(wav, await context());
    console.log(`pocketsphinx (2 s pieces): "${text}"`);
    expect(text.split('\n\n').length).toBeGreaterThanOrEqual(2);
  });

  it('refuses a video without a sound track', async () => {
    const mp4 = await makeSilentVideoMp4(dir);
    const err = await mediaExtractor.extract(await source(mp4), 'video', await context()).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PermanentError);
    expect((err as Error).message).toBe('no audio track to transcribe');
  });

  it('refuses a recording longer than maxMediaSeconds', async () => {
    const wav = await makeSpeechWav(dir, SENTENCE, 'too-long.wav');
    await expect(mediaExtractor.extract(await source(wav), 'audio', await context({ maxMediaSeconds: 1 }))).rejects.toThrow(/over the limit of 1 s/);
  });

  it('refuses bytes that are not media', async () => {
    const junk = path.join(dir, 'junk.mp3');
    await run('sh', ['-c', `head -c 4096 /dev/urandom > '${junk}'`]);
    await expect(mediaExtractor.extract(await source(junk), 'audio', await context())).rejects.toThrow(PermanentError);
  });
});

describe('in the sandbox child process', () => {
  it.each([
    ['image', () => makeTextImage(dir, PHRASE, 'png', 'sandboxed.png'), ['Invoice', '4821']],
    ['audio', () => makeSpeechWav(dir, SENTENCE, 'sandboxed.wav'), []],
  ] as Array<[Kind, () => Promise<string>, string[]]>)('extracts %s under the memory and time watchdog', async (kind, make, words) => {
    const file = await make();
    const out = await extractIsolated(await source(file), kind, await context({ timeoutMs: 60_000 }));
    console.log(`sandbox ${kind}: peak RSS ${Math.round(out.peakRssBytes / 1048576)} MB, text "${out.text.trim()}"`);
    for (const w of words) expect(out.text).toContain(w);
    if (kind === 'audio') expect(heard(out.text).length).toBeGreaterThanOrEqual(3);
    expect(out.peakRssBytes).toBeGreaterThan(0);
    expect(out.peakRssBytes).toBeLessThan(DEFAULT_LIMITS.maxRssBytes);
  });
});
