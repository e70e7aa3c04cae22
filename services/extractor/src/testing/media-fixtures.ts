/**
 * Test fixtures made on the spot with local tools (ImageMagick, espeak-ng, ffmpeg), so no image,
 * audio or video file has to live in the repository and nothing is downloaded.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import path from 'node:path';

const run = promisify(execFile);

/** /usr/local/bin/convert on some machines is not ImageMagick; the Debian one is. */
const CONVERT = '/usr/bin/convert';

export type ImageFormat = 'png' | 'jpg' | 'gif' | 'webp';

let fontArgs: Promise<string[]> | null = null;

/** DejaVu Sans when ImageMagick knows it (clean glyphs OCR well), else ImageMagick's default font. */
function font(): Promise<string[]> {
  fontArgs ??= run(CONVERT, ['-list', 'font'], { maxBuffer: 16 * 1024 * 1024 })
    .then(({ stdout }) => (/Font: DejaVu-Sans\s*$/m.test(stdout) ? ['-font', 'DejaVu-Sans'] : []))
    .catch(() => []);
  return fontArgs;
}

/** A 1400×300 white image with `text` in black, in the given format. */
export async function makeTextImage(dir: string, text: string, format: ImageFormat, name = `text.${format}`): Promise<string> {
  const out = path.join(dir, name);
  await run(CONVERT, ['-size', '1400x300', 'xc:white', ...(await font()), '-pointsize', '56', '-fill', 'black', '-annotate', '+40+170', text, out]);
  return out;
}

/** A white image with nothing on it. */
export async function makeBlankImage(dir: string, name = 'blank.png'): Promise<string> {
  const out = path.join(dir, name);
  await run(CONVERT, ['-size', '800x400', 'xc:white', out]);
  return out;
}

/**
 * Speech as WAV. The Klatt voice at 160 words a minute is the espeak-ng setting pocketsphinx
 * understood best when measured (the default voice gave mostly wrong words).
 */
export async function makeSpeechWav(dir: string, sentence: string, name = 'speech.wav'): Promise<string> {
  const out = path.join(dir, name);
  await run('espeak-ng', ['-v', 'en-us+klatt4', '-s', '160', '-w', out, sentence]);
  return out;
}

async function ffmpeg(args: string[]): Promise<void> {
  await run('ffmpeg', ['-hide_banner', '-loglevel', 'error', '-y', ...args]);
}

/** Seconds of audio in a file, from ffprobe. */
async function seconds(file: string): Promise<number> {
  const { stdout } = await run('ffprobe', ['-v', 'error', '-show_entries', 'format=duration', '-of', 'csv=p=0', file]);
  return Number(stdout.trim());
}

/** The same speech as MP3. */
export async function makeSpeechMp3(dir: string, sentence: string, name = 'speech.mp3'): Promise<string> {
  const wav = await makeSpeechWav(dir, sentence, `${name}.wav`);
  const out = path.join(dir, name);
  await ffmpeg(['-i', wav, '-c:a', 'libmp3lame', '-b:a', '64k', out]);
  return out;
}

/** An MP4 (H.264 + AAC): a blue picture with the speech as its sound track. */
export async function makeVideoMp4(dir: string, sentence: string, name = 'video.mp4'): Promise<string> {
  const wav = await makeSpeechWav(dir, sentence, `${name}.wav`);
  const dur = Math.ceil(await seconds(wav)) + 1;
  const out = path.join(dir, name);
  await ffmpeg(['-f', 'lavfi', '-i', `color=c=blue:s=320x240:d=${dur}`, '-i', wav, '-shortest', '-c:v', 'libx264', '-preset', 'ultrafast', '-pix_fmt', 'yuv420p', '-c:a', 'aac', out]);
  return out;
}

/** A WebM (VP8 + Opus) with the speech as its sound track. */
export async function makeVideoWebm(dir: string, sentence: string, name = 'video.webm'): Promise<string> {
  const wav = await makeSpeechWav(dir, sentence, `${name}.wav`);
  const dur = Math.ceil(await seconds(wav)) + 1;
  const out = path.join(dir, name);
  await ffmpeg(['-f', 'lavfi', '-i', `color=c=blue:s=320x240:d=${dur}`, '-i', wav, '-shortest', '-c:v', 'libvpx', '-deadline', 'realtime', '-c:a', 'libopus', out]);
  return out;
}

/** An MP4 with a picture and no sound track at all. */
export async function makeSilentVideoMp4(dir: string, name = 'silent.mp4', durationSeconds = 2): Promise<string> {
  const out = path.join(dir, name);
  await ffmpeg(['-f', 'lavfi', '-i', `color=c=blue:s=320x240:d=${durationSeconds}`, '-c:v', 'libx264', '-preset', 'ultrafast', '-pix_fmt', 'yuv420p', out]);
  return out;
}

/** A tone of a given length, for length limits and segmenting (no speech needed). */
export async function makeToneWav(dir: string, durationSeconds: number, name = 'tone.wav'): Promise<string> {
  const out = path.join(dir, name);
  await ffmpeg(['-f', 'lavfi', '-i', `sine=frequency=440:duration=${durationSeconds}`, '-ac', '1', '-ar', '16000', out]);
  return out;
}
