import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DocumentEvent, type DocumentSubmitted } from '@memstream/contracts';
import type { Logger } from '@memstream/kit';
import { scrape } from '@memstream/telemetry';
import { createApp } from '../app.js';
import type { DocumentHead } from '../handlers/documents.js';
import { UNSEEN, portsForAdds } from '../handlers/testing.js';

const API_KEY = 'add-route-test-key-0123456789';

/** A logger that keeps its lines (with the bindings of child loggers), at debug. */
function capturingLog(lines: Array<Record<string, unknown>>, bindings: Record<string, unknown> = {}): Logger {
  const at = (level: string) => (obj: Record<string, unknown>, msg?: string) => void lines.push({ level, ...bindings, ...obj, msg });
  return { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error'), isLevelEnabled: () => true, child: (b: Record<string, unknown>) => capturingLog(lines, { ...bindings, ...b }) } as unknown as Logger;
}

/**
 * POST /v3/documents goes past the router at its exact URL (http/fast-path.ts) and through it at
 * any other spelling: both answer alike, with the same auth, errors, telemetry and trace.
 */
describe('the add route, fast and routed', () => {
  let server: Server;
  let base: string;
  const lines: Array<Record<string, unknown>> = [];
  const published: Array<{ event: DocumentEvent; headers: Record<string, string> | undefined }> = [];
  let failNext: Error | null = null;
  const heads = new Map<string, DocumentHead>();

  beforeAll(async () => {
    const ports = portsForAdds(
      {
        async head(id: string): Promise<DocumentHead> {
          return heads.get(id) ?? UNSEEN;
        },
        async publish(event: DocumentEvent, opts: { expectLastSeq?: number; headers?: Record<string, string> } = {}) {
          if (failNext) {
            const e = failNext;
            failNext = null;
            throw e;
          }
          DocumentEvent.parse(event);
          published.push({ event, headers: opts.headers });
          if (event.type === 'document.submitted.v1') heads.set(event.documentId, { submitted: event as DocumentSubmitted, submittedSeq: published.length, revision: event.revision, deleted: false, metadataUpdate: null, metadataSeq: 0 });
          return published.length;
        },
      },
      '2026-11-27T00:00:00Z',
    );
    const app = createApp({ ports, apiKey: API_KEY, log: capturingLog(lines) });
    server = app.listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  const post = (path: string, body: string, headers: Record<string, string> = {}) =>
    fetch(base + path, { method: 'POST', body, headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json', ...headers } });

  it('answers an add at the exact URL and at other spellings of it alike, publishing in the request trace', async () => {
    const traceId = 'ab'.repeat(16);
    for (const path of ['/v3/documents', '/v3/documents/', '/v3/documents?via=query', '/V3/Documents']) {
      const res = await post(path, JSON.stringify({ content: `hello from ${path}`, containerTag: 't' }), { traceparent: `00-${traceId}-${'cd'.repeat(8)}-01` });
      expect(res.status, path).toBe(200);
      expect(res.headers.get('content-type')).toBe('application/json; charset=utf-8');
      expect(res.headers.get('x-trace-id')).toBe(traceId);
      const body = (await res.json()) as { id: string; status: string };
      expect(Object.keys(body).sort()).toEqual(['id', 'status']);
      expect(body.status).toBe('queued');
      const last = published.at(-1)!;
      expect(last.event.documentId).toBe(body.id);
      expect(last.headers?.traceparent).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`));
      // The debug line of the add names the request's trace and its span, as the published event does.
      const line = lines.filter((l) => l.msg === 'document accepted').at(-1)!;
      expect(line).toMatchObject({ documentId: body.id, traceId, spanId: last.headers!.traceparent!.split('-')[2] });
    }
    const metrics = (await scrape(undefined, null)).body;
    expect(metrics).toMatch(/memstream_http_request_duration_seconds_count\{[^}]*method="POST",route="\/v3\/documents",status="200"[^}]*\} [4-9]/);
  });

  it('refuses alike on both paths: 401 without a key (the connection closed), 400 naming the body or the field', async () => {
    for (const path of ['/v3/documents', '/v3/documents/']) {
      const anon = await fetch(base + path, { method: 'POST', body: '{}', headers: { 'content-type': 'application/json' } });
      expect(anon.status).toBe(401);
      expect(anon.headers.get('connection')).toBe('close');
      expect(((await anon.json()) as { error: string }).error).toBe('Unauthorized');
      const badJson = await post(path, '{"content": ');
      expect(badJson.status).toBe(400);
      expect(await badJson.json()).toMatchObject({ error: 'Invalid JSON body' });
      const badField = await post(path, JSON.stringify({ content: 42 }));
      expect(badField.status).toBe(400);
      expect(((await badField.json()) as { details: string }).details).toMatch(/^content/);
      const tooBig = await post(path, JSON.stringify({ content: 'x'.repeat(11 * 1024 * 1024) }));
      expect(tooBig.status).toBe(413);
    }
  });

  it("a failure is a 500 {error, details}, logged with the request's trace id", async () => {
    for (const path of ['/v3/documents', '/v3/documents/']) {
      failNext = new Error('the disk is on fire');
      const res = await post(path, JSON.stringify({ content: 'x' }));
      expect(res.status).toBe(500);
      expect(await res.json()).toEqual({ error: 'Internal server error', details: 'the failure was logged; retrying may help' });
      const line = lines.filter((l) => l.msg === 'request failed').at(-1)!;
      expect(line.traceId).toBe(res.headers.get('x-trace-id'));
    }
  });

  it("a delete publishes its tombstone in the request's trace", async () => {
    const added = (await (await post('/v3/documents', JSON.stringify({ content: 'to be deleted' }))).json()) as { id: string };
    const res = await fetch(`${base}/v3/documents/${added.id}`, { method: 'DELETE', headers: { authorization: `Bearer ${API_KEY}` } });
    expect(res.status).toBe(204);
    const last = published.at(-1)!;
    expect(last.event.type).toBe('document.deleted.v1');
    expect(last.headers?.traceparent?.split('-')[1]).toBe(res.headers.get('x-trace-id'));
    expect(lines.filter((l) => l.msg === 'document deleted').at(-1)!.traceId).toBe(res.headers.get('x-trace-id'));
  });
});
