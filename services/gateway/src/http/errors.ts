import type { ErrorRequestHandler, RequestHandler } from 'express';
import { ZodError } from 'zod';
import { ConnectionLostError, isTransientError } from '@memstream/bus';
import { AppError, type Logger } from '@memstream/kit';
import { requestLog } from './request-log.js';

/** A readable one-line account of what is wrong with a request body, naming each field. */
export function describeZodError(err: ZodError): string {
  return err.issues
    .slice(0, 10)
    .map((i) => {
      const at = i.path.length ? i.path.join('.') : 'body';
      return `${at}: ${i.message}`;
    })
    .join('; ');
}

/** The one place errors become HTTP: every error body is { error, details? }. Bad input is never a 5xx. */
export function errorMiddleware(log: Logger): ErrorRequestHandler {
  return (err, req, res, _next) => {
    if (err instanceof ZodError) {
      res.status(400).json({ error: 'Invalid request', details: describeZodError(err) });
      return;
    }
    if (err instanceof ConnectionLostError) {
      // Sent, and then the broker went away before answering: the one case where it may be stored.
      requestLog(log, res).warn({ err: err.message, method: req.method, url: req.originalUrl }, 'broker connection lost during the request');
      res.setHeader('retry-after', '1');
      res.status(503).json({
        error: 'Service temporarily unavailable',
        details: 'the connection to the event log was lost while this request was in flight: it may or may not have been stored; retry shortly (with the same customId a retry cannot make a second document)',
      });
      return;
    }
    if (err instanceof AppError) {
      res.status(err.httpStatus).json({ error: err.message, ...(err.details ? { details: err.details } : {}) });
      return;
    }
    // A body nested deeper than a parser's recursion allows: bad input, not a server fault.
    if (err instanceof RangeError && /call stack/i.test(err.message)) {
      res.status(400).json({ error: 'Invalid request', details: 'body: nested too deeply' });
      return;
    }
    // body-parser's errors carry a status and a type.
    const e = err as { status?: number; type?: string; message?: string };
    if (e.type === 'entity.parse.failed') {
      res.status(400).json({ error: 'Invalid JSON body', details: e.message ?? 'the body is not valid JSON' });
      return;
    }
    if (e.type === 'entity.too.large') {
      res.status(413).json({ error: 'Request body too large', details: e.message ?? '' });
      return;
    }
    if (typeof e.status === 'number' && e.status >= 400 && e.status < 500) {
      // body-parser's other refusals: a content-encoding it cannot decode, an unsupported charset…
      res.status(e.status).json({ error: 'Invalid request body', details: `body: ${e.message ?? e.type ?? 'could not be read'}` });
      return;
    }
    // The broker away (restarting, or a network blip), or a dependency timing out: nothing was
    // accepted; retrying soon helps. The same judgement the consumer runner makes (cause chain
    // included): a restarting nats-server shows up as "jetstream is not enabled" (no responders
    // after the client's own retries), which the older list of names here missed — a 500 in the
    // broker-restart fault test.
    if (isTransientError(err) || /connection (disconnected|closed)/i.test((err as Error)?.message ?? '')) {
      requestLog(log, res).warn({ err: (err as Error).message, method: req.method, url: req.originalUrl }, 'broker unavailable');
      res.setHeader('retry-after', '1');
      res.status(503).json({ error: 'Service temporarily unavailable', details: 'the event log is not reachable right now; nothing was stored; retry shortly' });
      return;
    }
    requestLog(log, res).error({ err, method: req.method, url: req.originalUrl }, 'request failed');
    res.status(500).json({ error: 'Internal server error', details: 'the failure was logged; retrying may help' });
  };
}

export const notFound: RequestHandler = (req, res) => {
  res.status(404).json({ error: 'Not found', details: `no route ${req.method} ${req.path}` });
};
