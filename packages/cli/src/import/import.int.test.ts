import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemstreamHttp } from './http.js';
import { collectItems } from './sources.js';
import { runImport } from './run.js';

/**
 * A loopback stand-in for memstream's HTTP surface, just what the importer uses: adds (JSON and
 * multipart), GET by customId, /v3/events, /v3/documents/processing. It counts requests in flight,
 * answers 429 with Retry-After when told to, and fails documents whose content says "poison".
 */
class FakeMemstream {
  server!: Server;
  url = '';
  docs = new Map<string, { id: string; customId: string; status: string; metadata: Record<string, unknown>; error: { stage: string; reason: string; class: string } | null }>();
  posts = 0;
  inFlight = 0;
  maxInFlight = 0;
  /** Answer the next N adds with 429 and this Retry-After (ms). */
  throttleNext = 0;
  retryAfterMs = 300;
  throttledAt: number[] = [];
  retriedAt: number[] = [];
  private streams = new Set<ServerResponse>();
  private seq = 0;

  async start() {
    this.server = createServer((req, res) => void this.handle(req, res));
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    const a = this.server.address();
    this.url = `http://127.0.0.1:${typeof a === 'object' && a ? a.port : 0}`;
  }
  async stop() {
    for (const s of this.streams) s.end();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
  private emit(d: { id: string; customId: string; status: string; error: unknown }) {
    const ev = { id: `e${++this.seq}`, type: `document.${d.status}`, documentId: d.id, customId: d.customId, containerTags: [], status: d.status, revision: 1, occurredAt: new Date().toISOString(), ...(d.error ? { error: d.error } : {}) };
    for (const s of this.streams) s.write(`id: ${this.seq}\ndata: ${JSON.stringify(ev)}\n\n`);
  }
  private json(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) {
    res.writeHead(status, { 'content-type': 'application/json', ...headers });
    res.end(JSON.stringify(body));
  }
  private async handle(req: IncomingMessage, res: ServerResponse) {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks);
    const url = new URL(req.url!, this.url);
    if (url.pathname === '/v3/events') {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(': connected\n\n');
      this.streams.add(res);
      req.on('close', () => this.streams.delete(res));
      return;
    }
    if (req.method === 'GET' && url.pathname === '/v3/documents/processing') {
      const docs = [...this.docs.values()].filter((d) => d.status === 'queued');
      return this.json(res, 200, { documents: docs, totalCount: docs.length });
    }
    if (req.method === 'POST' && url.pathname === '/v3/documents/list') return this.json(res, 200, { memories: [], pagination: {} });
    if (req.method === 'GET' && url.pathname.startsWith('/v3/documents/')) {
      const d = this.docs.get(decodeURIComponent(url.pathname.split('/')[3]!));
      return d ? this.json(res, 200, d) : this.json(res, 404, { error: 'Not found', details: 'no such document' });
    }
    if (req.method === 'POST' && (url.pathname === '/v3/documents' || url.pathname === '/v3/documents/file')) {
      this.inFlight++;
      this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
      try {
        await new Promise((r) => setTimeout(r, 5));
        if (this.throttleNext > 0) {
          this.throttleNext--;
          this.throttledAt.push(Date.now());
          return this.json(res, 429, { error: 'Too many requests', details: 'slow down' }, { 'retry-after': '1', 'retry-after-ms': String(this.retryAfterMs) });
        }
        if (this.throttledAt.length && this.retriedAt.length === 0) this.retriedAt.push(Date.now());
        this.posts++;
        let customId: string, metadata: Record<string, unknown>, content: string;
        if (url.pathname.endsWith('/file')) {
          const form = await new Request(this.url, { method: 'POST', headers: { 'content-type': req.headers['content-type']! }, body }).formData();
          customId = String(form.get('customId'));
          metadata = JSON.parse(String(form.get('metadata')));
          content = await (form.get('file') as Blob).text();
        } else {
          const j = JSON.parse(body.toString());
          ({ customId, metadata, content } = j);
        }
        const d = { id: 'doc_' + customId, customId, status: 'queued', metadata, error: null as null | { stage: string; reason: string; class: string } };
        this.docs.set(customId, d);
        this.docs.set(d.id, d);
        setTimeout(() => {
          if (content.includes('poison')) {
            d.status = 'failed';
            d.error = { stage: 'extract', reason: 'no extractable text', class: 'permanent' };
          } else d.status = 'done';
          this.emit(d);
        }, 20);
        return this.json(res, 200, { id: d.id, status: 'queued' });
      } finally {
        this.inFlight--;
      }
    }
    this.json(res, 404, { error: 'Not found', details: url.pathname });
  }
}

