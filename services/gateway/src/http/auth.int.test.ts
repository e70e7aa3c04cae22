import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import type { Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Kvm } from '@nats-io/kv';
import { startNatsServer, type NatsServerHandle } from '@memstream/cli';
import { blobStore, connectBus, ensureTopology, type Bus } from '@memstream/bus';
import { SqliteChunkIndex } from '@memstream/chunk-index';
import { KEY_EXPIRING_SUBJECT, KeyExpiringNotice } from '@memstream/contracts';
import { HashedEmbedder } from '@memstream/embedder';
import { createLogger, documentIdForCustomId, type Logger } from '@memstream/kit';
import { SqliteDocumentViews, type DocumentView } from '@memstream/views';
import { createApp } from '../app.js';
import { jetstreamEventLog } from '../adapters/event-log.js';
import { KEYS_BUCKET, kvKeyStore, startExpiryNotices, type KvKeyStore } from '../adapters/keys.js';
import { kvKeyRateLimiter } from '../adapters/rate-limit.js';
import { kvTagContexts } from '../adapters/tag-contexts.js';
import type { GatewayPorts } from '../handlers/documents.js';
import { createScopedKey, deriveKeySecret, type KeyPorts } from '../handlers/keys.js';
import { createUploadHandler } from './upload.js';

const ADMIN = 'ms_admin_key_for_auth_tests';
const A = 'tenant-a';
const A2 = 'tenant-a-scratch';
const B = 'tenant-b';

/** A logger that keeps every line it is given, so a test can check what was (not) logged. */
function capturingLogger(lines: string[]): Logger {
  const base = createLogger('auth-test', { level: 'silent' });
  const capture =
    (level: string) =>
    (...args: unknown[]) => {
      lines.push(`${level} ${JSON.stringify(args)}`);
    };
  const make = (): Logger =>
    new Proxy(base, {
      get(target, prop, recv) {
        if (prop === 'child') return () => make();
        if (typeof prop === 'string' && ['trace', 'debug', 'info', 'warn', 'error', 'fatal'].includes(prop)) return capture(prop);
        return Reflect.get(target, prop, recv) as unknown;
      },
    });
  return make();
}

function view(id: string, tags: string[], text: string, over: Partial<DocumentView> = {}): DocumentView {
  const at = new Date().toISOString();
  return {
    id,
    customId: null,
    revision: 1,
    status: 'done',
    title: text.slice(0, 20),
    type: 'text',
    content: text,
    summary: null,
    url: null,
    filepath: null,
    source: null,
    metadata: {},
    containerTags: tags,
    taskType: 'memory',
    contentHash: null,
    error: null,
    chunkCount: 1,
    metadataVersion: 0,
    createdAt: at,
    updatedAt: at,
    version: 0,
    ...over,
  };
}

interface Gateway {
  url: string;
  bus: Bus;
  store: KvKeyStore;
  keys: KeyPorts;
  close(): Promise<void>;
}

