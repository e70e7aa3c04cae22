import http from 'node:http';
import https from 'node:https';
import { isIP, type LookupFunction } from 'node:net';
import { AddressRefused, PermanentError, guardedLookup, isForbiddenAddress, systemResolver, type Resolver } from '@memstream/kit';
import type { Sender } from '../handlers/deliver.js';


export interface SenderOptions {
  /** MEMSTREAM_WEBHOOK_ALLOW_PRIVATE: deliver to loopback and private addresses too. */
  allowPrivate: boolean;
  timeoutMs: number;
  resolve?: Resolver;
  /** Told which address and rule refused a delivery (for the server log; the record says less). */
  onRefused?: (host: string, detail: string) => void;
}

/** The delivery record (which the tenant reads) gets a generic reason; `onRefused` hands the detail to the log. */
function refused(host: string, reason: string): PermanentError {
  return new AddressRefused('refused to deliver to', host, reason, 'the operator can set MEMSTREAM_WEBHOOK_ALLOW_PRIVATE=true to allow receivers on private networks');
}


/** Seconds or an HTTP date, as Retry-After allows; capped by the caller. */
function retryAfter(v: string | undefined): number | undefined {
  if (!v) return undefined;
  if (/^\d+$/.test(v.trim())) return Number(v.trim()) * 1000;
  const t = Date.parse(v);
  return Number.isFinite(t) ? Math.max(0, t - Date.now()) : undefined;
}

/**
 * POST over node:http(s): no redirects followed (a 3xx is a failed attempt), a private agent per
 * request (no pooled socket that skipped the check), the whole exchange bounded by `timeoutMs`,
 * and at most 4 KB of the answer kept.
 */
export function httpSender(opts: SenderOptions): Sender {
  const resolve = opts.resolve ?? systemResolver;
  const send: Sender = (req) =>
    attempt(req).catch((err: unknown) => {
      if (err instanceof AddressRefused) opts.onRefused?.(err.host, err.detail);
      throw err;
    });
  const attempt: Sender = ({ url, headers, body }) => {
    const u = new URL(url);
    const host = u.hostname.replace(/^\[|\]$/g, '');
    if (!opts.allowPrivate && isIP(host)) {
      const reason = isForbiddenAddress(host);
      if (reason) return Promise.reject(refused(host, `a ${reason}`));
    }
    const mod = u.protocol === 'https:' ? https : http;
    return new Promise((resolvePromise, reject) => {
      let refusal: PermanentError | null = null;
      const signal = AbortSignal.timeout(opts.timeoutMs);
      const req = mod.request(u, {
        method: 'POST',
        headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) },
        agent: false,
        ...(opts.allowPrivate ? {} : { lookup: guardedLookup({ resolve, check: (a) => isForbiddenAddress(a), refused, onRefused: (e) => (refusal = e) }) }),
        signal,
      });
      req.on('response', (res) => {
        const chunks: Buffer[] = [];
        let kept = 0;
        res.on('data', (c: Buffer) => {
          if (kept < 4096) {
            chunks.push(c);
            kept += c.length;
          }
        });
        res.on('end', () => {
          const retryAfterMs = retryAfter(res.headers['retry-after']);
          resolvePromise({
            status: res.statusCode ?? 0,
            body: Buffer.concat(chunks).toString('utf8').slice(0, 4096),
            ...(retryAfterMs !== undefined ? { retryAfterMs } : {}),
          });
        });
        res.on('error', reject);
      });
      req.on('error', (err: NodeJS.ErrnoException) => {
        if (refusal) return reject(refusal);
        if (signal.aborted) return reject(new Error(`no answer within ${opts.timeoutMs} ms`));
        reject(new Error(err.code ? `${err.code}: ${err.message}` : err.message));
      });
      req.end(body);
    });
  };
  return send;
}
