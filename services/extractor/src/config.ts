import { z } from 'zod';
import { commonEnv, intFromEnv, parseEnv } from '@memstream/kit';
import { DEFAULT_FETCH_POLICY, parseFetchAllow, type FetchPolicy } from './extractors/ssrf.js';
import { DEFAULT_LIMITS, type ExtractLimits } from './kinds.js';

/** `VAR=` in an env file means unset, not an empty key or path. */
const unsetIfEmpty = <T extends z.ZodType>(schema: T) => z.preprocess((v) => (v === '' ? undefined : v), schema);

/**
 * How audio and video are transcribed (extractors/media.ts). Sandbox children inherit the
 * service's environment, so the child reads the same values the service validated at start.
 */
export const transcriberEnv = {
  /**
   * pocketsphinx (default): offline Debian pocketsphinx, low accuracy. openai: any
   * OpenAI-compatible /audio/transcriptions endpoint. whisper-cpp: a local whisper.cpp CLI.
   */
  TRANSCRIBER: z.enum(['pocketsphinx', 'openai', 'whisper-cpp']).default('pocketsphinx'),
  /** Base URL of the OpenAI-compatible API, up to and including /v1 (e.g. http://localhost:8000/v1). */
  OPENAI_TRANSCRIBE_URL: z.url().default('https://api.openai.com/v1'),
  /** The model name sent with each request. */
  OPENAI_TRANSCRIBE_MODEL: z.string().min(1).default('whisper-1'),
  /** Sent as "Authorization: Bearer …"; unset for local servers that need no key. */
  OPENAI_API_KEY: unsetIfEmpty(z.string().optional()),
  /** The whisper.cpp CLI: a name looked up on PATH, or a path. */
  WHISPER_CPP_BIN: z.string().min(1).default('whisper-cli'),
  /** Path to a ggml model file (e.g. ggml-base.en.bin); required when TRANSCRIBER=whisper-cpp. */
  WHISPER_CPP_MODEL: unsetIfEmpty(z.string().optional()),
  /** Spoken language passed to whisper.cpp (-l): a code such as en, or auto to detect it. */
  WHISPER_CPP_LANGUAGE: z.string().min(1).default('auto'),
};
export const TranscriberSettings = z.object(transcriberEnv);
export type TranscriberSettings = z.infer<typeof TranscriberSettings>;
export const loadTranscriberSettings = (): TranscriberSettings => parseEnv(TranscriberSettings);

/** The extractor's whole environment, parsed once. */
export const Config = z.object({
  ...commonEnv,
  /** Documents one process extracts at once. */
  EXTRACTOR_CONCURRENCY: intFromEnv(32),
  /** Per file: wall time, and resident memory of the child process tree that parses it. */
  EXTRACT_TIMEOUT_MS: z.coerce.number().int().min(1000).default(DEFAULT_LIMITS.timeoutMs),
  EXTRACT_MAX_RSS_MB: z.coerce.number().int().min(64).default(DEFAULT_LIMITS.maxRssBytes / 1048576),
  /** PDF pages read per file, and pixels per image, before the rest is refused. */
  EXTRACT_MAX_PAGES: z.coerce.number().int().min(1).default(DEFAULT_LIMITS.maxPages),
  EXTRACT_MAX_PIXELS: z.coerce.number().int().min(1).default(DEFAULT_LIMITS.maxPixels),
  /** UTF-8 bytes of extracted text per document (default 5 MB); a document with more ends failed. */
  EXTRACT_MAX_TEXT_BYTES: z.coerce.number().int().min(1024).default(DEFAULT_LIMITS.maxTextBytes),
  ...transcriberEnv,
  /**
   * CIDRs, addresses and host names that URL fetching may reach although the SSRF policy refuses
   * them (loopback, private networks…), comma-separated: "10.0.0.0/8,intranet.example". A name
   * starting with '.' allows every subdomain. Empty: only public addresses are fetched.
   */
  MEMSTREAM_FETCH_ALLOW: z
    .string()
    .default('')
    .superRefine((spec, ctx) => {
      try {
        parseFetchAllow(spec);
      } catch (err) {
        ctx.addIssue({ code: 'custom', message: err instanceof Error ? err.message : String(err) });
      }
    }),
  /** Connecting to a fetched URL's server and receiving its response headers; also the longest silence while a body streams. */
  MEMSTREAM_FETCH_TIMEOUT_MS: z.coerce.number().int().min(100).default(DEFAULT_FETCH_POLICY.timeoutMs),
  /** A whole URL fetch, redirects and body included. */
  MEMSTREAM_FETCH_TOTAL_TIMEOUT_MS: z.coerce.number().int().min(100).default(DEFAULT_FETCH_POLICY.totalTimeoutMs),
  /** Largest body a URL fetch keeps, counted after decompression. */
  MEMSTREAM_FETCH_MAX_BYTES: z.coerce.number().int().min(1).default(DEFAULT_FETCH_POLICY.maxBytes),
  /**
   * TEST ONLY, unset (inert) by default: text content containing this marker (at least 16
   * characters) makes extraction throw a plain error on every attempt, as a parser bug would, so
   * the end-to-end suite can show a poison document failing without holding up the others.
   */
  MEMSTREAM_TEST_POISON_MARKER: unsetIfEmpty(z.string().min(16).optional()),
});
export type Config = z.infer<typeof Config>;

export const loadConfig = (): Config => parseEnv(Config);

/** The URL fetcher's policy from the configuration: `createUrlFetcher(fetchPolicyFrom(config))`. */
export function fetchPolicyFrom(config: Config): FetchPolicy {
  return {
    ...DEFAULT_FETCH_POLICY,
    allow: parseFetchAllow(config.MEMSTREAM_FETCH_ALLOW),
    timeoutMs: config.MEMSTREAM_FETCH_TIMEOUT_MS,
    // The whole fetch cannot be shorter than one request of it.
    totalTimeoutMs: Math.max(config.MEMSTREAM_FETCH_TOTAL_TIMEOUT_MS, config.MEMSTREAM_FETCH_TIMEOUT_MS),
    maxBytes: config.MEMSTREAM_FETCH_MAX_BYTES,
  };
}

/** The extraction limits from the configuration; zip limits keep their defaults. */
export function limitsFrom(config: Config): ExtractLimits {
  return {
    ...DEFAULT_LIMITS,
    timeoutMs: config.EXTRACT_TIMEOUT_MS,
    maxRssBytes: config.EXTRACT_MAX_RSS_MB * 1048576,
    maxPages: config.EXTRACT_MAX_PAGES,
    maxPixels: config.EXTRACT_MAX_PIXELS,
    maxTextBytes: config.EXTRACT_MAX_TEXT_BYTES,
  };
}