describe('import against a loopback memstream', () => {
  const fake = new FakeMemstream();
  let dir: string;
  beforeAll(async () => {
    await fake.start();
    dir = mkdtempSync(path.join(tmpdir(), 'memstream-import-'));
    mkdirSync(path.join(dir, 'notes', 'deep'), { recursive: true });
    for (let i = 0; i < 30; i++) writeFileSync(path.join(dir, 'notes', i % 2 ? 'deep' : '', `n${i}.md`), `# note ${i}\nbody ${i}`);
    writeFileSync(path.join(dir, 'notes', 'bad.txt'), 'poison pill');
    writeFileSync(path.join(dir, 'notes', '.hidden'), 'skipped: a dot file');
    writeFileSync(
      path.join(dir, 'items.jsonl'),
      ['{"content":"first line","customId":"line-1","metadata":{"k":"v"}}', '{"content":"second"}', 'not json', '{"content":""}', '{"content":"x","metadata":{"deep":{"a":1}}}'].join('\n'),
    );
    writeFileSync(path.join(dir, 'links.urls'), '# comment\nhttps://example.com/a\nftp://nope\n');
  });
  afterAll(async () => {
    await fake.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('reads folders recursively, .jsonl and .urls lists, with invalid lines as failures with their reason', async () => {
    const items = await collectItems([path.join(dir, 'notes'), path.join(dir, 'items.jsonl'), path.join(dir, 'links.urls')], dir);
    expect(items.filter((i) => i.kind === 'file')).toHaveLength(31);
    expect(items.find((i) => i.label.endsWith('.hidden'))).toBeUndefined();
    expect(items.filter((i) => i.kind === 'content').map((i) => i.customId)).toContain('line-1');
    const invalid = items.filter((i) => i.kind === 'invalid').map((i) => `${i.label}: ${i.kind === 'invalid' ? i.reason : ''}`);
    expect(invalid).toEqual([
      'items.jsonl:3: not valid JSON',
      'items.jsonl:4: content: a non-empty string is required',
      expect.stringMatching(/^items\.jsonl:5: metadata: /),
      'links.urls:3 ftp://nope: only http and https URLs can be imported',
    ]);
    // customIds come from where the item is, so they are the same on every run.
    const again = await collectItems([path.join(dir, 'notes')], dir);
    expect(again.map((i) => i.customId)).toEqual(items.slice(0, 31).map((i) => i.customId));
  });

  it('holds concurrency, waits out Retry-After on 429, follows statuses to done or failed, and a second run sends nothing', async () => {
    const http = new MemstreamHttp(fake.url, 'ms_test_key');
    const items = await collectItems([path.join(dir, 'notes'), path.join(dir, 'items.jsonl'), path.join(dir, 'links.urls')], dir);
    fake.throttleNext = 3;
    const seen: string[] = [];
    const first = await runImport(http, items, { concurrency: 3, wait: true, progressEveryMs: 50, onProgress: (p) => seen.push(p.phase) });
    expect(fake.maxInFlight).toBeLessThanOrEqual(3);
    expect(first.throttled).toBe(3);
    // The retry came no sooner than the server asked.
    expect(fake.retriedAt[0]! - fake.throttledAt[0]!).toBeGreaterThanOrEqual(fake.retryAfterMs - 10);
    // 31 files + 2 good jsonl lines + 1 URL sent; the bad file failed in the pipeline, 4 lines never left.
    expect(first.accepted).toBe(34);
    expect(first.done).toBe(33);
    expect(first.failed).toBe(5);
    expect(first.pending).toBe(0);
    expect(first.failures.find((f) => f.label.endsWith('bad.txt'))?.reason).toBe('extract: no extractable text');
    expect(seen.at(-1)).toBe('finished');

    const posts = fake.posts;
    const second = await runImport(http, items, { concurrency: 3, wait: true });
    // Unchanged and done: skipped. The failed one is sent again (and fails again); nothing else.
    expect(fake.posts - posts).toBe(1);
    expect(second.skipped).toBe(33);
    expect(second.accepted).toBe(1);

    // A changed file is sent again.
    writeFileSync(path.join(dir, 'notes', 'n0.md'), '# note 0\nedited');
    const third = await runImport(http, await collectItems([path.join(dir, 'notes')], dir), { concurrency: 3, wait: true });
    expect(third.accepted).toBe(2); // the edited note, and the failed one once more
    expect(third.done).toBe(1);
  });
});
