import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import zlib from 'node:zlib';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { PermanentError, RetryableError, createLogger, type AddressRefused } from '@memstream/kit';
import { DEFAULT_LIMITS, type ExtractContext } from '../kinds.js';
import { htmlExtractor } from './html.js';
import { DEFAULT_FETCH_POLICY, checkAddress, isAllowedHost, isForbiddenAddress, parseFetchAllow, type FetchPolicy } from './ssrf.js';
import { createUrlFetcher, filenameOf, type Resolver } from './url.js';

const PAGE = `<!doctype html><html><head><title>Fetched article</title></head><body>
<nav><a href="/">Home</a> <a href="/menu">Navigation menu</a></nav>
<article><h1>Fetched article</h1>
${'<p>Loopback servers make the fetcher testable without the internet, and every request stays bounded. </p>'.repeat(6)}
<h2>Details</h2><ul><li>first point</li><li>second point</li></ul></article>
<footer>Footer small print</footer></body></html>`;

const MB = 1024 * 1024;
const CHUNK = Buffer.alloc(64 * 1024, 'a');

/** `total` bytes in 64 KB chunks of one shared buffer: a big body without holding it in memory. */
function* chunks(total: number): Generator<Buffer> {
  for (let sent = 0; sent < total; sent += CHUNK.length) yield total - sent >= CHUNK.length ? CHUNK : CHUNK.subarray(0, total - sent);
}

/** Stream into the response; a client that hangs up early (as the size cap makes it) is expected. */
function stream(res: ServerResponse, total: number, encoder?: zlib.Gzip): void {
  const steps = encoder ? [Readable.from(chunks(total)), encoder, res] : [Readable.from(chunks(total)), res];
  pipeline(steps).catch(() => undefined);
}