describe('scoped API keys over real NATS KV', () => {
  let dir: string;
  let nats: NatsServerHandle;
  let views: SqliteDocumentViews;
  let index: SqliteChunkIndex;
  let gw: Gateway;
  const logLines: string[] = [];
  const embedder = new HashedEmbedder();
  let seq = 0;

  /** One gateway replica: its own NATS connection, key store (and watch) and limiter; the view and index stores are shared. */
  async function startGateway(log: Logger): Promise<Gateway> {
    const bus = await connectBus({ url: nats.url, name: `auth-test-${seq++}`, log });
    await ensureTopology(bus.jsm, { ackWaitMs: 2_000 });
    const blobs = blobStore(bus);
    const ports: GatewayPorts = { views, index, blobs, events: jetstreamEventLog(bus), tagContexts: await kvTagContexts(bus), now: () => new Date() };
    const store = await kvKeyStore(bus, { log });
    const keys: KeyPorts = { store, secret: deriveKeySecret(ADMIN), now: () => new Date(), defaults: { rateLimitMax: 500, rateLimitTimeWindow: 60_000 } };
    const limiter = await kvKeyRateLimiter(bus, { log });
    const app = createApp({ ports, apiKey: ADMIN, log, uploadFile: createUploadHandler({ ports, blobs, log }), search: { index, views, embedder }, auth: { keys, limiter, log } });
    const server = await new Promise<Server>((resolve, reject) => {
      const s = app.listen(0, '127.0.0.1', () => resolve(s));
      s.once('error', reject);
    });
    return {
      url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      bus,
      store,
      keys,
      async close() {
        await new Promise<void>((r) => server.close(() => r()));
        await store.close();
        await bus.close();
      },
    };
  }

  /** A document as the indexer and projection would leave it: searchable and listed. */
  async function indexed(id: string, tags: string[], text: string): Promise<void> {
    const [vector] = await embedder.embed([text]);
    await index.replaceDocument({
      documentId: id,
      revision: 1,
      model: embedder.model,
      dim: embedder.dim,
      containerTags: tags,
      metadata: {},
      chunks: [{ index: 0, hash: createHash('sha256').update(text).digest('hex'), text, vector: vector! }],
    });
    await views.put(view(id, tags, text), 0);
  }

  async function call(base: string, method: string, p: string, opts: { key?: string | null; header?: string; body?: unknown; form?: FormData } = {}) {
    const headers: Record<string, string> = {};
    if (opts.header !== undefined) headers.authorization = opts.header;
    else if (opts.key) headers.authorization = `Bearer ${opts.key}`;
    let body: string | FormData | undefined;
    if (opts.form) body = opts.form;
    else if (opts.body !== undefined) {
      headers['content-type'] = 'application/json';
      body = JSON.stringify(opts.body);
    }
    const res = await fetch(base + p, { method, headers, ...(body !== undefined ? { body } : {}) });
    const text = await res.text();
    return { status: res.status, headers: res.headers, text, body: (text ? JSON.parse(text) : null) as Record<string, unknown> | null };
  }

  const api = (method: string, p: string, opts: Parameters<typeof call>[3] = {}) => call(gw.url, method, p, opts);
  const admin = (method: string, p: string, body?: unknown) => api(method, p, { key: ADMIN, ...(body !== undefined ? { body } : {}) });

  async function newKey(body: Record<string, unknown>): Promise<{ id: string; key: string }> {
    const r = await admin('POST', '/v3/auth/scoped-key', body);
    expect(r.status, r.text).toBe(200);
    return { id: r.body!.id as string, key: r.body!.key as string };
  }

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'memstream-auth-'));
    nats = await startNatsServer({ storeDir: path.join(dir, 'nats') });
    views = SqliteDocumentViews.open(path.join(dir, 'views.sqlite'));
    index = SqliteChunkIndex.open(path.join(dir, 'index.sqlite'));
    gw = await startGateway(capturingLogger(logLines));
  });
  afterAll(async () => {
    await gw?.close();
    await views?.close();
    await index?.close();
    await nats?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('creates a key shown once, lists keys without secrets, and never stores or logs the key', async () => {
    const created = await admin('POST', '/v3/auth/scoped-key', { containerTag: A, name: 'alpha', expiresInDays: 30, rateLimitMax: 100, rateLimitTimeWindow: 1000 });
    expect(created.status).toBe(200);
    const b = created.body!;
    expect(b.key).toMatch(/^msk_[0-9a-f]{20}_[A-Za-z0-9_-]{43}$/);
    expect(String(b.key).startsWith(`msk_${b.id}_`)).toBe(true);
    expect(b).toMatchObject({ name: 'alpha', containerTag: A, containerTags: [A], rateLimitMax: 100, rateLimitTimeWindow: 1000, revoked: false, expired: false });
    const days = (Date.parse(b.expiresAt as string) - Date.parse(b.createdAt as string)) / 86_400_000;
    expect(days).toBe(30);
    // Supermemory's defaults: name scoped_<tag>, no expiry, 500 per 60 s.
    const d = await admin('POST', '/v3/auth/scoped-key', { containerTags: [A, A2] });
    expect(d.body).toMatchObject({ name: `scoped_${A}`, containerTags: [A, A2], expiresAt: null, rateLimitMax: 500, rateLimitTimeWindow: 60_000 });

    const list = await admin('GET', '/v3/auth/scoped-key');
    expect(list.status).toBe(200);
    const ids = (list.body!.keys as Array<Record<string, unknown>>).map((k) => k.id);
    expect(ids).toEqual(expect.arrayContaining([b.id, d.body!.id]));
    for (const k of list.body!.keys as Array<Record<string, unknown>>) {
      expect(k.key).toBeUndefined();
      expect(k.hash).toBeUndefined();
    }
    const secret = String(b.key).split('_').slice(2).join('_');
    expect(list.text).not.toContain(secret);
    // The bucket holds the HMAC only.
    const kv = await new Kvm(gw.bus.js).open(KEYS_BUCKET);
    const raw = (await kv.get(b.id as string))!.string();
    expect(raw).not.toContain(secret);
    expect(JSON.parse(raw).hash).toMatch(/^[0-9a-f]{64}$/);
    // Using the key logs nothing of it either.
    expect((await api('POST', '/v3/documents/list', { key: b.key as string, body: {} })).status).toBe(200);
    expect(logLines.length).toBeGreaterThan(0);
    expect(logLines.join('\n')).not.toContain(secret);
  });

  it('validates key creation: 400 naming the field', async () => {
    for (const [body, field] of [
      [{}, 'containerTag'],
      [{ containerTag: A, expiresInDays: 0 }, 'expiresInDays'],
      [{ containerTag: A, expiresInDays: 366 }, 'expiresInDays'],
      [{ containerTag: A, rateLimitMax: 10_001 }, 'rateLimitMax'],
      [{ containerTag: A, rateLimitTimeWindow: 3_600_001 }, 'rateLimitTimeWindow'],
      [{ containerTag: 'bad tag!' }, 'containerTag'],
      [{ containerTags: [] }, 'containerTags'],
      [{ containerTag: A, permission: 'read' }, 'permission'],
    ] as const) {
      const r = await admin('POST', '/v3/auth/scoped-key', body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(String(r.body!.details)).toContain(field);
    }
    expect((await admin('DELETE', '/v3/auth/scoped-key/0123456789abcdef0123')).status).toBe(404);
    expect((await admin('DELETE', '/v3/auth/scoped-key/not-an-id')).status).toBe(404);
  });

  /**
   * The matrix: every endpoint × every kind of caller. "in" sends a request inside the scoped
   * key's tags, "out" the same request aimed at another tenant's tag or document.
   */
  describe('endpoint × caller matrix', () => {
    type Case = 'none' | 'malformed' | 'wrong' | 'expired' | 'revoked' | 'admin' | 'in' | 'out';
    const CASES: Case[] = ['none', 'malformed', 'wrong', 'expired', 'revoked', 'admin', 'in', 'out'];
    let scoped: string;
    let expired: string;
    let revoked: string;
    let docA: string;
    let docB: string;
    const fresh = async (tags: string[]) => {
      const id = `doc-fresh-${seq++}`;
      await views.put(view(id, tags, `fresh document ${id}`), 0);
      return id;
    };
    const form = (tag: string) => {
      const f = new FormData();
      f.append('containerTag', tag);
      f.append('file', new Blob(['matrix upload'], { type: 'text/plain' }), 'm.txt');
      return f;
    };

    interface Endpoint {
      name: string;
      ok: number;
      /** Status for "out"; for admin-only routes a scoped key gets 403 either way. */
      out: number;
      request(c: Case): Promise<{ method: string; path: string; body?: unknown; form?: FormData }>;
      /** Extra checks on a 2xx answer to a scoped key. */
      check?(body: Record<string, unknown> | null): void;
    }
    const target = (c: Case) => (c === 'out' ? B : c === 'admin' ? 'admin-tag' : A);
    const doc = (c: Case) => (c === 'out' ? docB : docA);
    const ENDPOINTS: Endpoint[] = [
      { name: 'POST /v3/documents', ok: 200, out: 403, request: async (c) => ({ method: 'POST', path: '/v3/documents', body: { content: 'matrix add', containerTag: target(c) } }) },
      {
        name: 'POST /v3/documents/batch',
        ok: 200,
        out: 403,
        request: async (c) => ({ method: 'POST', path: '/v3/documents/batch', body: { documents: ['matrix batch'], containerTag: target(c) } }),
        check: (b) => expect(b).toMatchObject({ success: 1, failed: 0 }),
      },
      { name: 'POST /v3/documents/file', ok: 200, out: 403, request: async (c) => ({ method: 'POST', path: '/v3/documents/file', form: form(target(c)) }) },
      {
        name: 'POST /v3/documents/list',
        ok: 200,
        out: 403,
        request: async (c) => ({ method: 'POST', path: '/v3/documents/list', body: { containerTags: [target(c)] } }),
        check: (b) => expect((b!.memories as DocumentView[]).every((m) => m.containerTags.includes(A))).toBe(true),
      },
      { name: 'GET /v3/documents/{id}', ok: 200, out: 404, request: async (c) => ({ method: 'GET', path: `/v3/documents/${doc(c)}` }) },
      { name: 'PATCH /v3/documents/{id}', ok: 200, out: 404, request: async (c) => ({ method: 'PATCH', path: `/v3/documents/${doc(c)}`, body: { metadata: { touched: c } } }) },
      {
        name: 'DELETE /v3/documents/{id}',
        ok: 204,
        out: 404,
        request: async (c) => ({ method: 'DELETE', path: `/v3/documents/${c === 'out' ? docB : await fresh(c === 'admin' ? ['admin-tag'] : [A2])}` }),
      },
      {
        name: 'DELETE /v3/documents/bulk',
        ok: 200,
        out: 403,
        request: async (c) => {
          if (c !== 'out') await fresh(c === 'admin' ? ['admin-scratch'] : [A2]);
          return { method: 'DELETE', path: '/v3/documents/bulk', body: { containerTags: [c === 'out' ? B : c === 'admin' ? 'admin-scratch' : A2] } };
        },
        check: (b) => expect(b!.deletedCount).toBeGreaterThanOrEqual(1),
      },
      {
        // No tag to aim elsewhere: "out" is the same request, and must still show only the key's own documents.
        name: 'GET /v3/documents/processing',
        ok: 200,
        out: 200,
        request: async () => ({ method: 'GET', path: '/v3/documents/processing' }),
        check: (b) => {
          const docs = b!.documents as DocumentView[];
          expect(docs.length).toBeGreaterThan(0);
          expect(docs.every((d) => d.containerTags.some((t) => t === A || t === A2))).toBe(true);
        },
      },
      { name: 'GET /v3/documents/{id}/timeline', ok: 200, out: 404, request: async (c) => ({ method: 'GET', path: `/v3/documents/${doc(c)}/timeline` }) },
      {
        name: 'POST /v3/search',
        ok: 200,
        out: 403,
        request: async (c) => ({ method: 'POST', path: '/v3/search', body: { q: 'matrix', containerTag: target(c) } }),
      },
      {
        name: 'POST /v4/search',
        ok: 200,
        out: 403,
        request: async (c) => ({ method: 'POST', path: '/v4/search', body: { q: 'matrix', containerTag: target(c) } }),
      },
      { name: 'POST /v3/auth/scoped-key', ok: 200, out: 403, request: async (c) => ({ method: 'POST', path: '/v3/auth/scoped-key', body: { containerTag: target(c) } }) },
      { name: 'GET /v3/auth/scoped-key', ok: 200, out: 403, request: async () => ({ method: 'GET', path: '/v3/auth/scoped-key' }) },
      {
        name: 'DELETE /v3/auth/scoped-key/{id}',
        ok: 200,
        out: 403,
        request: async () => ({ method: 'DELETE', path: `/v3/auth/scoped-key/${(await newKey({ containerTag: B })).id}` }),
      },
    ];
    const ADMIN_ONLY = new Set(['POST /v3/auth/scoped-key', 'GET /v3/auth/scoped-key', 'DELETE /v3/auth/scoped-key/{id}']);

    function expected(e: Endpoint, c: Case): number {
      if (['none', 'malformed', 'wrong', 'expired', 'revoked'].includes(c)) return 401;
      if (c === 'admin') return e.ok;
      if (ADMIN_ONLY.has(e.name)) return 403;
      return c === 'in' ? e.ok : e.out;
    }

    function auth(c: Case): { key?: string | null; header?: string } {
      switch (c) {
        case 'none':
          return { key: null };
        case 'malformed':
          return { header: 'Token abc' };
        case 'wrong':
          return { key: 'ms_not_the_admin_key_at_all' };
        case 'expired':
          return { key: expired };
        case 'revoked':
          return { key: revoked };
        case 'admin':
          return { key: ADMIN };
        default:
          return { key: scoped };
      }
    }

    beforeAll(async () => {
      scoped = (await newKey({ containerTags: [A, A2], rateLimitMax: 10_000 })).key;
      // Created "400 days ago" with a one-day life: expired now.
      expired = (await createScopedKey({ ...gw.keys, now: () => new Date(Date.now() - 400 * 86_400_000) }, { containerTag: A, expiresInDays: 1 })).key;
      const r = await newKey({ containerTag: A });
      revoked = r.key;
      expect((await admin('DELETE', `/v3/auth/scoped-key/${r.id}`)).body).toMatchObject({ success: true, id: r.id });
      // Documents with events in the log (for the timeline) and in the index (for search).
      docA = (await admin('POST', '/v3/documents', { content: 'matrix document of tenant a', containerTag: A })).body!.id as string;
      docB = (await admin('POST', '/v3/documents', { content: 'matrix document of tenant b', containerTag: B })).body!.id as string;
      await indexed('doc-matrix-a', [A], 'matrix words for tenant a');
      await indexed('doc-matrix-b', [B], 'matrix words for tenant b');
      // In the processing queue: one of each tenant.
      await views.put(view('doc-queued-a', [A], 'queued a', { status: 'queued' }), 0);
      await views.put(view('doc-queued-b', [B], 'queued b', { status: 'queued' }), 0);
    });

    it('answers every cell as the table says', { timeout: 60_000 }, async () => {
      const table: string[] = [];
      const failures: string[] = [];
      for (const e of ENDPOINTS) {
        const row: string[] = [];
        for (const c of CASES) {
          const want = expected(e, c);
          const r = await e.request(c);
          const res = await api(r.method, r.path, { ...auth(c), ...(r.body !== undefined ? { body: r.body } : {}), ...(r.form ? { form: r.form } : {}) });
          row.push(String(res.status));
          if (res.status !== want) failures.push(`${e.name} × ${c}: want ${want}, got ${res.status} ${res.text}`);
          if (res.status >= 400) {
            expect(res.body, `${e.name} × ${c}`).toMatchObject({ error: expect.any(String), details: expect.any(String) });
          } else if ((c === 'in' || c === 'out') && e.check) {
            e.check(res.body);
          }
          if (c === 'expired') expect(res.body!.error).toBe('API key expired');
          if (c === 'revoked') expect(res.body!.error).toBe('API key revoked');
        }
        table.push(`${e.name.padEnd(34)} ${row.map((s) => s.padStart(10)).join('')}`);
      }
      console.log(`${''.padEnd(34)} ${CASES.map((c) => c.padStart(10)).join('')}\n${table.join('\n')}`);
      expect(failures).toEqual([]);
    });
  });

  describe('scope rules', () => {
    let one: string;
    let two: string;
    beforeAll(async () => {
      one = (await newKey({ containerTag: 'solo', rateLimitMax: 10_000 })).key;
      two = (await newKey({ containerTags: ['duo-1', 'duo-2'], rateLimitMax: 10_000 })).key;
    });

    it('a write without a tag: a one-tag key gets its tag; a several-tag key is told to name one (400)', async () => {
      const r = await api('POST', '/v3/documents', { key: one, body: { content: 'no tag given' } });
      expect(r.status).toBe(200);
      const got = await api('GET', `/v3/documents/${r.body!.id}`, { key: one });
      expect(got.body!.containerTags).toEqual(['solo']);
      const batch = await api('POST', '/v3/documents/batch', { key: one, body: { documents: ['batch item without a tag'] } });
      expect(batch.body).toMatchObject({ success: 1, failed: 0 });

      const m = await api('POST', '/v3/documents', { key: two, body: { content: 'which tag?' } });
      expect(m.status).toBe(400);
      expect(m.body).toMatchObject({ error: 'containerTag required' });
      const ok = await api('POST', '/v3/documents', { key: two, body: { content: 'this tag', containerTag: 'duo-2' } });
      expect(ok.status).toBe(200);
      // A batch item with a tag outside the scope fails alone.
      const mixed = await api('POST', '/v3/documents/batch', { key: two, body: { documents: [{ content: 'in', containerTag: 'duo-1' }, { content: 'out', containerTag: B }] } });
      expect(mixed.status).toBe(200);
      expect(mixed.body).toMatchObject({ success: 1, failed: 1 });
      expect((mixed.body!.results as Array<Record<string, unknown>>)[1]).toMatchObject({ status: 'error', error: 'Forbidden' });
      // Re-tagging its own document to another tenant's tag: 403.
      const patch = await api('PATCH', `/v3/documents/${ok.body!.id}`, { key: two, body: { containerTags: ['duo-1', B] } });
      expect(patch.status).toBe(403);
    });

    it('two tenants use the same customId independently: separate documents, histories and revisions', async () => {
      const other = (await newKey({ containerTag: 'solo-neighbour', rateLimitMax: 10_000 })).key;
      // The neighbour claims the name first; the key for 'solo' is not blocked by it, nor told it exists.
      const theirs = await api('POST', '/v3/documents', { key: other, body: { content: 'the neighbour owns this', customId: 'shared-name' } });
      expect(theirs.status).toBe(200);
      const mine = await api('POST', '/v3/documents', { key: one, body: { content: 'mine', customId: 'shared-name' } });
      expect(mine.status).toBe(200);
      expect(mine.body!.id).not.toBe(theirs.body!.id);
      expect((await api('GET', '/v3/documents/shared-name', { key: one })).body).toMatchObject({ id: mine.body!.id, content: 'mine', containerTags: ['solo'] });
      expect((await api('GET', '/v3/documents/shared-name', { key: other })).body).toMatchObject({ id: theirs.body!.id, content: 'the neighbour owns this' });
      // The neighbour deletes its document: mine is untouched, and my timeline never shows its history.
      expect((await api('DELETE', '/v3/documents/shared-name', { key: other })).status).toBe(204);
      expect((await api('GET', '/v3/documents/shared-name', { key: one })).status).toBe(200);
      const again = await api('POST', '/v3/documents', { key: other, body: { content: 'the neighbour again', customId: 'shared-name' } });
      expect(again.body!.id).toBe(theirs.body!.id);
      const timeline = await api('GET', '/v3/documents/shared-name/timeline', { key: one });
      expect(timeline.status).toBe(200);
      const types = (timeline.body!.events as Array<{ type: string; revision: number }>).map((e) => `${e.type}@${e.revision}`);
      expect(types).toEqual(['document.submitted.v1@1']);
      // The admin key has a customId namespace of its own (docs/auth.md).
      expect((await admin('GET', '/v3/documents/shared-name')).status).toBe(404);
      expect(documentIdForCustomId('shared-name')).not.toBe(mine.body!.id);
    });

    it('"another tenant\'s document" and "no such document" get byte-identical answers from the same reads, on GET, PATCH and DELETE', async () => {
      const id = 'doc-eq-probe';
      // Count the view-store reads a request makes (the log reads go with them, one per candidate id).
      const get = views.get.bind(views);
      let reads = 0;
      views.get = async (x: string) => {
        reads++;
        return get(x);
      };
      const probe = async () => {
        const out: Array<{ status: number; type: string | null; text: string; reads: number }> = [];
        for (const [method, body] of [['GET', undefined], ['PATCH', { metadata: { probe: 1 } }], ['DELETE', undefined]] as const) {
          reads = 0;
          const r = await api(method, `/v3/documents/${id}`, { key: one, ...(body ? { body } : {}) });
          out.push({ status: r.status, type: r.headers.get('content-type'), text: r.text, reads });
        }
        return out;
      };
      try {
        const missing = await probe();
        await views.put(view(id, [B], "another tenant's document"), 0);
        const theirs = await probe();
        expect(theirs).toEqual(missing);
        for (const r of missing) expect(r.status).toBe(404);
        expect(missing.every((r) => r.reads === missing[0]!.reads && r.reads > 0)).toBe(true);
        // Still there: nothing was changed or deleted through the other key.
        expect(await get(id)).toMatchObject({ containerTags: [B], metadata: {} });
      } finally {
        views.get = get;
      }
    });

    it('a document shared with a tag outside the scope: visible, but not changeable (403)', async () => {
      await views.put(view('doc-shared', ['solo', B], 'shared between solo and b'), 0);
      expect((await api('GET', '/v3/documents/doc-shared', { key: one })).status).toBe(200);
      expect((await api('PATCH', '/v3/documents/doc-shared', { key: one, body: { metadata: { x: 1 } } })).status).toBe(403);
      expect((await api('DELETE', '/v3/documents/doc-shared', { key: one })).status).toBe(403);
      // Bulk by its own tag leaves the shared document alone and says so.
      await views.put(view('doc-solo-only', ['solo'], 'only solo'), 0);
      const bulk = await api('DELETE', '/v3/documents/bulk', { key: one, body: { containerTags: ['solo'] } });
      expect(bulk.status).toBe(200);
      expect(bulk.body!.success).toBe(false);
      expect(bulk.body!.errors).toEqual([{ id: 'doc-shared', error: expect.stringMatching(/^forbidden/) }]);
      expect(await views.get('doc-shared')).not.toBeNull();
      expect(await views.get('doc-solo-only')).toBeNull();
      // Bulk by ids: another tenant's document is "not found", a shared one forbidden.
      await views.put(view('doc-b-only', [B], 'only b'), 0);
      const byIds = await api('DELETE', '/v3/documents/bulk', { key: one, body: { ids: ['doc-b-only', 'doc-shared'] } });
      expect(byIds.body!.deletedCount).toBe(0);
      expect(byIds.body!.errors).toEqual([
        { id: 'doc-b-only', error: 'not found' },
        { id: 'doc-shared', error: expect.stringMatching(/^forbidden/) },
      ]);
      // By filepath alone: limited to the key's tags.
      await views.put(view('doc-fp-solo', ['solo'], 'fp solo', { filepath: '/fp/x.md' }), 0);
      await views.put(view('doc-fp-b', [B], 'fp b', { filepath: '/fp/y.md' }), 0);
      const fp = await api('DELETE', '/v3/documents/bulk', { key: one, body: { filepath: '/fp/' } });
      expect(fp.body!.deletedCount).toBe(1);
      expect(await views.get('doc-fp-b')).not.toBeNull();
    });
  });

  it('a request whose body never finishes, refused with 401, gets Connection: close and its socket closed', async () => {
    const { port } = new URL(gw.url);
    const socket = connect(Number(port), '127.0.0.1');
    let answer = '';
    let closedAt = 0;
    socket.on('data', (d) => (answer += d.toString()));
    socket.on('error', () => {});
    const closed = new Promise<void>((r) => socket.on('close', () => r()));
    void closed.then(() => (closedAt = performance.now()));
    await new Promise<void>((r) => socket.once('connect', () => r()));
    // A megabyte promised, one byte sent, and the rest never: the old gateway kept such a socket ~180 s.
    socket.write('POST /v3/documents HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer wrong\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{');
    const sentAt = performance.now();
    const trickle = setInterval(() => !socket.destroyed && socket.write(' '), 200);
    try {
      await Promise.race([closed, new Promise((_, reject) => setTimeout(() => reject(new Error(`socket still open; answer so far: ${answer}`)), 15_000))]);
    } finally {
      clearInterval(trickle);
      socket.destroy();
    }
    console.log(`[early 401] socket closed ${(closedAt - sentAt).toFixed(0)} ms after the request's headers`);
    expect(answer).toMatch(/^HTTP\/1\.1 401 /);
    expect(answer.toLowerCase()).toContain('connection: close');
    expect(answer).toContain('"error":"Unauthorized"');
  });

  it('search isolation: a key for A never sees B, in /v3 and /v4 search, list and get', async () => {
    const keyA = (await newKey({ containerTag: 'iso-a', rateLimitMax: 10_000 })).key;
    for (let i = 0; i < 5; i++) {
      await indexed(`iso-a-${i}`, ['iso-a'], `quarterly revenue report number ${i} for alpha`);
      await indexed(`iso-b-${i}`, ['iso-b'], `quarterly revenue report number ${i} for beta`);
    }
    // The admin sees both tenants for the same query: B's hits exist to be leaked.
    const all = await admin('POST', '/v3/search', { q: 'quarterly revenue report', limit: 20 });
    expect((all.body!.results as Array<{ documentId: string }>).some((r) => r.documentId.startsWith('iso-b'))).toBe(true);

    const v3 = await api('POST', '/v3/search', { key: keyA, body: { q: 'quarterly revenue report beta', limit: 20 } });
    const v3ids = (v3.body!.results as Array<{ documentId: string }>).map((r) => r.documentId);
    expect(v3ids.length).toBe(5);
    expect(v3ids.every((id) => id.startsWith('iso-a'))).toBe(true);
    const byDoc = await api('POST', '/v3/search', { key: keyA, body: { q: 'quarterly revenue', docId: 'iso-b-1' } });
    expect(byDoc.body!.results).toEqual([]);

    const v4 = await api('POST', '/v4/search', { key: keyA, body: { q: 'quarterly revenue report beta', limit: 20 } });
    const v4docs = (v4.body!.results as Array<{ documents: Array<{ id: string }> }>).map((r) => r.documents[0]!.id);
    expect(v4docs.length).toBe(5);
    expect(v4docs.every((id) => id.startsWith('iso-a'))).toBe(true);

    const list = await api('POST', '/v3/documents/list', { key: keyA, body: { limit: 200 } });
    const listed = (list.body!.memories as Array<{ id: string }>).map((m) => m.id);
    expect(listed.sort()).toEqual(['iso-a-0', 'iso-a-1', 'iso-a-2', 'iso-a-3', 'iso-a-4']);
    for (let i = 0; i < 5; i++) {
      expect((await api('GET', `/v3/documents/iso-b-${i}`, { key: keyA })).status).toBe(404);
      expect((await api('GET', `/v3/documents/iso-a-${i}`, { key: keyA })).status).toBe(200);
    }
    // An unknown id and another tenant's id answer alike: no existence oracle.
    const unknown = await api('GET', '/v3/documents/iso-z-0', { key: keyA });
    const other = await api('GET', '/v3/documents/iso-b-0', { key: keyA });
    expect([unknown.status, unknown.body!.error]).toEqual([other.status, other.body!.error]);
  });

  it('429 with Retry-After, retry-after-ms and retryAfterSeconds once a key spent its bucket', async () => {
    const k = (await newKey({ containerTag: A, rateLimitMax: 3, rateLimitTimeWindow: 60_000 })).key;
    const statuses: number[] = [];
    let last: Awaited<ReturnType<typeof api>> | null = null;
    for (let i = 0; i < 5; i++) {
      last = await api('POST', '/v3/documents/list', { key: k, body: {} });
      statuses.push(last.status);
    }
    expect(statuses).toEqual([200, 200, 200, 429, 429]);
    expect(last!.body).toMatchObject({ error: 'Too many requests', details: expect.any(String), retryAfterSeconds: 20 });
    expect(last!.headers.get('retry-after')).toBe('20');
    const ms = Number(last!.headers.get('retry-after-ms'));
    expect(ms).toBeGreaterThan(19_000);
    expect(ms).toBeLessThanOrEqual(20_000);
    // The admin key is unlimited (MEMSTREAM_ADMIN_RATE_LIMIT unset).
    for (let i = 0; i < 5; i++) expect((await admin('POST', '/v3/documents/list', {})).status).toBe(200);
  });

  it('revocation through one replica reaches the other: figures', { timeout: 60_000 }, async () => {
    const other = await startGateway(createLogger('auth-test-2', { level: 'silent' }));
    try {
      const lags: number[] = [];
      for (let i = 0; i < 20; i++) {
        const { id, key } = await newKey({ containerTag: A, rateLimitMax: 10_000 });
        // Created through the first replica, usable at once on the second (read through on a miss).
        expect((await call(other.url, 'POST', '/v3/documents/list', { key, body: {} })).status).toBe(200);
        const t0 = performance.now();
        expect((await admin('DELETE', `/v3/auth/scoped-key/${id}`)).status).toBe(200);
        const revokedAt = performance.now();
        for (;;) {
          const r = await call(other.url, 'POST', '/v3/documents/list', { key, body: {} });
          if (r.status === 401) {
            expect(r.body!.error).toBe('API key revoked');
            break;
          }
          expect(r.status).toBe(200);
          if (performance.now() - t0 > 5_000) throw new Error('the other replica still accepts the revoked key after 5 s');
        }
        lags.push(performance.now() - revokedAt);
        // The replica that revoked refused it from the moment it answered.
        expect((await api('POST', '/v3/documents/list', { key, body: {} })).status).toBe(401);
      }
      lags.sort((a, b) => a - b);
      console.log(`revocation seen by the other replica, after the DELETE answered: n=${lags.length} p50=${lags[10]!.toFixed(1)} ms max=${lags.at(-1)!.toFixed(1)} ms`);
    } finally {
      await other.close();
    }
  });

  it('key.expiring: one notice per key per day, whichever replica checks, published and logged', async () => {
    const soon = (await newKey({ containerTag: A, expiresInDays: 3 })).id;
    const later = (await newKey({ containerTag: A, expiresInDays: 30 })).id;
    const received: KeyExpiringNotice[] = [];
    const sub = gw.bus.nc.subscribe(KEY_EXPIRING_SUBJECT, {
      callback: (_e, m) => {
        received.push(KeyExpiringNotice.parse(m.json()));
      },
    });
    let now = new Date();
    const lines1: string[] = [];
    const lines2: string[] = [];
    const n1 = await startExpiryNotices({ bus: gw.bus, store: gw.store, warnDays: 7, everyMs: 3_600_000, log: capturingLogger(lines1), now: () => now });
    const n2 = await startExpiryNotices({ bus: gw.bus, store: gw.store, warnDays: 7, everyMs: 3_600_000, log: capturingLogger(lines2), now: () => now });
    try {
      // Both started with a check of their own; then both check again.
      await new Promise((r) => setTimeout(r, 300));
      const again = [...(await n1.check()), ...(await n2.check())];
      expect(again.filter((n) => n.keyId === soon)).toEqual([]);
      await gw.bus.nc.flush();
      const today = received.filter((n) => n.keyId === soon);
      expect(today).toHaveLength(1);
      expect(today[0]).toMatchObject({ type: 'key.expiring', keyId: soon, daysLeft: 2, containerTags: [A] });
      expect(received.some((n) => n.keyId === later)).toBe(false);
      expect([...lines1, ...lines2].filter((l) => l.includes(soon) && l.includes('key.expiring'))).toHaveLength(1);
      // The next day: one more.
      now = new Date(now.getTime() + 86_400_000);
      const next = [...(await n1.check()), ...(await n2.check())].filter((n) => n.keyId === soon);
      expect(next).toHaveLength(1);
      expect(next[0]!.daysLeft).toBe(1);
    } finally {
      n1.stop();
      n2.stop();
      sub.unsubscribe();
    }
  });
});
