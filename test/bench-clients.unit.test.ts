import { afterEach, describe, expect, it } from 'vitest';
import { createServer, type Server } from 'node:http';
import { rawConnection, request } from '../bench/raw-http.js';
import { pacedRun } from '../bench/paced.js';

/** The benches' load generators against a plain node:http server (what they need of the gateway: keep-alive, Content-Length). */
let server: Server | null = null;
afterEach(() => {
  server?.close();
  server = null;
});

async function serve(handle: (body: string) => { status: number; body: string } | null, keepAliveTimeout = 5_000): Promise<{ port: number; seen: string[] }> {
  const seen: string[] = [];
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString()));
    req.on('end', () => {
      seen.push(`${req.method} ${req.url} ${body}`);
      const a = handle(body);
      if (!a) return; // never answered
      res.writeHead(a.status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(a.body) });
      res.end(a.body);
    });
  });
  server.keepAliveTimeout = keepAliveTimeout;
  await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
  return { port: (server.address() as { port: number }).port, seen };
}

describe('bench clients', () => {
  it('one connection answers requests in order, and opens itself again after the server closed it while idle', async () => {
    const { port, seen } = await serve((b) => ({ status: 200, body: JSON.stringify({ echo: b }) }), 100);
    const c = await rawConnection('127.0.0.1', port);
    const req = (b: string) => request({ method: 'POST', host: `127.0.0.1:${port}`, path: '/v3/documents', headers: { authorization: 'Bearer k' }, body: b });
    const [a, b] = await Promise.all([c.send(req('"one"')), c.send(req('"two"'))]);
    expect([a.status, JSON.parse(a.body.toString()).echo, JSON.parse(b.body.toString()).echo]).toEqual([200, '"one"', '"two"']);
    // The server drops the idle keep-alive socket after 100 ms; the next request goes out on a new one.
    await new Promise((r) => setTimeout(r, 300));
    const after = await c.send(req('"three"'));
    expect(JSON.parse(after.body.toString()).echo).toBe('"three"');
    expect(seen).toEqual(['POST /v3/documents "one"', 'POST /v3/documents "two"', 'POST /v3/documents "three"']);
    c.close();
  });

  it('paced: every request on time, each timed from when it was due; one never answered counts as a timeout', async () => {
    let n = 0;
    const { port } = await serve(() => (++n === 50 ? null : { status: n === 60 ? 503 : 200, body: '{}' }));
    const r = await pacedRun({ url: `http://127.0.0.1:${port}/v3/documents`, method: 'POST', headers: {}, rate: 200, seconds: 1, connections: 10, timeoutMs: 300, body: (k) => JSON.stringify({ k }) });
    // 200 due: one never answered (a timeout, and its connection closed, so that connection's later requests are errors), one 503.
    expect(r.timeouts).toBe(1);
    expect(r.non2xx).toBe(1);
    expect(r.ok + r.non2xx + r.errors + r.timeouts).toBe(200);
    expect(r.ok).toBeGreaterThan(150);
    expect(r.fromDue).toHaveLength(r.ok);
    expect(r.fromDue[0]!).toBeGreaterThanOrEqual(0);
    // From when due is never shorter than from when sent.
    expect(r.fromDue.at(-1)!).toBeGreaterThanOrEqual(r.fromSent.at(-1)!);
    expect(r.p99BySecond).toHaveLength(1);
  });
});