let server: Server;
let base: string;
let port: number;
let connections = 0;
const requests: string[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', base);
    requests.push(url.pathname);
    const redirect = /^\/r\/(\d+)$/.exec(url.pathname);
    if (redirect) {
      const n = Number(redirect[1]);
      if (n === 0) return void res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(PAGE);
      // Alternate relative and absolute Locations.
      const next = n % 2 ? `/r/${n - 1}` : `${base}/r/${n - 1}`;
      return void res.writeHead(302, { location: next }).end();
    }
    switch (url.pathname) {
      case '/':
        return void res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(PAGE);
      case '/to-metadata':
        return void res.writeHead(302, { location: 'http://169.254.169.254/latest/meta-data/iam/security-credentials/' }).end();
      case '/to-file':
        return void res.writeHead(301, { location: 'file:///etc/passwd' }).end();
      case '/big':
        res.writeHead(200, { 'content-type': 'application/octet-stream' });
        return stream(res, 12 * MB);
      case '/bomb':
        // 20 MB of zeros that gzip to a few kilobytes: the cap must count what comes out of gunzip.
        res.writeHead(200, { 'content-type': 'text/plain', 'content-encoding': 'gzip' });
        return stream(res, 20 * MB, zlib.createGzip());
      case '/declared-big':
        res.writeHead(200, { 'content-type': 'text/plain', 'content-length': String(11 * MB) });
        return void res.end();
      case '/gzip':
        return void res.writeHead(200, { 'content-type': 'text/html', 'content-encoding': 'gzip' }).end(zlib.gzipSync(PAGE));
      case '/br':
        return void res.writeHead(200, { 'content-type': 'text/html', 'content-encoding': 'br' }).end(zlib.brotliCompressSync(PAGE));
      case '/hang':
        return; // never answers
      case '/drip': {
        // Headers at once, then a byte every 100 ms: never idle long enough for the per-request timeout.
        res.writeHead(200, { 'content-type': 'text/plain' });
        const timer = setInterval(() => res.write('.'), 100);
        res.on('close', () => clearInterval(timer));
        return;
      }
      case '/files/report.pdf':
        return void res.writeHead(200, { 'content-type': 'application/pdf' }).end('%PDF-1.4\n%\u00e2\u00e3\n1 0 obj <<>> endobj\ntrailer <<>>\n%%EOF\n');
      case '/download':
        return void res
          .writeHead(200, { 'content-type': 'text/plain; charset=utf-8', 'content-disposition': `attachment; filename="fallback.txt"; filename*=UTF-8''na%C3%AFve%20notes.txt` })
          .end('naive notes');
      case '/missing':
        return void res.writeHead(404).end('not here');
      case '/down':
        return void res.writeHead(503).end('try later');
      default:
        return void res.writeHead(500).end();
    }
  });
  server.on('connection', () => connections++);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
  base = `http://127.0.0.1:${port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

let workDir: string;
beforeEach(async () => {
  workDir = await mkdtemp(path.join(tmpdir(), 'memstream-fetch-'));
  connections = 0;
  requests.length = 0;
});
afterEach(async () => {
  await rm(workDir, { recursive: true, force: true });
});

const log = createLogger('test', { level: 'silent' });
const ctx = (): ExtractContext => ({ limits: DEFAULT_LIMITS, log, workDir, signal: new AbortController().signal });
const policy = (over: Partial<FetchPolicy> = {}): FetchPolicy => ({ ...DEFAULT_FETCH_POLICY, timeoutMs: 3000, totalTimeoutMs: 8000, ...over });
const loopback = (over: Partial<FetchPolicy> = {}): FetchPolicy => policy({ allow: parseFetchAllow('127.0.0.1/32'), ...over });

async function failure(p: Promise<unknown>): Promise<Error> {
  try {
    await p;
  } catch (err) {
    return err as Error;
  }
  throw new Error('expected the fetch to fail');
}

describe('URL fetching without an allow list', () => {
  const fetchUrl = createUrlFetcher(policy());

  it('refuses a loopback address without connecting', async () => {
    const err = await failure(fetchUrl(`${base}/`, ctx()));
    expect(err).toBeInstanceOf(PermanentError);
    expect(err.message).toBe('refused to fetch 127.0.0.1: it is a private or reserved address (SSRF protection)');
    expect((err as AddressRefused).detail).toMatch(/^loopback/);
    expect(connections).toBe(0);
  });

  it('refuses the cloud metadata address at once, without a connection attempt', async () => {
    const started = performance.now();
    const err = await failure(fetchUrl('http://169.254.169.254/latest/meta-data', ctx()));
    expect(performance.now() - started).toBeLessThan(1000);
    expect(err).toBeInstanceOf(PermanentError);
    expect(err.message).toMatch(/169\.254\.169\.254: it is a private or reserved address.*SSRF/);
    expect((err as AddressRefused).detail).toMatch(/link-local/);
  });

  it('refuses IPv6 loopback, and IPv4 loopback written as an IPv4-mapped or numeric host', async () => {
    for (const url of [`http://[::1]:${port}/`, `http://[::ffff:127.0.0.1]:${port}/`, `http://2130706433:${port}/`, `http://0x7f.1:${port}/`]) {
      const err = await failure(fetchUrl(url, ctx()));
      expect(err, url).toBeInstanceOf(PermanentError);
      expect(err.message, url).toMatch(/SSRF protection/);
    }
    expect(connections).toBe(0);
  });

  it('refuses a host name that resolves to loopback', async () => {
    const err = await failure(fetchUrl(`http://localhost:${port}/`, ctx()));
    expect(err).toBeInstanceOf(PermanentError);
    // The tenant is told only that it is refused; which address the name has goes to the log.
    expect(err.message).toBe('refused to fetch localhost: it resolves to a private or reserved address (SSRF protection)');
    expect((err as AddressRefused).detail).toMatch(/^localhost resolves to (127\.0\.0\.1|::1), a loopback/);
    expect(connections).toBe(0);
  });

  it('checks what a name resolves to when connecting (no second, unchecked resolution)', async () => {
    const asked: string[] = [];
    const rebinding: Resolver = async (host) => {
      asked.push(host);
      return [{ address: '127.0.0.1', family: 4 }];
    };
    const err = await failure(createUrlFetcher(policy(), rebinding)(`http://rebind.example:${port}/`, ctx()));
    expect(err).toBeInstanceOf(PermanentError);
    expect(err.message).not.toContain('127.0.0.1');
    expect((err as AddressRefused).detail).toMatch(/rebind\.example resolves to 127\.0\.0\.1/);
    expect(asked).toEqual(['rebind.example']);
    expect(connections).toBe(0);
  });

  it('refuses other schemes and URLs with credentials', async () => {
    for (const [url, msg] of [
      ['file:///etc/passwd', /only http and https/],
      ['ftp://example.com/x', /only http and https/],
      ['gopher://127.0.0.1:6379/_INFO', /only http and https/],
      ['http://user:secret@example.com/', /credentials/],
      ['not a url', /not a valid URL/],
    ] as const) {
      const err = await failure(fetchUrl(url, ctx()));
      expect(err, url).toBeInstanceOf(PermanentError);
      expect(err.message, url).toMatch(msg);
    }
  });
});

