import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startNatsServer, type NatsServerHandle } from '@memstream/cli';
import { UPLOADS_PREFIX, blobKey, blobStore, connectBus, ensureTopology, lastEvent, type BlobStore, type Bus } from '@memstream/bus';
import { SqliteChunkIndex } from '@memstream/chunk-index';
import { BLOB_BUCKET, MAX_UPLOAD_BYTES, type DocumentSubmittedData } from '@memstream/contracts';
import { createLogger, documentIdForCustomId } from '@memstream/kit';
import { SqliteDocumentViews, evolve } from '@memstream/views';
import { createApp } from '../app.js';
import { jetstreamEventLog } from '../adapters/event-log.js';
import { kvTagContexts } from '../adapters/tag-contexts.js';
import { deleteDocument, type GatewayPorts } from '../handlers/documents.js';
import { createUploadHandler } from './upload.js';

const API_KEY = 'ms_test_upload_key';

/** POST /v3/documents/file through the real express app, its multer parser and the real Object Store. */
describe('POST /v3/documents/file over real JetStream', () => {
  let dir: string;
  let nats: NatsServerHandle;
  let bus: Bus;
  let blobs: BlobStore;
  let views: SqliteDocumentViews;
  let index: SqliteChunkIndex;
  let ports: GatewayPorts;
  let server: Server;
  let url: string;
  const log = createLogger('test', { level: 'silent' });

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'memstream-upload-'));
    nats = await startNatsServer({ storeDir: path.join(dir, 'nats') });
    bus = await connectBus({ url: nats.url, name: 'upload-test', log });
    await ensureTopology(bus.jsm, { ackWaitMs: 2_000 });
    blobs = blobStore(bus);
    views = SqliteDocumentViews.open(path.join(dir, 'views.sqlite'));
    index = SqliteChunkIndex.open(path.join(dir, 'index.sqlite'));
    ports = { views, index, blobs, events: jetstreamEventLog(bus), tagContexts: await kvTagContexts(bus), now: () => new Date() };
    const app = createApp({ ports, apiKey: API_KEY, log, uploadFile: createUploadHandler({ ports, blobs, log }) });
    server = await new Promise<Server>((resolve, reject) => {
      const s = app.listen(0, '127.0.0.1', () => resolve(s));
      s.once('error', reject);
    });
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v3/documents/file`;
  });
  afterAll(async () => {
    await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
    await bus?.close();
    await views?.close();
    await index?.close();
    await nats?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const auth = { authorization: `Bearer ${API_KEY}` };

  async function post(form: FormData): Promise<{ status: number; body: Record<string, unknown> }> {
    const res = await fetch(url, { method: 'POST', headers: auth, body: form });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  }

  async function postRaw(body: string | ReadableStream<Uint8Array>, contentType: string): Promise<{ status: number; body: Record<string, unknown> }> {
    // redirect 'error': otherwise fetch clones the request to be able to follow a redirect, and
    // the clone tees a stream body, keeping every byte sent in this (the gateway's) process.
    const res = await fetch(url, { method: 'POST', headers: { ...auth, 'content-type': contentType }, body, duplex: 'half', redirect: 'error' });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  }

  function fileForm(text: string, filename = 'note.txt', fields: Record<string, string> = {}): FormData {
    const form = new FormData();
    for (const [k, v] of Object.entries(fields)) form.append(k, v);
    form.append('file', new Blob([text], { type: 'text/plain' }), filename);
    return form;
  }

  async function submitted(id: string): Promise<DocumentSubmittedData> {
    const last = await lastEvent(bus, id, 'submitted');
    if (last?.event.type !== 'document.submitted.v1') throw new Error(`no submitted event for ${id}`);
    return last.event.data;
  }

  /** Every upload the Object Store holds now, read from its metadata subjects (the port has no listing). */
  async function liveUploads(): Promise<Set<string>> {
    const stream = `OBJ_${BLOB_BUCKET}`;
    const si = await bus.jsm.streams.info(stream, { subjects_filter: `$O.${BLOB_BUCKET}.M.>` });
    const out = new Set<string>();
    for (const subject of Object.keys(si.state.subjects ?? {})) {
      const m = await bus.jsm.streams.getMessage(stream, { last_by_subj: subject });
      const info = m?.json<{ name: string; deleted?: boolean }>();
      if (info && !info.deleted && info.name.startsWith(UPLOADS_PREFIX)) out.add(info.name);
    }
    return out;
  }

  /**
   * A multipart body with one file part of `size` bytes, generated chunk by chunk as fetch pulls
   * it: nothing holds the whole file. `digest` settles once the last byte was handed over.
   */
  function streamedUpload(size: number, boundary = 'memstreamBoundary7MA4YWxkTrZu0gW') {
    const enc = new TextEncoder();
    const head = enc.encode(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.bin"\r\nContent-Type: application/octet-stream\r\n\r\n`);
    const tail = enc.encode(`\r\n--${boundary}--\r\n`);
    const hash = createHash('sha256');
    let sent = 0;
    let done: (hex: string) => void = () => undefined;
    const digest = new Promise<string>((r) => (done = r));
    const CHUNK = 64 * 1024;
    const body = new ReadableStream<Uint8Array>({
      start(c) {
        c.enqueue(head);
      },
      pull(c) {
        if (sent >= size) {
          done(hash.digest('hex'));
          c.enqueue(tail);
          c.close();
          return;
        }
        const n = Math.min(CHUNK, size - sent);
        const chunk = new Uint8Array(n);
        for (let i = 0; i < n; i += 4096) chunk[i] = (sent + i) % 251;
        hash.update(chunk);
        sent += n;
        c.enqueue(chunk);
      },
    });
    return { body, contentType: `multipart/form-data; boundary=${boundary}`, digest };
  }

  it('a text file: 200 {id, status: queued}; the log holds a blob input and the store holds the bytes', async () => {
    const text = 'hello from a file\nsecond line\n';
    const { status, body } = await post(fileForm(text, 'hello.txt'));
    expect(status).toBe(200);
    expect(Object.keys(body).sort()).toEqual(['id', 'status']);
    expect(body.status).toBe('queued');
    const data = await submitted(body.id as string);
    const bytes = new TextEncoder().encode(text);
    const sha = createHash('sha256').update(bytes).digest('hex');
    expect(data.input).toMatchObject({ kind: 'blob', filename: 'hello.txt', mimeType: 'text/plain', size: bytes.length, sha256: sha });
    expect(data.contentHash).toBe(sha);
    if (data.input.kind !== 'blob') throw new Error('not a blob');
    expect(data.input.key.startsWith(UPLOADS_PREFIX)).toBe(true);
    expect(Buffer.from((await blobs.get(data.input.key))!).toString('utf8')).toBe(text);
    // The owner pointer that lets a delete find the upload.
    const pointer = blobKey(body.id as string, 'uploads', data.input.key.slice(UPLOADS_PREFIX.length));
    expect(Buffer.from((await blobs.get(pointer))!).toString('utf8')).toBe(data.input.key);
  });

  it('parses metadata and containerTags sent as JSON strings, and containerTags as one bare tag', async () => {
    const a = await post(fileForm('tagged one', 'a.txt', { containerTag: 'team', containerTags: '["alpha","team"]', metadata: '{"source":"upload","n":3,"ok":true}' }));
    expect(a.status).toBe(200);
    const da = await submitted(a.body.id as string);
    expect(da.containerTags).toEqual(['team', 'alpha']);
    expect(da.metadata).toEqual({ source: 'upload', n: 3, ok: true });

    const b = await post(fileForm('tagged two', 'b.txt', { containerTags: 'solo', mimeType: 'text/markdown', filepath: '/docs/b.md' }));
    expect(b.status, JSON.stringify(b.body)).toBe(200);
    const db = await submitted(b.body.id as string);
    expect(db.containerTags).toEqual(['solo']);
    expect(db.filepath).toBe('/docs/b.md');
    // The declared type wins over the part's own Content-Type.
    expect(db.input).toMatchObject({ kind: 'blob', mimeType: 'text/markdown' });
    expect(db.mimeType).toBe('text/markdown');
  });

  it('a customId gives the deterministic document id', async () => {
    const { status, body } = await post(fileForm('custom id file', 'c.txt', { customId: 'upload-custom-1' }));
    expect(status).toBe(200);
    expect(body.id).toBe(documentIdForCustomId('upload-custom-1'));
    expect((await submitted(body.id as string)).customId).toBe('upload-custom-1');
  });

  it('re-uploading an unchanged file for a processed document answers its status and keeps no second blob', async () => {
    const first = await post(fileForm('same bytes twice', 's.txt', { customId: 'upload-same' }));
    expect(first.status).toBe(200);
    const id = first.body.id as string;
    // Stand in for the pipeline: the projection marked the document done.
    const last = await lastEvent(bus, id, 'submitted');
    const view = evolve(null, last!.event)!;
    expect(await views.put({ ...view, status: 'done' }, 0)).toBe(true);

    const before = await liveUploads();
    const again = await post(fileForm('same bytes twice', 's.txt', { customId: 'upload-same' }));
    expect(again).toEqual({ status: 200, body: { id, status: 'done' } });
    expect(await liveUploads()).toEqual(before);
  });

  it('fileType image without mimeType: 400 naming mimeType, and the stored bytes are deleted', async () => {
    const before = await liveUploads();
    const { status, body } = await post(fileForm('not really an image', 'x.png', { fileType: 'image' }));
    expect(status).toBe(400);
    expect(body.error).toBe('Invalid request');
    expect(String(body.details)).toMatch(/^mimeType: /);
    expect(await liveUploads()).toEqual(before);
  });

  it('metadata that is not JSON: 400 naming metadata', async () => {
    const before = await liveUploads();
    const { status, body } = await post(fileForm('x', 'x.txt', { metadata: '{not json' }));
    expect(status).toBe(400);
    expect(String(body.details)).toMatch(/metadata: metadata must be a JSON string/);
    expect(await liveUploads()).toEqual(before);
  });

  it('no file, a file under another name, or an unknown field: 400', async () => {
    const none = new FormData();
    none.append('containerTag', 'x');
    const a = await post(none);
    expect(a.status).toBe(400);
    expect(String(a.body.details)).toMatch(/^file: required/);

    const other = new FormData();
    other.append('document', new Blob(['x']), 'x.txt');
    const b = await post(other);
    expect(b.status).toBe(400);
    expect(String(b.body.details)).toMatch(/^document: unexpected file field/);

    const c = await post(fileForm('x', 'x.txt', { colour: 'blue' }));
    expect(c.status).toBe(400);
    expect(String(c.body.details)).toMatch(/colour/);
  });

  it('over a part limit (two files, a 64 KB+ field, 21 fields): 400 naming the limit, nothing stored', async () => {
    const before = await liveUploads();
    const two = fileForm('first', 'a.txt');
    two.append('file', new Blob(['second']), 'b.txt');
    const a = await post(two);
    expect(a.status).toBe(400);
    expect(String(a.body.details)).toMatch(/^file: /);

    const b = await post(fileForm('x', 'x.txt', { filepath: 'p'.repeat(64 * 1024 + 1) }));
    expect(b.status).toBe(400);
    expect(String(b.body.details)).toMatch(/^filepath: value too long \(limit fieldSize: 65536 bytes\)/);

    // The file first: it is stored before the 21st field breaks the limit, and must then be removed.
    const many = new FormData();
    many.append('file', new Blob(['stored, then removed']), 'x.txt');
    for (let i = 0; i < 21; i++) many.append(`f${i}`, 'x');
    const c = await post(many);
    expect(c.status).toBe(400);
    expect(String(c.body.details)).toMatch(/limit fields: 20/);
    expect(await liveUploads()).toEqual(before);
  });

  it('broken multipart is a 400 with {error, details}, never a 5xx, and leaves nothing stored', async () => {
    const before = await liveUploads();
    const boundary = 'cutBoundary42';
    const truncated = `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="cut.txt"\r\nContent-Type: text/plain\r\n\r\nthe body stops in the middle of the fi`;
    const cut = await postRaw(truncated, `multipart/form-data; boundary=${boundary}`);
    expect(cut.status).toBe(400);
    expect(cut.body).toEqual({ error: 'Invalid multipart body', details: 'body: Unexpected end of form' });

    const noBoundary = await postRaw('--x\r\n\r\n', 'multipart/form-data');
    expect(noBoundary.status).toBe(400);
    expect(String(noBoundary.body.details)).toMatch(/Boundary not found/);

    const badHeader = await postRaw(`--${boundary}\r\n${'X'.repeat(20_000)}\r\n\r\nx\r\n--${boundary}--\r\n`, `multipart/form-data; boundary=${boundary}`);
    expect(badHeader.status).toBe(400);
    expect(typeof badHeader.body.details).toBe('string');

    const json = await postRaw('{"content":"x"}', 'application/json');
    expect(json.status).toBe(400);
    expect(String(json.body.details)).toMatch(/multipart\/form-data/);
    expect(await liveUploads()).toEqual(before);
  });

  it(
    'streams: gateway RSS while uploading 40 MB (printed, not asserted)',
    async () => {
      // One upload first, so the one-time growth (socket and broker client buffers, JIT) is not counted.
      const warm = streamedUpload(8 * 1024 * 1024);
      expect((await postRaw(warm.body, warm.contentType)).status).toBe(200);
      const size = 40 * 1024 * 1024;
      const up = streamedUpload(size);
      const rssBefore = process.memoryUsage().rss;
      let peak = rssBefore;
      const sampler = setInterval(() => {
        peak = Math.max(peak, process.memoryUsage().rss);
      }, 5);
      const t0 = Date.now();
      const res = await postRaw(up.body, up.contentType);
      clearInterval(sampler);
      peak = Math.max(peak, process.memoryUsage().rss);
      const ms = Date.now() - t0;
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      const data = await submitted(res.body.id as string);
      expect(data.input).toMatchObject({ kind: 'blob', size, sha256: await up.digest, filename: 'big.bin' });
      const mb = (n: number) => (n / 1024 / 1024).toFixed(1);
      console.log(`[upload] 40 MB upload in ${ms} ms; gateway process RSS ${mb(rssBefore)} MB before, ${mb(peak)} MB peak: +${mb(peak - rssBefore)} MB`);
    },
    120_000,
  );

  it(
    'one byte over 50 MB: 413 {error, details}, and no upload left behind',
    async () => {
      const before = await liveUploads();
      const up = streamedUpload(MAX_UPLOAD_BYTES + 1);
      const res = await postRaw(up.body, up.contentType);
      expect(res.status).toBe(413);
      expect(res.body.error).toBe('File too large');
      expect(String(res.body.details)).toMatch(/^file: /);
      expect(await liveUploads()).toEqual(before);
    },
    120_000,
  );

  it('deleting the document deletes its upload and the pointer', async () => {
    const { body } = await post(fileForm('to be deleted', 'd.txt'));
    const id = body.id as string;
    const data = await submitted(id);
    if (data.input.kind !== 'blob') throw new Error('not a blob');
    const key = data.input.key;
    expect(await blobs.get(key)).not.toBeNull();
    // The listing the other tests rely on does see a live upload.
    expect((await liveUploads()).has(key)).toBe(true);
    await deleteDocument(ports, id);
    expect(await blobs.get(key)).toBeNull();
    expect(await blobs.get(blobKey(id, 'uploads', key.slice(UPLOADS_PREFIX.length)))).toBeNull();
    expect((await liveUploads()).has(key)).toBe(false);
  });
});
