import express from 'express';
import { describe, expect, it } from 'vitest';
import { createLogger } from '@memstream/kit';
import { BrokerAwayError, ConnectionLostError } from '@memstream/bus';
import { errorMiddleware } from './errors.js';

/** The status and body the middleware gives an error thrown by a route. */
async function answer(err: unknown): Promise<{ status: number; body: { error: string }; retryAfter: string | null }> {
  const app = express();
  app.get('/', () => {
    throw err;
  });
  app.use(errorMiddleware(createLogger('test', { level: 'silent' })));
  const server = app.listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  try {
    const res = await fetch(`http://127.0.0.1:${(server.address() as { port: number }).port}/`);
    return { status: res.status, body: (await res.json()) as { error: string }, retryAfter: res.headers.get('retry-after') };
  } finally {
    server.close();
  }
}

function named(name: string, message: string, extra: Record<string, unknown> = {}): Error {
  return Object.assign(new Error(message, extra.cause ? { cause: extra.cause } : undefined), { name }, extra);
}

describe('errorMiddleware: the broker away is a 503 with Retry-After, never a 500', () => {
  it.each([
    ['a restarting nats-server (no responders after the client retried)', named('JetStreamNotEnabled', 'jetstream is not enabled', { cause: named('RequestError', 'no responders: $JS.API.STREAM.MSG.GET.DOCS') })],
    ['JetStream not ready yet', named('JetStreamApiError', 'JetStream system temporarily unavailable')],
    ['a request timeout', named('TimeoutError', 'timeout')],
    ['a closed connection', named('ClosedConnectionError', 'closed connection')],
    ['a dropped socket', Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' })],
    ['the client reconnecting (nothing was sent)', new BrokerAwayError()],
  ])('%s', async (_what, err) => {
    const r = await answer(err);
    expect(r.status).toBe(503);
    expect(r.retryAfter).toBe('1');
    expect(r.body.error).toBe('Service temporarily unavailable');
  });

  it('a request in flight when the connection dropped: 503 with Retry-After, saying it may have been stored', async () => {
    const r = await answer(new ConnectionLostError());
    expect(r.status).toBe(503);
    expect(r.retryAfter).toBe('1');
    expect(r.body).toMatchObject({ error: 'Service temporarily unavailable', details: expect.stringMatching(/may or may not have been stored/) });
  });

  it('a plain bug is still a 500, with a body', async () => {
    const r = await answer(new TypeError("Cannot read properties of undefined (reading 'x')"));
    expect(r.status).toBe(500);
    expect(r.body).toMatchObject({ error: 'Internal server error' });
  });
});