describe('URL fetching with 127.0.0.1/32 allowed', () => {
  const fetchUrl = createUrlFetcher(loopback());

  it('fetches a page that the HTML extractor turns into Markdown', async () => {
    const file = await fetchUrl(`${base}/`, ctx());
    expect(file).toMatchObject({ mimeType: 'text/html', fileType: null, filename: null, finalUrl: `${base}/`, path: path.join(workDir, 'fetched') });
    expect(file.size).toBe(Buffer.byteLength(PAGE));
    const out = await htmlExtractor.extract(file, 'html', ctx());
    expect(out.title).toBe('Fetched article');
    expect(out.text).toMatch(/^## Details$/m);
    expect(out.text).toMatch(/^- second point$/m);
    expect(out.text).not.toContain('Navigation menu');
    expect(out.text).not.toContain('Footer small print');
  });

  it('follows 5 redirects, relative and absolute, and refuses a 6th', async () => {
    const file = await fetchUrl(`${base}/r/5`, ctx());
    expect(file.finalUrl).toBe(`${base}/r/0`);
    expect(requests).toEqual(['/r/5', '/r/4', '/r/3', '/r/2', '/r/1', '/r/0']);
    const err = await failure(fetchUrl(`${base}/r/6`, ctx()));
    expect(err).toBeInstanceOf(PermanentError);
    expect(err.message).toMatch(/more than 5 redirects/);
  });

  it('checks every redirect target again: metadata and file: are refused at the redirect', async () => {
    const err = await failure(fetchUrl(`${base}/to-metadata`, ctx()));
    expect(err).toBeInstanceOf(PermanentError);
    expect(err.message).toMatch(/^refused to fetch 169\.254\.169\.254: it is a private or reserved address.*SSRF/);
    const file = await failure(fetchUrl(`${base}/to-file`, ctx()));
    expect(file).toBeInstanceOf(PermanentError);
    expect(file.message).toMatch(/only http and https/);
  });

  it('hands the socket only the allowed addresses of a name', async () => {
    const mixed: Resolver = async () => [
      { address: '10.1.2.3', family: 4 },
      { address: '127.0.0.1', family: 4 },
    ];
    const file = await createUrlFetcher(loopback(), mixed)(`http://mixed.example:${port}/`, ctx());
    expect(file.finalUrl).toBe(`http://mixed.example:${port}/`);
    expect(connections).toBe(1);
  });

  it('allows a host name from the allow list', async () => {
    const file = await createUrlFetcher(policy({ allow: parseFetchAllow('localhost') }))(`http://localhost:${port}/`, ctx());
    expect(file.size).toBe(Buffer.byteLength(PAGE));
  });

  it('stops a body past the size cap', async () => {
    const err = await failure(fetchUrl(`${base}/big`, ctx()));
    expect(err).toBeInstanceOf(PermanentError);
    expect(err.message).toBe(`${base}/big is larger than 10 MB`);
    const declared = await failure(fetchUrl(`${base}/declared-big`, ctx()));
    expect(declared.message).toBe(`${base}/declared-big is larger than 10 MB`);
  });

  it('counts decompressed bytes against the cap', async () => {
    const err = await failure(fetchUrl(`${base}/bomb`, ctx()));
    expect(err).toBeInstanceOf(PermanentError);
    expect(err.message).toMatch(/larger than 10 MB/);
  });

  it('decodes gzip and brotli responses', async () => {
    for (const route of ['/gzip', '/br']) {
      const file = await fetchUrl(`${base}${route}`, ctx());
      expect(await readFile(file.path, 'utf8'), route).toBe(PAGE);
      expect(file.size).toBe(Buffer.byteLength(PAGE));
    }
  });

  it('times out a server that never answers, as retryable', async () => {
    const started = performance.now();
    const err = await failure(createUrlFetcher(loopback({ timeoutMs: 500 }))(`${base}/hang`, ctx()));
    const elapsed = performance.now() - started;
    expect(err).toBeInstanceOf(RetryableError);
    expect(err.message).toMatch(/timed out: no response for 500 ms/);
    expect(elapsed).toBeGreaterThanOrEqual(450);
    expect(elapsed).toBeLessThan(1500);
  });

  it('times out a body that never ends, under the total deadline', async () => {
    const started = performance.now();
    const err = await failure(createUrlFetcher(loopback({ timeoutMs: 500, totalTimeoutMs: 800 }))(`${base}/drip`, ctx()));
    expect(err).toBeInstanceOf(RetryableError);
    expect(err.message).toMatch(/timed out after 800 ms/);
    expect(performance.now() - started).toBeLessThan(2000);
  });

  it('saves a PDF with its MIME type and name', async () => {
    const file = await fetchUrl(`${base}/files/report.pdf`, ctx());
    expect(file.mimeType).toBe('application/pdf');
    expect(file.filename).toBe('report.pdf');
    expect((await readFile(file.path)).subarray(0, 5).toString()).toBe('%PDF-');
  });

  it('names the file from Content-Disposition and drops MIME parameters', async () => {
    const file = await fetchUrl(`${base}/download`, ctx());
    expect(file.filename).toBe('na\u00efve notes.txt');
    expect(file.mimeType).toBe('text/plain');
  });

  it('fails 4xx permanently and 5xx retryably', async () => {
    const missing = await failure(fetchUrl(`${base}/missing`, ctx()));
    expect(missing).toBeInstanceOf(PermanentError);
    expect(missing.message).toBe(`fetching ${base}/missing failed: HTTP 404 Not Found`);
    const down = await failure(fetchUrl(`${base}/down`, ctx()));
    expect(down).toBeInstanceOf(RetryableError);
    expect(down.message).toMatch(/HTTP 503/);
  });

  it('fails a refused connection retryably', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const freePort = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const err = await failure(fetchUrl(`http://127.0.0.1:${freePort}/`, ctx()));
    expect(err).toBeInstanceOf(RetryableError);
    expect(err.message).toMatch(/ECONNREFUSED/);
  });
});

