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
