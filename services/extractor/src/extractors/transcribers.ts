/**
 * Speech to text behind one port, with three adapters: offline pocketsphinx (the default),
 * an OpenAI-compatible HTTP API, and a local whisper.cpp CLI. Every adapter reads the audio in
 * fixed-length segments made by ffmpeg, one after another, so memory and scratch disk stay flat
 * however long the recording is.
 */
import { execFile } from 'node:child_process';
import { constants } from 'node:fs';
import { access, mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { PermanentError, RetryableError, errorMessage } from '@memstream/kit';
import type { TranscriberSettings } from '../config.js';
import type { ExtractContext } from '../kinds.js';

const execFileP = promisify(execFile);

/** The port: a local audio or video file in, its spoken text out. */
export interface Transcriber {
  name: string;
  transcribe(audioPath: string, ctx: ExtractContext): Promise<string>;
}

// ---------------------------------------------------------------------------------------------
// Running tools

/** A tool exited with an error; stderr's tail says why. */
class ToolError extends Error {
  constructor(
    readonly tool: string,
    readonly missing: boolean,
    readonly stderr: string,
    message: string,
  ) {
    super(message);
  }
  /** The last lines of stderr, where ffmpeg and friends put the actual reason. */
  get reason(): string {
    const lines = this.stderr.trim().split('\n').filter((l) => l.trim() !== '');
    return (lines.slice(-2).join(' ') || this.message).slice(0, 300);
  }
}

/** Runs a command without a shell (arguments are never re-parsed) and returns its stdout. */
async function runTool(cmd: string, args: string[], ctx: ExtractContext): Promise<string> {
  try {
    const { stdout } = await execFileP(cmd, args, { signal: ctx.signal, maxBuffer: 64 * 1024 * 1024, encoding: 'utf8' });
    return stdout;
  } catch (err) {
    if (ctx.signal.aborted) throw err;
    const e = err as NodeJS.ErrnoException & { stderr?: string };
    throw new ToolError(cmd, e.code === 'ENOENT', typeof e.stderr === 'string' ? e.stderr : '', errorMessage(err));
  }
}

const FFMPEG_QUIET = ['-hide_banner', '-loglevel', 'error', '-nostdin', '-y'];

export interface MediaProbe {
  /** Seconds, or null when the container does not say (some live-recorded WebM files). */
  durationSeconds: number | null;
  hasAudio: boolean;
  hasVideo: boolean;
}

/** Duration and streams of a media file, from ffprobe. */
export async function probeMedia(file: string, ctx: ExtractContext): Promise<MediaProbe> {
  let out: string;
  try {
    out = await runTool('ffprobe', ['-v', 'error', '-show_entries', 'format=duration:stream=codec_type', '-of', 'json', file], ctx);
  } catch (err) {
    if (err instanceof ToolError && err.missing) throw new PermanentError('ffprobe not found: install ffmpeg');
    if (err instanceof ToolError) throw new PermanentError(`not a readable audio or video file: ${err.reason}`);
    throw err;
  }
  const json = JSON.parse(out) as { format?: { duration?: string }; streams?: Array<{ codec_type?: string }> };
  const duration = Number(json.format?.duration);
  const types = new Set((json.streams ?? []).map((s) => s.codec_type));
  return { durationSeconds: Number.isFinite(duration) ? duration : null, hasAudio: types.has('audio'), hasVideo: types.has('video') };
}

type SegmentFormat = 'wav' | 'mp3';

/** Bytes per second of 16 kHz mono 16-bit PCM. */
const PCM_RATE = 32_000;

async function ffmpegOrExplain(args: string[], ctx: ExtractContext): Promise<void> {
  try {
    await runTool('ffmpeg', [...FFMPEG_QUIET, ...args], ctx);
  } catch (err) {
    if (!(err instanceof ToolError)) throw err;
    if (err.missing) throw new PermanentError('ffmpeg not found: install ffmpeg');
    if (/matches no streams/i.test(err.stderr)) throw new PermanentError('no audio track to transcribe');
    throw new PermanentError(`could not decode the audio: ${err.reason}`);
  }
}

/**
 * Calls `fn` on consecutive `seconds`-long pieces of the first audio track, each converted to
 * 16 kHz mono, one at a time; each piece is deleted before the next is made. Pieces are cut as
 * PCM WAV, whose length is exact from its byte count (MP3 pieces are encoded from that WAV), so
 * the end of the audio is found without trusting the container's duration; audio running past
 * ctx.limits.maxMediaSeconds is refused, which covers files that state no duration at all.
 */
async function forEachSegment<T>(input: string, format: SegmentFormat, seconds: number, ctx: ExtractContext, fn: (segment: string, index: number) => Promise<T>): Promise<T[]> {
  const dir = await mkdtemp(path.join(ctx.workDir, 'audio-'));
  const results: T[] = [];
  try {
    for (let i = 0; ; i++) {
      const start = i * seconds;
      if (start >= ctx.limits.maxMediaSeconds) throw new PermanentError(`the recording is longer than the limit of ${ctx.limits.maxMediaSeconds} s`);
      const wav = path.join(dir, `segment-${i}.wav`);
      await ffmpegOrExplain(['-ss', String(start), '-t', String(seconds), '-i', input, '-map', '0:a:0', '-vn', '-ac', '1', '-ar', '16000', '-c:a', 'pcm_s16le', wav], ctx);
      // ffmpeg's WAV header is 44 to ~80 bytes; the difference is a few milliseconds.
      const got = Math.max(0, (await stat(wav)).size - 44) / PCM_RATE;
      // Nothing left: the previous piece ended on the boundary (or there was no sound at all).
      if (got < 0.05) break;
      let piece = wav;
      if (format === 'mp3') {
        piece = path.join(dir, `segment-${i}.mp3`);
        // 32 kbit/s is plenty for 16 kHz mono speech and keeps uploads small (2.4 MB per 10 minutes).
        await ffmpegOrExplain(['-i', wav, '-c:a', 'libmp3lame', '-b:a', '32k', piece], ctx);
        await rm(wav, { force: true });
      }
      results.push(await fn(piece, i));
      await rm(piece, { force: true });
      // -t cuts sample-exactly, so a short piece is the last one.
      if (got < seconds - 0.05) break;
    }
    return results;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Finds an executable: a path as given, or a bare name on PATH. */
async function findExecutable(bin: string): Promise<string | null> {
  const candidates = bin.includes('/') ? [bin] : (process.env.PATH ?? '').split(path.delimiter).filter(Boolean).map((d) => path.join(d, bin));
  for (const c of candidates) {
    try {
      await access(c, constants.X_OK);
      return c;
    } catch {
      // not here
    }
  }
  return null;
}

// ---------------------------------------------------------------------------------------------
// pocketsphinx

const SPHINX_MODEL = '/usr/share/pocketsphinx/model/en-us';

export interface PocketsphinxOptions {
  bin?: string;
  /** Directory with the acoustic model (en-us/), en-us.lm.bin and cmudict-en-us.dict. */
  modelDir?: string;
  /** Seconds per piece: pocketsphinx's memory grows with the length of one input. */
  segmentSeconds?: number;
}

/**
 * Offline transcription with CMU pocketsphinx (Debian pocketsphinx + pocketsphinx-en-us) and its
 * US-English model. WEAK: a 2015-era HMM recogniser, English only; on clear speech it gets the
 * gist, on accents, noise, music or synthetic voices it produces many wrong words. It is the
 * default only because it needs no network and no model download; set TRANSCRIBER=openai or
 * whisper-cpp for usable transcripts. Runs at about half real time on one core, ~110 MB RSS.
 */
export function pocketsphinxTranscriber(opts: PocketsphinxOptions = {}): Transcriber {
  const bin = opts.bin ?? 'pocketsphinx_continuous';
  const model = opts.modelDir ?? SPHINX_MODEL;
  const seconds = opts.segmentSeconds ?? 300;
  let checked: Promise<void> | null = null;
  const check = () =>
    (checked ??= (async () => {
      if (!(await findExecutable(bin))) throw new PermanentError(`${bin} not found: install the pocketsphinx package`);
      for (const f of ['en-us/mdef', 'en-us.lm.bin', 'cmudict-en-us.dict']) {
        const p = path.join(model, f);
        await access(p).catch(() => {
          throw new PermanentError(`pocketsphinx model file ${p} not found: install the pocketsphinx-en-us package`);
        });
      }
    })().catch((err: unknown) => {
      checked = null;
      throw err;
    }));
  return {
    name: 'pocketsphinx',
    async transcribe(audioPath, ctx) {
      await check();
      const pieces = await forEachSegment(audioPath, 'wav', seconds, ctx, async (wav) => {
        const args = ['-infile', wav, '-hmm', path.join(model, 'en-us'), '-lm', path.join(model, 'en-us.lm.bin'), '-dict', path.join(model, 'cmudict-en-us.dict'), '-logfn', '/dev/null'];
        let out: string;
        try {
          out = await runTool(bin, args, ctx);
        } catch (err) {
          if (err instanceof ToolError) throw new PermanentError(`pocketsphinx failed: ${err.reason}`);
          throw err;
        }
        // One recognised utterance per line.
        return out
          .split('\n')
          .map((l) => l.trim())
          .filter(Boolean)
          .join(' ');
      });
      return pieces.filter(Boolean).join('\n\n');
    },
  };
}

// ---------------------------------------------------------------------------------------------
// OpenAI-compatible HTTP API

export interface OpenAiTranscriberOptions {
  /** Up to and including /v1, e.g. https://api.openai.com/v1 or http://localhost:8000/v1. */
  baseUrl: string;
  apiKey?: string | undefined;
  model: string;
  /** Seconds per request; at 32 kbit/s ten minutes is 2.4 MB, far under the 25 MB upload cap. */
  segmentSeconds?: number;
}

/** The API's upload cap per request. */
const MAX_UPLOAD_BYTES = 25 * 1024 * 1024;

/** Retry-After as milliseconds: delta-seconds or an HTTP date. */
function retryAfterMs(header: string | null): number | undefined {
  if (!header) return undefined;
  const secs = Number(header);
  if (Number.isFinite(secs) && secs >= 0) return secs * 1000;
  const at = Date.parse(header);
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now());
}

/**
 * Transcription through POST {baseUrl}/audio/transcriptions (OpenAI, or a compatible server such
 * as faster-whisper-server, LocalAI or vLLM). Audio goes up as 16 kHz mono MP3 in pieces, one
 * request at a time. 429 and 5xx are retryable (the message carries Retry-After); other 4xx are
 * permanent.
 */
export function openAiTranscriber(opts: OpenAiTranscriberOptions): Transcriber {
  const url = `${opts.baseUrl.replace(/\/+$/, '')}/audio/transcriptions`;
  const seconds = opts.segmentSeconds ?? 600;
  return {
    name: 'openai',
    async transcribe(audioPath, ctx) {
      const pieces = await forEachSegment(audioPath, 'mp3', seconds, ctx, async (mp3) => {
        const bytes = await readFile(mp3);
        if (bytes.length > MAX_UPLOAD_BYTES) throw new PermanentError(`an audio piece is ${bytes.length} bytes, over the 25 MB upload limit`);
        const form = new FormData();
        form.set('file', new Blob([bytes], { type: 'audio/mpeg' }), 'audio.mp3');
        form.set('model', opts.model);
        form.set('response_format', 'json');
        let res: Response;
        try {
          res = await fetch(url, { method: 'POST', body: form, headers: opts.apiKey ? { authorization: `Bearer ${opts.apiKey}` } : {}, signal: ctx.signal });
        } catch (err) {
          if (ctx.signal.aborted) throw err;
          const cause = (err as { cause?: unknown }).cause;
          throw new RetryableError(`transcription service at ${url} unreachable: ${cause ? errorMessage(cause) : errorMessage(err)}`);
        }
        const body = await res.text();
        if (res.status === 429 || res.status >= 500) {
          const wait = retryAfterMs(res.headers.get('retry-after'));
          const after = wait === undefined ? '' : `; retry after ${Math.ceil(wait / 1000)} s`;
          throw new RetryableError(`transcription service answered ${res.status}${after}: ${body.slice(0, 200)}`, wait);
        }
        if (!res.ok) throw new PermanentError(`transcription service refused the audio (${res.status}): ${body.slice(0, 300)}`);
        let text: unknown;
        try {
          text = (JSON.parse(body) as { text?: unknown }).text;
        } catch {
          text = undefined;
        }
        if (typeof text !== 'string') throw new PermanentError(`transcription service answered without a text field: ${body.slice(0, 200)}`);
        return text.trim();
      });
      return pieces.filter(Boolean).join('\n\n');
    },
  };
}

// ---------------------------------------------------------------------------------------------
// whisper.cpp

export interface WhisperCppOptions {
  /** The CLI (whisper-cli; `main` in releases before 1.7), a name on PATH or a path. */
  bin: string;
  /** A ggml model file, e.g. ggml-base.en.bin. */
  model: string;
  /** -l: a language code, or auto. */
  language?: string;
  /** Seconds per piece: whisper.cpp holds the whole input as 32-bit floats (230 MB per hour). */
  segmentSeconds?: number;
}

/**
 * A local whisper.cpp CLI: `bin -m model -f piece.wav -l lang -nt -np -otxt -of out`, reading
 * out.txt. Much better than pocketsphinx; the model file is brought by the operator (nothing is
 * downloaded). Mind the sandbox's memory limit: base.en needs ~250 MB, small ~600 MB.
 */
export function whisperCppTranscriber(opts: WhisperCppOptions): Transcriber {
  const seconds = opts.segmentSeconds ?? 600;
  const language = opts.language ?? 'auto';
  let resolved: Promise<string> | null = null;
  const resolveBin = () =>
    (resolved ??= (async () => {
      const bin = await findExecutable(opts.bin);
      if (!bin) throw new PermanentError('whisper.cpp binary not found: set WHISPER_CPP_BIN');
      await access(opts.model, constants.R_OK).catch(() => {
        throw new PermanentError(`whisper.cpp model not found at ${opts.model}: set WHISPER_CPP_MODEL`);
      });
      return bin;
    })().catch((err: unknown) => {
      resolved = null;
      throw err;
    }));
  return {
    name: 'whisper-cpp',
    async transcribe(audioPath, ctx) {
      const bin = await resolveBin();
      const pieces = await forEachSegment(audioPath, 'wav', seconds, ctx, async (wav, i) => {
        const outBase = path.join(path.dirname(wav), `out-${i}`);
        try {
          await runTool(bin, ['-m', opts.model, '-f', wav, '-l', language, '-nt', '-np', '-otxt', '-of', outBase], ctx);
        } catch (err) {
          if (err instanceof ToolError && err.missing) throw new PermanentError('whisper.cpp binary not found: set WHISPER_CPP_BIN');
          if (err instanceof ToolError) throw new PermanentError(`whisper.cpp failed: ${err.reason}`);
          throw err;
        }
        const txt = `${outBase}.txt`;
        let text: string;
        try {
          text = await readFile(txt, 'utf8');
        } catch {
          throw new PermanentError(`whisper.cpp wrote no transcript (${txt})`);
        }
        await rm(txt, { force: true });
        // -nt gives one line per whisper segment; they are pieces of running speech.
        return text
          .split('\n')
          .map((l) => l.trim())
          .filter(Boolean)
          .join(' ');
      });
      return pieces.filter(Boolean).join('\n\n');
    },
  };
}

// ---------------------------------------------------------------------------------------------

/** The transcriber the settings name (TRANSCRIBER and friends; see config.ts). */
export function createTranscriber(settings: TranscriberSettings): Transcriber {
  switch (settings.TRANSCRIBER) {
    case 'openai':
      return openAiTranscriber({ baseUrl: settings.OPENAI_TRANSCRIBE_URL, apiKey: settings.OPENAI_API_KEY, model: settings.OPENAI_TRANSCRIBE_MODEL });
    case 'whisper-cpp':
      if (!settings.WHISPER_CPP_MODEL) throw new PermanentError('TRANSCRIBER=whisper-cpp needs a model: set WHISPER_CPP_MODEL to a ggml model file');
      return whisperCppTranscriber({ bin: settings.WHISPER_CPP_BIN, model: settings.WHISPER_CPP_MODEL, language: settings.WHISPER_CPP_LANGUAGE });
    case 'pocketsphinx':
      return pocketsphinxTranscriber();
  }
}