describe('isForbiddenAddress', () => {
  it.each([
    ['0.0.0.0', /this network/],
    ['0.1.2.3', /this network/],
    ['10.0.0.1', /private/],
    ['10.255.255.255', /private/],
    ['100.64.0.1', /carrier-grade NAT/],
    ['100.127.255.254', /carrier-grade NAT/],
    ['127.0.0.1', /loopback/],
    ['127.255.0.9', /loopback/],
    ['169.254.169.254', /link-local.*metadata/],
    ['172.16.0.1', /private/],
    ['172.31.255.255', /private/],
    ['192.0.0.8', /IETF/],
    ['192.0.2.10', /documentation/],
    ['192.168.1.1', /private/],
    ['198.18.0.1', /benchmarking/],
    ['198.19.255.1', /benchmarking/],
    ['198.51.100.7', /documentation/],
    ['203.0.113.9', /documentation/],
    ['224.0.0.251', /multicast/],
    ['239.255.255.250', /multicast/],
    ['240.0.0.1', /reserved/],
    ['255.255.255.255', /broadcast/],
    ['::', /unspecified/],
    ['::1', /loopback/],
    ['[::1]', /loopback/],
    ['fc00::1', /unique local/],
    ['fd12:3456::1', /unique local/],
    ['fe80::1', /link-local/],
    ['fe80::1%eth0', /link-local/],
    ['ff02::1', /multicast/],
    ['2001:db8::1', /documentation/],
    ['fd00:ec2::254', /cloud metadata/],
    ['::ffff:127.0.0.1', /IPv4-mapped form of 127\.0\.0\.1, a loopback/],
    ['::ffff:7f00:1', /IPv4-mapped form of 127\.0\.0\.1, a loopback/],
    ['::ffff:a9fe:a9fe', /IPv4-mapped form of 169\.254\.169\.254/],
    ['64:ff9b::10.0.0.1', /NAT64 form of 10\.0\.0\.1, a private/],
    ['2002:c0a8:101::1', /6to4 form of 192\.168\.1\.1/],
    ['::127.0.0.1', /IPv4-compatible/],
    ['example.com', /not an IP address/],
  ])('%s is refused', (ip, reason) => {
    expect(isForbiddenAddress(ip)).toMatch(reason);
  });

  it.each([['1.1.1.1'], ['8.8.8.8'], ['93.184.216.34'], ['100.63.255.255'], ['100.128.0.1'], ['172.15.255.255'], ['172.32.0.1'], ['198.20.0.1'], ['223.255.255.255'], ['2606:4700:4700::1111'], ['2001:4860:4860::8888'], ['::ffff:8.8.8.8'], ['64:ff9b::8.8.8.8'], ['fbff::1']])(
    '%s is allowed',
    (ip) => {
      expect(isForbiddenAddress(ip)).toBeNull();
    },
  );
});

