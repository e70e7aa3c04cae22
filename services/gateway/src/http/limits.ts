import type { RequestHandler } from 'express';

/** The default cap on one JSON answer (MEMSTREAM_MAX_ANSWER_BYTES; docs/limits.md). */
export const DEFAULT_MAX_ANSWER_BYTES = 32 * 1024 * 1024;

/**
 * Caps every JSON answer: one past `maxBytes` (or too big for JSON.stringify at all, a RangeError
 * that used to be a 500) is replaced by a 400 saying how to ask for less. One tenant's large
 * documents then cost a refused request, not every tenant's memory and latency.
 */
export function answerSizeCap(maxBytes: number): RequestHandler {
  return (req, res, next) => {
    res.json = (body: unknown) => {
      let text: string | undefined;
      try {
        text = JSON.stringify(body);
      } catch (err) {
        if (!(err instanceof RangeError)) throw err;
      }
      const bytes = text === undefined ? Infinity : Buffer.byteLength(text);
      if (bytes > maxBytes) {
        const size = bytes === Infinity ? 'over 512 MB' : `${(bytes / 1048576).toFixed(1)} MB`;
        text = JSON.stringify({
          error: 'Answer too large',
          details: `the answer to ${req.method} ${req.path} would be ${size}, over the ${(maxBytes / 1048576).toFixed(1)} MB cap: ask for fewer results (limit, page) or leave the content out (includeContent, includeFullDocs)`,
        });
        res.status(400);
      }
      if (!res.get('content-type')) res.type('application/json');
      return res.send(text);
    };
    next();
  };
}

/**
 * An answer of 400 or more sent before the request's body was read (a 401 before auth let it
 * through, a 413, a 429): `Connection: close`, the socket ended once the answer is out, and
 * destroyed `lingerMs` later if the client is still sending. A body that never finishes cannot
 * hold a socket (it held one about 180 s after an immediate 401). The linger lets the client read
 * the answer: closing outright with its body unread would reset the connection under it.
 */
export function closeEarlyRefusals(lingerMs = 1_000): RequestHandler {
  return (req, res, next) => {
    const early = () => !req.complete && res.statusCode >= 400;
    const writeHead = res.writeHead;
    res.writeHead = function (this: typeof res, ...args: unknown[]) {
      if (early() && !res.headersSent) res.setHeader('connection', 'close');
      return (writeHead as (...a: unknown[]) => typeof res).apply(this, args);
    } as typeof res.writeHead;
    res.once('finish', () => {
      if (!early()) return;
      const socket = req.socket;
      socket.end();
      setTimeout(() => socket.destroy(), lingerMs).unref();
    });
    next();
  };
}
