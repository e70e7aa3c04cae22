/**
 * Images (OCR) and audio/video (speech to text). Both run in the sandbox child (registry.ts lists
 * them as isolated kinds), which inherits the service's environment, so the transcriber settings
 * read here are the ones the service validated at start.
 *
 * Environment (parsed once, by loadTranscriberSettings in ../config.ts):
 * - TRANSCRIBER: pocketsphinx (default; offline, low accuracy) | openai | whisper-cpp.
 * - OPENAI_TRANSCRIBE_URL: base URL of an OpenAI-compatible API including /v1
 *   (default https://api.openai.com/v1; e.g. http://localhost:8000/v1 for a local server).
 * - OPENAI_TRANSCRIBE_MODEL: model name sent with each request (default whisper-1).
 * - OPENAI_API_KEY: bearer token; leave unset for servers without authentication.
 * - WHISPER_CPP_BIN: the whisper.cpp CLI, a name on PATH or a path (default whisper-cli).
 * - WHISPER_CPP_MODEL: path to a ggml model file; required with TRANSCRIBER=whisper-cpp.
 * - WHISPER_CPP_LANGUAGE: language code for whisper.cpp, or auto (default auto).
 */
import { PermanentError } from '@memstream/kit';
import { loadTranscriberSettings } from '../config.js';
import { titleOf } from '../handlers/extract-text.js';
import type { ExtractResult, FileExtractor, Kind } from '../kinds.js';
import { ocrImage } from './ocr.js';
import { createTranscriber, probeMedia, type Transcriber } from './transcribers.js';

/** Mean word confidence (0–100) under which tesseract's output is noise read from a picture. */
const MIN_OCR_CONFIDENCE = 30;
/** Fewer letters and digits than this is not text worth storing (stray marks read as "|" or "a"). */
const MIN_WORD_CHARS = 3;

/** The file name without its extension, or null. */
function baseName(filename: string | null): string | null {
  const name = filename?.replace(/\.[^.]+$/, '').trim();
  return name ? name : null;
}

/** Tesseract's text tidied: no trailing spaces, at most one blank line in a row. */
function tidy(text: string): string {
  return text
    .replace(/\r\n?/g, '\n')
    .replace(/[ \t]+$/gm, '')
    .replace(/\n{3,}/g, '\n\n')
    .trim();
}

/**
 * An image read with OCR. Text read with low confidence, or hardly any text, comes back empty:
 * the handler turns that into the failure "no extractable text" rather than storing noise.
 */
export const imageExtractor: FileExtractor = {
  kinds: ['image'] satisfies Kind[],
  async extract(file, _kind, ctx): Promise<ExtractResult> {
    const started = Date.now();
    const { text, confidence } = await ocrImage(file.path, ctx);
    const clean = tidy(text);
    const wordChars = clean.match(/[\p{L}\p{N}]/gu)?.length ?? 0;
    const usable = confidence >= MIN_OCR_CONFIDENCE && wordChars >= MIN_WORD_CHARS;
    ctx.log.debug({ confidence, wordChars, usable, ms: Date.now() - started }, 'image OCR');
    return {
      title: baseName(file.filename) ?? (usable ? titleOf(clean) : null),
      type: 'image',
      text: usable ? clean : '',
      format: 'plain',
    };
  },
};

/** A media extractor with its transcriber; the default one reads the environment once, on first use. */
export function createMediaExtractor(transcriber: () => Transcriber): FileExtractor {
  return {
    kinds: ['audio', 'video'] satisfies Kind[],
    async extract(file, kind, ctx): Promise<ExtractResult> {
      const probe = await probeMedia(file.path, ctx);
      if (!probe.hasAudio) throw new PermanentError('no audio track to transcribe');
      if (probe.durationSeconds !== null && probe.durationSeconds > ctx.limits.maxMediaSeconds) {
        throw new PermanentError(`the recording is ${Math.round(probe.durationSeconds)} s long, over the limit of ${ctx.limits.maxMediaSeconds} s`);
      }
      const t = transcriber();
      const started = Date.now();
      const text = await t.transcribe(file.path, ctx);
      ctx.log.info({ transcriber: t.name, seconds: probe.durationSeconds, ms: Date.now() - started, chars: text.length }, 'transcribed');
      return {
        title: baseName(file.filename),
        // An .mp4 or .webm holding only sound is sniffed as video; it is a recording to the user.
        type: kind === 'video' && probe.hasVideo ? 'video' : 'audio',
        text,
        format: 'plain',
      };
    },
  };
}

let configured: Transcriber | null = null;

/** The transcriber the environment names, built once per process. */
function configuredTranscriber(): Transcriber {
  configured ??= createTranscriber(loadTranscriberSettings());
  return configured;
}

/** Audio and video transcribed with the configured transcriber (TRANSCRIBER, default pocketsphinx). */
export const mediaExtractor: FileExtractor = createMediaExtractor(configuredTranscriber);