describe('the allow list', () => {
  it('parses CIDRs, addresses and host names, and lets them through', () => {
    const allow = parseFetchAllow(' 127.0.0.1/32, 10.0.0.0/8 intranet.example,.corp.example, fd00::/8 ,192.168.1.5');
    const p = { allow };
    expect(checkAddress('127.0.0.1', 'x', p)).toBeNull();
    expect(checkAddress('127.0.0.2', 'x', p)).toMatch(/loopback/);
    expect(checkAddress('10.9.8.7', 'x', p)).toBeNull();
    expect(checkAddress('fd00::1', 'x', p)).toBeNull();
    expect(checkAddress('192.168.1.5', 'x', p)).toBeNull();
    expect(checkAddress('192.168.1.6', 'x', p)).toMatch(/private/);
    expect(checkAddress('192.168.1.6', 'intranet.example', p)).toBeNull();
    expect(isAllowedHost('wiki.corp.example', allow)).toBe(true);
    expect(isAllowedHost('corp.example', allow)).toBe(false);
    expect(isAllowedHost('intranet.example.', allow)).toBe(true);
    expect(isAllowedHost('evil-intranet.example', allow)).toBe(false);
  });

  it('rejects entries that are not addresses, CIDRs or names', () => {
    expect(() => parseFetchAllow('10.0.0.0/33')).toThrow(/bad prefix/);
    expect(() => parseFetchAllow('http://intranet')).toThrow(/neither/);
    expect(parseFetchAllow('').hosts.size).toBe(0);
  });
});

describe('filenameOf', () => {
  const url = new URL('https://example.com/docs/a%20b.html?x=1');
  it.each([
    [undefined, 'a b.html'],
    ['attachment; filename="report \\"final\\".pdf"', 'report "final".pdf'],
    ['inline; filename=plain.txt', 'plain.txt'],
    ["attachment; filename*=UTF-8''%E2%82%AC%20rates.csv", '\u20ac rates.csv'],
    ['attachment; filename="../../etc/passwd"', 'passwd'],
  ])('%s → %s', (cd, name) => {
    expect(filenameOf(cd, url)).toBe(name);
  });
  it('is null for a bare origin', () => {
    expect(filenameOf(undefined, new URL('https://example.com/'))).toBeNull();
  });
});
