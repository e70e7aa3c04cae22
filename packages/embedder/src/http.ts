import { PermanentError, RetryableError } from '@memstream/kit';
import type { RateLimiter } from './rate-limit.js';

/** How one OpenAI-compatible endpoint is called: the embedder's and the chat extractor's. */
export interface ProviderCallPolicy {
  /** Retries of one request after its first attempt, on 408, 429, 5xx and network errors. */
  maxRetries: number;
  /** One request's deadline, response body included; a timeout is retried. */
  timeoutMs: number;
  /** First backoff; it doubles per retry, with jitter, up to `maxBackoffMs`. */
  baseBackoffMs: number;
  /**
   * Longest single wait, for our own backoff and for a server's Retry-After. A server asking for
   * longer is not waited for here: the call fails at once with a RetryableError carrying the
   * wait, and the message goes back to the broker instead of pinning a worker slot.
   */
  maxBackoffMs: number;
  /** Acquired (1 unit) before every request, retries included: a provider counts each one. */
  limiter?: RateLimiter | undefined;
}

/** What the calls are for, in errors: "embedding service at <url> answered 503…". */
export interface ProviderCallLabel {
  kind: string;
  model: string;
}

/**
 * POST a JSON body to an OpenAI-compatible endpoint and return the text of its 2xx answer.
 * 408, 429, 5xx, timeouts and network errors are retried up to `maxRetries` times with
 * exponential backoff and jitter, or after the wait the server asked for (`retry-after-ms`, else
 * `Retry-After` in seconds or as an HTTP date); then a RetryableError, which the consumer runner
 * naks. Any other 4xx (a bad key, an unknown model, an input over the model's context) throws a
 * PermanentError at once with the server's reason.
 */
export async function postToProvider(url: string, apiKey: string | undefined, body: string, policy: ProviderCallPolicy, label: ProviderCallLabel): Promise<string> {
  const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json' };
  if (apiKey !== undefined) headers.authorization = `Bearer ${apiKey}`;
  for (let attempt = 0; ; attempt++) {
    if (policy.limiter) await policy.limiter.acquire(1);
    let res: Response;
    let text: string;
    try {
      // The deadline covers the body too: a server can stall after sending its headers.
      res = await fetch(url, { method: 'POST', headers, body, signal: AbortSignal.timeout(policy.timeoutMs) });
      text = await res.text();
    } catch (err) {
      await backoffOrGiveUp(policy, attempt, undefined, `${label.kind} service at ${url} unreachable: ${describeFetchError(err)}`);
      continue;
    }
    if (res.ok) return text;
    const detail = `${res.status} ${res.statusText}`.trim();
    const excerpt = text.slice(0, 300);
    if (res.status !== 408 && res.status !== 429 && res.status < 500) {
      throw new PermanentError(`${label.kind} request permanently refused by ${url} (model ${label.model}): ${detail}: ${excerpt}`);
    }
    await backoffOrGiveUp(policy, attempt, retryAfterMs(res.headers), `${label.kind} service at ${url} answered ${detail}: ${excerpt}`);
  }
}

/**
 * Sleeps before the next attempt, or throws RetryableError when attempts are used up or the
 * server asks for a longer wait than `maxBackoffMs`.
 */
async function backoffOrGiveUp(policy: ProviderCallPolicy, attempt: number, serverWaitMs: number | undefined, problem: string): Promise<void> {
  if (attempt >= policy.maxRetries) {
    throw new RetryableError(`${problem} (gave up after ${attempt + 1} attempt${attempt === 0 ? '' : 's'})`, serverWaitMs);
  }
  let wait: number;
  if (serverWaitMs !== undefined) {
    if (serverWaitMs > policy.maxBackoffMs) {
      throw new RetryableError(`${problem} (the server asks to wait ${Math.ceil(serverWaitMs / 1000)} s)`, serverWaitMs);
    }
    // Up to 10% more than asked, never less: replicas told the same instant spread out.
    wait = serverWaitMs * (1 + Math.random() * 0.1);
  } else {
    // Exponential with "equal jitter": between half and all of base × 2^attempt.
    const ceiling = Math.min(policy.maxBackoffMs, policy.baseBackoffMs * 2 ** attempt);
    wait = ceiling / 2 + Math.random() * (ceiling / 2);
  }
  await new Promise((resolve) => setTimeout(resolve, wait));
}

/**
 * The wait a 429/5xx asks for, in ms: OpenAI's `retry-after-ms` when present (finer), else
 * `Retry-After` as delta-seconds or an HTTP date; undefined when neither is present or readable.
 */
export function retryAfterMs(headers: Headers, now = Date.now()): number | undefined {
  const ms = headers.get('retry-after-ms');
  if (ms !== null && ms.trim() !== '') {
    const n = Number(ms);
    if (Number.isFinite(n) && n >= 0) return n;
  }
  const value = headers.get('retry-after')?.trim();
  if (!value) return undefined;
  if (/^\d+(\.\d+)?$/.test(value)) return Number(value) * 1000;
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

/** fetch's own message is only "fetch failed"; the useful part (ECONNREFUSED…) is in `cause`. */
function describeFetchError(err: unknown): string {
  if (err instanceof Error) {
    if (err.name === 'TimeoutError') return 'timed out';
    const cause = (err as { cause?: unknown }).cause;
    if (cause instanceof Error) return `${err.message}: ${(cause as { code?: string }).code ?? cause.message}`;
    return err.message;
  }
  return String(err);
}

/**
 * An OpenAI-compatible endpoint's URL: `baseUrl` (http or https, a trailing slash ignored) joined
 * with `path` (`/embeddings`, `/chat/completions`). Throws a RangeError naming `who` otherwise.
 */
export function providerEndpoint(who: string, baseUrl: string, path: string): string {
  let base: URL;
  try {
    base = new URL(baseUrl);
  } catch {
    throw new RangeError(`${who}: baseUrl is not a URL: ${baseUrl}`);
  }
  if (base.protocol !== 'http:' && base.protocol !== 'https:') throw new RangeError(`${who}: baseUrl must be http or https, got ${baseUrl}`);
  return `${baseUrl.replace(/\/+$/, '')}${path}`;
}
