import { ServerResponse } from 'node:http';
import type { Express, Response } from 'express';

/** The default cap on one JSON answer (MEMSTREAM_MAX_ANSWER_BYTES; docs/limits.md). */
export const DEFAULT_MAX_ANSWER_BYTES = 32 * 1024 * 1024;

/**
 * Caps every JSON answer: one past `maxBytes` (or too big for JSON.stringify at all, a RangeError
 * that used to be a 500) is replaced by a 400 saying how to ask for less. One tenant's large
 * documents then cost a refused request, not every tenant's memory and latency.
 *
 * Installed on the app's response prototype, not as a middleware: nothing per request until an
 * answer is sent.
 */
export function answerSizeCap(app: Express, maxBytes: number): void {
  app.response.json = function json(this: Response, body: unknown) {
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
        details: `the answer to ${this.req.method} ${this.req.path} would be ${size}, over the ${(maxBytes / 1048576).toFixed(1)} MB cap: ask for fewer results (limit, page) or leave the content out (includeContent, includeFullDocs)`,
      });
      this.status(400);
    }
    if (!this.get('content-type')) this.setHeader('content-type', 'application/json; charset=utf-8');
    return this.send(text);
  };
}

/**
 * An answer of 400 or more sent before the request's body was read (a 401 before auth let it
 * through, a 413, a 429): `Connection: close`, the socket ended once the answer is out, and
 * destroyed `lingerMs` later if the client is still sending. A body that never finishes cannot
 * hold a socket (it held one about 180 s after an immediate 401). The linger lets the client read
 * the answer: closing outright with its body unread would reset the connection under it.
 *
 * Installed on the app's response prototype (its writeHead), not as a middleware: an answer that
 * is not such a refusal costs one comparison.
 */
export function closeEarlyRefusals(app: Express, lingerMs = 1_000): void {
  const writeHead = ServerResponse.prototype.writeHead;
  app.response.writeHead = function (this: Response, ...args: unknown[]) {
    const req = this.req;
    const status = typeof args[0] === 'number' ? args[0] : this.statusCode;
    if (status >= 400 && !req.complete) {
      if (!this.headersSent) this.setHeader('connection', 'close');
      this.once('finish', () => {
        // The body may have been read to its end meanwhile: then the connection can stay.
        if (req.complete) return;
        const socket = req.socket;
        socket.end();
        setTimeout(() => socket.destroy(), lingerMs).unref();
      });
    }
    return (writeHead as (...a: unknown[]) => Response).apply(this, args);
  } as Response['writeHead'];
}
