import { describe, expect, it } from 'vitest';
import { JetStreamApiError } from '@nats-io/jetstream';
import { PermanentError, RetryableError } from '@memstream/kit';
import { z } from 'zod';
import { decide, failureSignature, isTransientError } from './decide.js';

const backoff = (n: number) => n * 100;
const attempt = (error: unknown, deliveryCount = 1, earlier: string[] = []) => decide({ error, deliveryCount, maxDeliver: 6, earlier }, backoff);
const apiError = (errCode: number, description = 'x') => new JetStreamApiError({ code: 503, err_code: errCode, description });

describe('decide: what a failed attempt becomes', () => {
  it('bad input fails at once, acked without a dead letter; poison fails at once and is dead-lettered', () => {
    expect(attempt(new PermanentError('unsupported file'))).toEqual({ action: 'fail', class: 'permanent', reason: 'unsupported file', deadLetter: false, lastAttempt: false });
    expect(attempt(new PermanentError('parser bug', 'poison'))).toMatchObject({ action: 'fail', class: 'poison', deadLetter: true });
  });

  it('an invalid event built by the handler (a ZodError) is poison', () => {
    const err = z.object({ a: z.string() }).safeParse({ a: 1 }).error;
    expect(attempt(err)).toMatchObject({ action: 'fail', class: 'poison', deadLetter: true, lastAttempt: false });
  });

  it('any other error is retried after the backoff of its delivery', () => {
    expect(attempt(new TypeError('boom'), 3)).toEqual({ action: 'nak', delayMs: 300, transient: false });
    expect(attempt(new Error('connect ECONNREFUSED 127.0.0.1:9'), 2)).toEqual({ action: 'nak', delayMs: 200, transient: true });
  });

  it("honours a dependency's Retry-After (RetryableError.retryAfterMs), bounded", () => {
    expect(attempt(new RetryableError('rate limited', 7_000), 1)).toEqual({ action: 'nak', delayMs: 7_000, transient: true });
    expect(attempt(new Error('wrapped', { cause: new RetryableError('rate limited', 250) }), 4)).toMatchObject({ action: 'nak', delayMs: 250 });
    expect(attempt(new RetryableError('rate limited', 3_600_000))).toMatchObject({ delayMs: 600_000 });
    expect(attempt(new RetryableError('down'), 2)).toMatchObject({ delayMs: 200 });
  });

  it('on the last delivery: poison when every attempt seen failed the same non-transient way, else exhausted', () => {
    const err = new TypeError('cannot read x of undefined at 12');
    const same = [failureSignature(new TypeError('cannot read x of undefined at 7'))];
    expect(attempt(err, 6, [same[0]!, same[0]!])).toMatchObject({ action: 'fail', class: 'poison', deadLetter: true, lastAttempt: true });
    expect(attempt(err, 6, [failureSignature(new Error('other'))])).toMatchObject({ action: 'fail', class: 'exhausted', reason: 'cannot read x of undefined at 12 (after 6 attempts)' });
    expect(attempt(new RetryableError('down'), 6, [failureSignature(new RetryableError('down'))])).toMatchObject({ class: 'exhausted', lastAttempt: true });
  });
});

describe('isTransientError', () => {
  it('knows JetStream API errors by their code, not their words', () => {
    expect(isTransientError(apiError(10008, 'JetStream system temporarily unavailable'))).toBe(true);
    expect(isTransientError(apiError(10009))).toBe(true);
    // Wrong last sequence is a conflict, stream not found a misconfiguration: whatever the text says.
    expect(isTransientError(apiError(10071, 'wrong last sequence: temporarily'))).toBe(false);
    expect(isTransientError(apiError(10059, 'stream not found (timeout)'))).toBe(false);
  });

  it('follows the cause chain, and knows network errors by name and code', () => {
    expect(isTransientError(new Error('embed failed', { cause: Object.assign(new Error('read'), { code: 'ECONNRESET' }) }))).toBe(true);
    expect(isTransientError(Object.assign(new Error('no responders'), { name: 'NoRespondersError' }))).toBe(true);
    expect(isTransientError(new TypeError('x is not a function'))).toBe(false);
  });
});
