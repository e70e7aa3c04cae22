import { createWriteStream } from 'node:fs';
import { rm } from 'node:fs/promises';
import http, { type IncomingMessage } from 'node:http';
import https from 'node:https';
import { isIP } from 'node:net';
import path from 'node:path';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import zlib from 'node:zlib';
import { AddressRefused, AppError, PermanentError, RetryableError, errorMessage, guardedLookup, systemResolver, type Resolver } from '@memstream/kit';
import type { ExtractContext, SourceFile } from '../kinds.js';
import { checkAddress, type FetchPolicy } from './ssrf.js';

export type { Resolver };

export type FetchedFile = SourceFile & { finalUrl: string };

const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);

const UNTRUSTED_CERT = new Set([
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'CERT_REVOKED',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'ERR_TLS_CERT_ALTNAME_INVALID',
]);

const hostOf = (url: URL): string => url.hostname.replace(/^\[|\]$/g, '');
/** A URL for messages: without its query, which may carry tokens, and capped in length. */
const shown = (url: URL): string => `${url.origin}${url.pathname}`.slice(0, 300);
const mb = (bytes: number): string => `${Math.round((bytes / 1048576) * 10) / 10} MB`;

/** The tenant reads a generic reason in the document's error; `classify` logs which address and rule. */
function refused(host: string, reason: string): PermanentError {
  return new AddressRefused('refused to fetch', host, reason, 'SSRF protection');
}

