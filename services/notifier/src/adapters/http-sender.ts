import http from 'node:http';
import https from 'node:https';
import dns from 'node:dns/promises';
import { isIP, type LookupFunction } from 'node:net';
import { PermanentError, isForbiddenAddress } from '@memstream/kit';
import type { Sender } from '../handlers/deliver.js';

type Resolver = (host: string, family: 0 | 4 | 6) => Promise<Array<{ address: string; family: number }>>;
const systemResolver: Resolver = (host, family) => dns.lookup(host, { all: true, family });

export interface SenderOptions {
  /** MEMSTREAM_WEBHOOK_ALLOW_PRIVATE: deliver to loopback and private addresses too. */
  allowPrivate: boolean;
  timeoutMs: number;
  resolve?: Resolver;
}

function refused(host: string, reason: string): PermanentError {
  return new PermanentError(`refused to deliver to ${host}: ${reason} (set MEMSTREAM_WEBHOOK_ALLOW_PRIVATE=true to allow receivers on private networks)`);
}

/**
 * A `lookup` that hands the socket only addresses the policy allows, so the address checked is
 * the address connected to (a DNS answer that changes in between cannot slip through).
 */
function guardedLookup(resolve: Resolver, onRefused: (e: PermanentError) => void): LookupFunction {
  return (hostname, options, callback) => {
    const family = options.family === 4 || options.family === 6 ? options.family : 0;
    resolve(hostname, family).then(
      (addresses) => {
        const allowed = [];
        let reason: string | null = null;
        for (const a of addresses) {
          const r = isForbiddenAddress(a.address);
          if (r) reason ??= `${hostname} resolves to ${a.address}, a ${r}`;
          else allowed.push(a);
        }
        const first = allowed[0];
        if (!first) {
          const e = reason ? refused(hostname, reason) : new PermanentError(`could not resolve ${hostname}`);
          onRefused(e);
          callback(e, []);
        } else if (options.all) callback(null, allowed);
        else callback(null, first.address, first.family);
      },
      (err: NodeJS.ErrnoException) => callback(err, []),
    );
  };
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
  return ({ url, headers, body }) => {
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
        ...(opts.allowPrivate ? {} : { lookup: guardedLookup(resolve, (e) => (refusal = e)) }),
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
}
