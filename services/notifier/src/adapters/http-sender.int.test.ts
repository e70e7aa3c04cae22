import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer, type Server } from 'node:http';
import { AddressRefused, PermanentError } from '@memstream/kit';
import { httpSender } from './http-sender.js';

/** The sender against a real HTTP server on loopback, and the address policy in front of it. */
describe('webhook HTTP sender', () => {
  let server: Server;
  let base = '';
  const seen: Array<{ headers: Record<string, unknown>; body: string }> = [];

  beforeAll(async () => {
    server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        seen.push({ headers: req.headers, body: Buffer.concat(chunks).toString() });
        if (req.url === '/slow') return void setTimeout(() => res.end('late'), 2_000);
        if (req.url === '/busy') return void res.writeHead(503, { 'retry-after': '12' }).end('x'.repeat(10_000));
        if (req.url === '/moved') return void res.writeHead(302, { location: 'http://169.254.169.254/' }).end();
        res.writeHead(200).end('ok');
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const a = server.address();
    base = `http://127.0.0.1:${typeof a === 'object' && a ? a.port : 0}`;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  it('POSTs the body and headers when private receivers are allowed', async () => {
    const send = httpSender({ allowPrivate: true, timeoutMs: 1_000 });
    const r = await send({ url: `${base}/hook`, headers: { 'content-type': 'application/json', 'webhook-id': 'e1' }, body: '{"a":1}' });
    expect(r).toEqual({ status: 200, body: 'ok' });
    expect(seen.at(-1)).toMatchObject({ body: '{"a":1}', headers: { 'webhook-id': 'e1', 'content-length': '7' } });
  });

  it('reports the status, a bounded body and Retry-After; follows no redirect', async () => {
    const send = httpSender({ allowPrivate: true, timeoutMs: 1_000 });
    const busy = await send({ url: `${base}/busy`, headers: {}, body: '{}' });
    expect(busy.status).toBe(503);
    expect(busy.retryAfterMs).toBe(12_000);
    expect(busy.body.length).toBeLessThanOrEqual(4096);
    expect((await send({ url: `${base}/moved`, headers: {}, body: '{}' })).status).toBe(302);
  });

  it('gives up on a receiver that does not answer in time', async () => {
    const send = httpSender({ allowPrivate: true, timeoutMs: 300 });
    await expect(send({ url: `${base}/slow`, headers: {}, body: '{}' })).rejects.toThrow(/no answer within 300 ms/);
  });

  it('refuses loopback, private and metadata addresses by default, literal or resolved', async () => {
    const before = seen.length;
    const refusedLog: Array<[string, string]> = [];
    const send = httpSender({ allowPrivate: false, timeoutMs: 1_000, resolve: async () => [{ address: '127.0.0.1', family: 4 }], onRefused: (h, d) => refusedLog.push([h, d]) });
    await expect(send({ url: `${base}/hook`, headers: {}, body: '{}' })).rejects.toThrow(PermanentError);
    await expect(send({ url: 'http://169.254.169.254/latest', headers: {}, body: '{}' })).rejects.toThrow('refused to deliver to 169.254.169.254: it is a private or reserved address');
    await expect(send({ url: 'http://[::1]:9/', headers: {}, body: '{}' })).rejects.toThrow(/it is a private or reserved address/);
    const port = new URL(base).port;
    // The delivery record (read by the tenant) says only that; the address is for the log.
    const err = await send({ url: `http://hooks.example:${port}/hook`, headers: {}, body: '{}' }).catch((e: unknown) => e as Error);
    expect(err).toBeInstanceOf(AddressRefused);
    expect((err as Error).message).toMatch(/^refused to deliver to hooks\.example: it resolves to a private or reserved address/);
    expect((err as Error).message).not.toContain('127.0.0.1');
    expect(refusedLog).toContainEqual(['hooks.example', expect.stringMatching(/^hooks\.example resolves to 127\.0\.0\.1, a loopback address/)]);
    expect(seen.length).toBe(before);
  });
});