/** Only absolute http(s) URLs without credentials; the fragment never reaches the server. */
function parseTarget(raw: string): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new PermanentError(`not a valid URL: ${raw.slice(0, 300)}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new PermanentError(`only http and https URLs are fetched, not ${url.protocol.replace(/:$/, '')}`);
  // Credentials would be sent to whatever host the URL (or a redirect) names, and logged with it.
  if (url.username || url.password) throw new PermanentError('URLs with credentials (user:password@host) are not fetched');
  if (!url.hostname) throw new PermanentError(`URL without a host: ${raw.slice(0, 300)}`);
  url.hash = '';
  return url;
}

/** State of one request that the error mapping needs after the fact. */
interface Hop {
  url: URL;
  /** The connection went silent for longer than the policy allows. */
  stalled: boolean;
  /** The policy refused every address the host resolved to. */
  refusal: PermanentError | null;
}

/** One GET, resolved when the response headers arrive. */
function request(hop: Hop, policy: FetchPolicy, resolve: Resolver, signal: AbortSignal): Promise<IncomingMessage> {
  const host = hostOf(hop.url);
  // A literal address never goes through `lookup`: check it here, before any connection.
  if (isIP(host)) {
    const reason = checkAddress(host, host, policy);
    if (reason) return Promise.reject(refused(host, reason));
  }
  const mod = hop.url.protocol === 'https:' ? https : http;
  return new Promise((resolvePromise, reject) => {
    const req = mod.request(hop.url, {
      method: 'GET',
      headers: {
        'user-agent': policy.userAgent,
        accept: 'text/html,application/xhtml+xml,application/pdf;q=0.9,text/*;q=0.8,*/*;q=0.5',
        'accept-encoding': 'gzip, deflate, br',
      },
      // A private agent per request: no pooled socket opened by other code (and so never
      // checked) is reused, and no idle socket outlives the fetch.
      agent: false,
      lookup: guardedLookup({ resolve, check: (a, h) => checkAddress(a, h, policy), refused, onRefused: (e) => (hop.refusal = e) }),
      // Socket inactivity, from before the connection is made until the body ends.
      timeout: policy.timeoutMs,
      signal,
    });
    // Inactivity alone misses a server that drips its headers a byte at a time.
    const headersTimer = setTimeout(() => {
      hop.stalled = true;
      req.destroy();
    }, policy.timeoutMs);
    req.on('timeout', () => {
      hop.stalled = true;
      req.destroy();
    });
    req.on('response', (res) => {
      clearTimeout(headersTimer);
      resolvePromise(res);
    });
    req.on('error', (err) => {
      clearTimeout(headersTimer);
      reject(hop.refusal ?? err);
    });
    req.end();
  });
}

function statusError(res: IncomingMessage, url: URL): AppError {
  const status = res.statusCode ?? 0;
  const what = `fetching ${shown(url)} failed: HTTP ${status}${res.statusMessage ? ` ${res.statusMessage}` : ''}`;
  // Rate limiting and request timeouts pass; other client errors (404, 403, 410…) will not.
  if (status === 408 || status === 429) {
    const after = Number(res.headers['retry-after']);
    return new RetryableError(what, Number.isFinite(after) && after >= 0 ? after * 1000 : undefined);
  }
  if (status >= 500) return new RetryableError(what);
  return new PermanentError(what);
}

/** Decoders for a Content-Encoding list, in the order to apply them (the reverse of how they were applied). */
function decoders(header: string | undefined): Transform[] {
  const codings = (header ?? '')
    .split(',')
    .map((c) => c.trim().toLowerCase())
    .filter((c) => c !== '' && c !== 'identity');
  return codings.reverse().map((c) => {
    switch (c) {
      case 'gzip':
      case 'x-gzip':
        return zlib.createGunzip();
      case 'deflate':
        return zlib.createInflate();
      case 'br':
        return zlib.createBrotliDecompress();
      default:
        throw new PermanentError(`unsupported content encoding ${JSON.stringify(c)}`);
    }
  });
}

function safeName(name: string): string | null {
  // Only ever a label (the file on disk has a fixed name), but keep it a plain base name.
  const base = name.split(/[/\\]/).pop()?.replace(/[\u0000-\u001f]/g, '').trim() ?? '';
  return base === '' || base === '.' || base === '..' ? null : base.slice(0, 255);
}

function decode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

/** The file name from Content-Disposition (filename* first), else the last segment of the URL path. */
export function filenameOf(contentDisposition: string | undefined, url: URL): string | null {
  if (contentDisposition) {
    const star = /filename\*\s*=\s*[\w!#$%&+^`{}~-]*'[^']*'([^;\s]+)/i.exec(contentDisposition)?.[1];
    if (star) return safeName(decode(star));
    const quoted = /filename\s*=\s*"((?:[^"\\]|\\.)*)"/i.exec(contentDisposition)?.[1];
    if (quoted !== undefined) return safeName(quoted.replace(/\\(.)/g, '$1'));
    const bare = /filename\s*=\s*([^;\s]+)/i.exec(contentDisposition)?.[1];
    if (bare) return safeName(bare);
  }
  const last = url.pathname.split('/').filter((s) => s !== '').pop();
  return last ? safeName(decode(last)) : null;
}

/** Stream the body to a file in the work directory, decompressed and counted against the cap. */
async function save(res: IncomingMessage, url: URL, policy: FetchPolicy, ctx: ExtractContext, signal: AbortSignal): Promise<FetchedFile> {
  const tooLarge = () => new PermanentError(`${shown(url)} is larger than ${mb(policy.maxBytes)}`);
  let chain: Transform[];
  try {
    chain = decoders(res.headers['content-encoding']);
  } catch (err) {
    res.destroy();
    throw err;
  }
  const declared = Number(res.headers['content-length']);
  if (chain.length === 0 && Number.isFinite(declared) && declared > policy.maxBytes) {
    res.destroy();
    throw tooLarge();
  }
  let size = 0;
  // Counted after decompression: a small gzip body can expand a thousandfold.
  const counter = new Transform({
    transform(chunk: Buffer, _enc, done) {
      size += chunk.length;
      if (size > policy.maxBytes) done(tooLarge());
      else done(null, chunk);
    },
  });
  const file = path.join(ctx.workDir, 'fetched');
  try {
    await pipeline([res, ...chain, counter, createWriteStream(file)], { signal });
  } catch (err) {
    await rm(file, { force: true });
    throw err;
  }
  return {
    path: file,
    size,
    filename: filenameOf(res.headers['content-disposition'], url),
    // Parameters dropped: sniffing matches the bare type, and html.ts reads the charset from the page.
    mimeType: res.headers['content-type']?.split(';')[0]?.trim().toLowerCase() || null,
    fileType: null,
    finalUrl: url.href,
  };
}

