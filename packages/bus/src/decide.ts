import { JetStreamApiError, JetStreamError } from '@nats-io/jetstream';
import type { FailureClass } from '@memstream/contracts';
import { PermanentError, RetryableError, errorMessage } from '@memstream/kit';
import { ZodError } from 'zod';

/** Exponential backoff with ±20% jitter: 0.5 s, 1 s, 2 s ... capped at 30 s. */
export function defaultBackoff(deliveryCount: number): number {
  const base = Math.min(30_000, 500 * 2 ** Math.max(0, deliveryCount - 1));
  return Math.round(base * (0.8 + Math.random() * 0.4));
}

// JetStreamNotEnabled: what @nats-io/jetstream throws when its API requests find no responder
// after its own retries — a server that is restarting, not one without JetStream.
const TRANSIENT_NAMES = new Set(['TimeoutError', 'AbortError', 'ClosedConnectionError', 'ConnectionError', 'DrainingConnectionError', 'NoRespondersError', 'RequestError', 'JetStreamNotEnabled']);
const TRANSIENT_CODES = new Set(['ECONNRESET', 'ECONNREFUSED', 'ECONNABORTED', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN', 'UND_ERR_SOCKET', 'UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);
/**
 * JetStream API error codes (nats-server's errors.json) that say "the system is not ready now",
 * not "this request is wrong": cluster incomplete (10004), no suitable peers (10005), system
 * temporarily unavailable (10008), not the leader (10009), insufficient resources (10023), peer
 * not a member yet (10040).
 */
const TRANSIENT_JS_API_CODES = new Set([10004, 10005, 10008, 10009, 10023, 10040]);
/** JetStream status codes of a pull or request: 408 request timeout, 503 no responders. */
const TRANSIENT_JS_STATUS = new Set([408, 503]);
// Errors from outside NATS (an HTTP model server, a URL fetch) say what they are only in words.
const TRANSIENT_TEXT = /timed? ?out|timeout|ECONN|EPIPE|EAI_AGAIN|socket hang up|fetch failed|unreachable|unavailable|temporar|connection (?:closed|reset|refused)/i;

/**
 * Whether an error says "a dependency is away or slow" (retry later) rather than "this input
 * breaks the code": a RetryableError, a JetStream API or status error by its code, a network or
 * timeout error by name, code or message, anywhere in its cause chain.
 */
export function isTransientError(err: unknown): boolean {
  for (let e = err, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    if (e instanceof RetryableError) return true;
    if (e instanceof JetStreamApiError) {
      if (TRANSIENT_JS_API_CODES.has(e.code)) return true;
      continue;
    }
    // JetStreamStatusError (a pull's or request's status) is not exported by the package's main
    // entry; it is the JetStreamError that carries a numeric code.
    if (e instanceof JetStreamError && typeof (e as { code?: unknown }).code === 'number') {
      if (TRANSIENT_JS_STATUS.has((e as unknown as { code: number }).code)) return true;
      continue;
    }
    const { name, code, message } = e as { name?: unknown; code?: unknown; message?: unknown };
    if (typeof name === 'string' && TRANSIENT_NAMES.has(name)) return true;
    if (typeof code === 'string' && TRANSIENT_CODES.has(code)) return true;
    if (TRANSIENT_TEXT.test(typeof message === 'string' ? message : String(e))) return true;
  }
  return false;
}

/** The kind of failure an attempt ended in: the error's class and its message without numbers (ids, sizes, times vary). */
export function failureSignature(err: unknown): string {
  const name = err instanceof Error ? err.constructor.name || err.name : typeof err;
  return `${name}: ${errorMessage(err).replace(/\d+/g, '#').slice(0, 300)}`;
}

/** What to do with a message whose handler threw. */
export type Decision =
  /** Hand it back, to come again after `delayMs`. */
  | { action: 'nak'; delayMs: number; transient: boolean }
  /** Publish `failed` (when the consumer is a stage), copy it to DEAD_LETTERS when `deadLetter`, then ack. */
  | { action: 'fail'; class: FailureClass; reason: string; deadLetter: boolean; /** Failed because retries ran out (rather than at once). */ lastAttempt: boolean };

export interface Attempt {
  error: unknown;
  /** This delivery's number, from 1. */
  deliveryCount: number;
  maxDeliver: number;
  /** The failure signatures of the earlier deliveries of this message that this process saw. */
  earlier: readonly string[];
}

/** Never wait longer than this for one redelivery, whatever a dependency asks. */
const MAX_RETRY_AFTER_MS = 10 * 60_000;

/**
 * The one place a failed attempt becomes ack, nak, fail or dead-letter. Pure (the backoff is
 * passed in), so every rule has a unit test:
 * - PermanentError → failed with its class (dead-lettered unless `permanent`: bad input is the
 *   user's to fix, poison is ours to inspect);
 * - a ZodError (the handler built an invalid event: a bug) → failed as poison, dead-lettered;
 * - the last allowed delivery → failed and dead-lettered: `poison` when every delivery seen
 *   failed with the same non-transient error (retrying cannot help), else `exhausted`;
 * - anything else → nak, after the dependency's Retry-After when it gave one
 *   (RetryableError.retryAfterMs), else after the backoff for this delivery.
 */
export function decide(a: Attempt, backoff: (deliveryCount: number) => number = defaultBackoff): Decision {
  const reason = errorMessage(a.error);
  if (a.error instanceof PermanentError) return { action: 'fail', class: a.error.failureClass, reason, deadLetter: a.error.failureClass !== 'permanent', lastAttempt: false };
  if (a.error instanceof ZodError) return { action: 'fail', class: 'poison', reason, deadLetter: true, lastAttempt: false };
  const transient = isTransientError(a.error);
  if (a.deliveryCount >= a.maxDeliver) {
    const sig = failureSignature(a.error);
    const poison = !transient && a.earlier.every((s) => s === sig);
    return poison
      ? { action: 'fail', class: 'poison', reason: `${reason} (the same error on every one of ${a.deliveryCount} attempts)`, deadLetter: true, lastAttempt: true }
      : { action: 'fail', class: 'exhausted', reason: `${reason} (after ${a.deliveryCount} attempts)`, deadLetter: true, lastAttempt: true };
  }
  const retryAfter = retryAfterOf(a.error);
  return { action: 'nak', delayMs: retryAfter !== undefined ? Math.min(MAX_RETRY_AFTER_MS, retryAfter) : backoff(a.deliveryCount), transient };
}

function retryAfterOf(err: unknown): number | undefined {
  for (let e = err, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    if (e instanceof RetryableError && typeof e.retryAfterMs === 'number' && Number.isFinite(e.retryAfterMs) && e.retryAfterMs >= 0) return e.retryAfterMs;
  }
  return undefined;
}