/** Map what a failed fetch threw to permanent (the URL will never work) or retryable (it may later). */
function classify(err: unknown, hop: Hop, policy: FetchPolicy, ctx: ExtractContext, total: AbortSignal): unknown {
  if (err instanceof AddressRefused) ctx.log.warn({ host: err.host, detail: err.detail }, 'URL refused by the address policy (SSRF protection)');
  if (err instanceof AppError) return err;
  // The caller cancelled: its reason, not ours.
  if (ctx.signal.aborted) return err;
  const where = shown(hop.url);
  if (total.aborted) return new RetryableError(`fetching ${where} timed out after ${policy.totalTimeoutMs} ms`);
  if (hop.stalled) return new RetryableError(`fetching ${where} timed out: no response for ${policy.timeoutMs} ms`);
  const code = (err as NodeJS.ErrnoException | undefined)?.code ?? '';
  if (code === 'ENOTFOUND' || code === 'ENODATA') return new PermanentError(`could not resolve ${hostOf(hop.url)}`);
  if (UNTRUSTED_CERT.has(code) || code.startsWith('ERR_TLS_') || code.startsWith('ERR_SSL_'))
    return new PermanentError(`fetching ${where} failed: the TLS certificate is not trusted (${code})`);
  if (code.startsWith('HPE_')) return new PermanentError(`fetching ${where} failed: malformed HTTP response (${code})`);
  if (code.startsWith('Z_') || code.startsWith('ERR__')) return new PermanentError(`fetching ${where} failed: the compressed body is corrupt (${errorMessage(err)})`);
  // Refused or reset connections, DNS hiccups (EAI_AGAIN), unreachable networks: a site may be down for a while.
  return new RetryableError(`fetching ${where} failed: ${errorMessage(err)}`);
}

/**
 * Fetch a user-submitted URL into a file in the extraction's work directory, SSRF-safe:
 * http(s) only, every address the connection would use checked against the policy (literal
 * addresses directly, names as they resolve), redirects followed by hand and each target
 * checked again, the body capped after decompression, and the whole fetch under a deadline.
 */
export function createUrlFetcher(policy: FetchPolicy, resolve: Resolver = systemResolver): (url: string, ctx: ExtractContext) => Promise<FetchedFile> {
  return async (raw, ctx) => {
    const total = AbortSignal.timeout(policy.totalTimeoutMs);
    const signal = AbortSignal.any([ctx.signal, total]);
    let hop: Hop = { url: parseTarget(raw.trim()), stalled: false, refusal: null };
    try {
      for (let redirects = 0; ; redirects++) {
        const res = await request(hop, policy, resolve, signal);
        const status = res.statusCode ?? 0;
        if (REDIRECT_STATUSES.has(status)) {
          res.destroy();
          const location = res.headers.location;
          if (!location) throw new PermanentError(`fetching ${shown(hop.url)} failed: HTTP ${status} without a Location`);
          if (redirects >= policy.maxRedirects) throw new PermanentError(`fetching ${raw.slice(0, 300)} failed: more than ${policy.maxRedirects} redirects`);
          let next: URL;
          try {
            next = new URL(location, hop.url);
          } catch {
            throw new PermanentError(`fetching ${shown(hop.url)} failed: invalid redirect to ${location.slice(0, 300)}`);
          }
          ctx.log.debug({ from: shown(hop.url), to: shown(next), status }, 'following redirect');
          hop = { url: parseTarget(next.href), stalled: false, refusal: null };
          continue;
        }
        if (status < 200 || status >= 300) {
          res.destroy();
          throw statusError(res, hop.url);
        }
        return await save(res, hop.url, policy, ctx, signal);
      }
    } catch (err) {
      throw classify(err, hop, policy, ctx, total);
    }
  };
}
