import { afterAll, beforeAll, describe, expect, it, onTestFailed, onTestFinished } from 'vitest';
import { createHmac } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { connectBus, type Bus } from '@memstream/bus';
import { STREAM_DEAD_LETTERS, STREAM_LIFECYCLE } from '@memstream/contracts';
import { createLogger } from '@memstream/kit';
import { api, startTestStack, waitFor, type TestStack } from './support/stack.js';
import { readEvents } from './support/sse.js';

/**
 * Outbound lifecycle events over the whole stack: webhooks to a receiver on loopback (signed,
 * deduplicable, retried through an outage, scoped by tag, failures visible) and GET /v3/events.
 */

const TRANSITIONS = ['queued', 'extracting', 'chunking', 'embedding', 'done'];

interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
  json: { id: string; type: string; documentId: string; status: string; containerTags: string[]; revision: number; customId: string | null };
}

/** A webhook receiver: records what it accepts; while `down`, answers 503 to everything. */
function receiver() {
  const accepted: Received[] = [];
  const refused: string[] = [];
  let down = false;
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      if (down) {
        refused.push(body);
        res.writeHead(503).end('down for maintenance');
        return;
      }
      accepted.push({ path: req.url ?? '/', headers: req.headers, body, json: JSON.parse(body) });
      res.writeHead(204).end();
    });
  });
  return {
    accepted,
    refused,
    setDown(v: boolean) {
      down = v;
    },
    async listen(): Promise<string> {
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      const a = server.address();
      return `http://127.0.0.1:${typeof a === 'object' && a ? a.port : 0}`;
    },
    close: () => new Promise<void>((r) => server.close(() => r())),
    at: (path: string) => accepted.filter((x) => x.path === path),
  };
}

/** Standard Webhooks verification, written here from the scheme rather than imported from the notifier. */
function verifies(secret: string, r: Received): boolean {
  const id = String(r.headers['webhook-id']);
  const ts = String(r.headers['webhook-timestamp']);
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
  const expected = 'v1,' + createHmac('sha256', key).update(`${id}.${ts}.${r.body}`).digest('base64');
  const fresh = Math.abs(Date.now() / 1000 - Number(ts)) < 300;
  return fresh && String(r.headers['webhook-signature']).split(' ').includes(expected);
}

describe('outbound lifecycle events', () => {
  let stack: TestStack;
  let client: ReturnType<typeof api>;
  let bus: Bus;
  const rx = receiver();
  let rxUrl = '';

  beforeAll(async () => {
    rxUrl = await rx.listen();
    stack = await startTestStack({
      env: {
        MEMSTREAM_WEBHOOK_ALLOW_PRIVATE: 'true',
        // Short retries: 250 ms doubling to 4 s, 8 attempts, so an outage of up to ~15 s is ridden
        // out and a dead receiver is given up after about 16 s.
        MEMSTREAM_WEBHOOK_RETRY_BASE_MS: '250',
        MEMSTREAM_WEBHOOK_RETRY_MAX_MS: '4000',
        MEMSTREAM_WEBHOOK_MAX_ATTEMPTS: '8',
        MEMSTREAM_WEBHOOK_TIMEOUT_MS: '5000',
      },
    });
    client = api(stack);
    bus = await connectBus({ url: stack.nats.url, name: 'webhooks-test', log: createLogger('test', { level: 'silent' }) });
  }, 90_000);

  afterAll(async () => {
    // CPU each service used over the whole file (Linux): what the notifier adds to a stack.
    const cpu = [...(stack?.procs.values() ?? [])].flatMap((p) => {
      try {
        const f = readFileSync(`/proc/${p.child.pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
        return [`${p.name} ${((Number(f[11]) + Number(f[12])) / 100).toFixed(1)} s`];
      } catch {
        return [];
      }
    });
    if (cpu.length) console.log(`CPU per service: ${cpu.join(', ')}`);
    await bus?.close();
    await stack?.teardown();
    await rx.close();
  });

  async function register(body: Record<string, unknown>) {
    const r = await client.call('POST', '/v3/webhooks', body);
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    return r.body as { id: string; secret: string; containerTags: string[]; events: string[] };
  }

  async function addDocs(n: number, tag: string): Promise<string[]> {
    const ids: string[] = [];
    for (let i = 0; i < n; i++) {
      const r = await client.add(`webhook document ${i} for ${tag}: ${Math.random()}`, { containerTag: tag });
      expect(r.status).toBe(200);
      ids.push(r.body.id);
    }
    return ids;
  }

  /** A scoped key for a case, or the case skipped with the reason printed when this gateway has no scoped keys. */
  const scopedKeyOrSkip = async (ctx: { skip: () => void }, body: Record<string, unknown>) => {
    const created = await client.call('POST', '/v3/auth/scoped-key', body);
    if (created.status === 404) {
      console.log(`scoped API keys are not available in this gateway: "${String(body.name)}" skipped`);
      ctx.skip();
      return undefined;
    }
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    return { id: created.body.id as string, scoped: api({ baseUrl: stack.baseUrl, apiKey: created.body.key as string }) };
  };
  const transitionsOf = (got: Received[], documentId: string) => got.filter((x) => x.json.documentId === documentId).map((x) => x.json.status);

  it('refuses bad registrations with clear 400s and never lists secrets', async () => {
    for (const [body, field] of [
      [{ url: 'ftp://example.com/hook' }, /url: url must use http or https/],
      [{ url: 'not a url' }, /url: url must be an absolute/],
      [{ url: 'https://u:p@example.com/' }, /credentials/],
      [{ url: 'https://example.com/', events: ['bogus'] }, /events\.0/],
      [{ url: 'https://example.com/', secret: 'short' }, /secret/],
      [{ url: 'https://example.com/', containerTags: ['bad tag!'] }, /containerTags\.0/],
      [{}, /url: url is required/],
    ] as const) {
      const r = await client.call('POST', '/v3/webhooks', body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.body.details).toMatch(field);
    }
    const hook = await register({ url: 'https://example.com/hook', events: ['done', 'failed'] });
    expect(hook.secret).toMatch(/^whsec_/);
    const list = await client.call('GET', '/v3/webhooks');
    const listed = list.body.webhooks.find((w: { id: string }) => w.id === hook.id);
    expect(listed).toMatchObject({ url: 'https://example.com/hook', events: ['done', 'failed'], containerTags: [] });
    expect(JSON.stringify(list.body)).not.toContain('whsec_');
    expect((await client.call('DELETE', `/v3/webhooks/${hook.id}`)).status).toBe(204);
    expect((await client.call('GET', `/v3/webhooks/${hook.id}/deliveries`)).status).toBe(404);
    expect((await client.call('DELETE', `/v3/webhooks/${hook.id}`)).status).toBe(404);
  });

  it('delivers every transition of each document once, signed, to a global webhook', async () => {
    const hook = await register({ url: `${rxUrl}/all` });
    const ids = await addDocs(3, 'wh-a');
    await waitFor('every transition of 3 documents', async () => (ids.every((id) => new Set(transitionsOf(rx.at('/all'), id)).size === 5) ? true : undefined), 60_000);
    // Room for a duplicate to show up, if the notifier sent any.
    await new Promise((r) => setTimeout(r, 750));
    const all = rx.at('/all').filter((x) => ids.includes(x.json.documentId));
    // At least once: a receiver deduplicates by the event id, and then has each transition exactly once.
    const got = [...new Map(all.map((x) => [x.json.id, x])).values()];
    console.log(`global webhook: ${all.length} deliveries accepted, ${got.length} distinct events, ${all.length - got.length} duplicates`);
    expect(got.length).toBe(15);
    for (const id of ids) expect(transitionsOf(got, id).sort()).toEqual([...TRANSITIONS].sort());
    for (const r of got) {
      expect(verifies(hook.secret, r)).toBe(true);
      expect(r.headers['webhook-id']).toBe(r.json.id);
      expect(r.json.type).toBe(`document.${r.json.status}`);
      expect(r.json.containerTags).toEqual(['wh-a']);
      expect(r.json.revision).toBeGreaterThan(0);
    }
    // A signature made with another secret does not verify: the check above can fail.
    expect(verifies('whsec_' + Buffer.alloc(32, 7).toString('base64'), got[0]!)).toBe(false);
    const d = await waitFor('every delivery recorded', async () => {
      const r = await client.call('GET', `/v3/webhooks/${hook.id}/deliveries`);
      return r.body?.counts?.delivered === 15 ? r : undefined;
    });
    expect(d.status).toBe(200);
    expect(d.body.deliveries[0]).toMatchObject({ webhookId: hook.id, status: 'delivered', lastError: null });
    await client.call('DELETE', `/v3/webhooks/${hook.id}`);
  }, 90_000);

  it('rides out a receiver outage: failed attempts are visible, then every transition arrives through retries', async () => {
    rx.setDown(true);
    // Whatever happens here, the receiver is up again for the tests after this one.
    onTestFinished(() => rx.setDown(false));
    onTestFailed(() => console.log(`refused ${rx.refused.length}; notifier log:\n${stack.logs.filter((l) => l.startsWith('notifier')).slice(-60).join('\n')}`));
    const hook = await register({ url: `${rxUrl}/outage`, containerTags: ['wh-b'] });
    const outageStarted = Date.now();
    const ids = await addDocs(2, 'wh-b');
    const retrying = await waitFor(
      'failed attempts recorded',
      async () => {
        const d = await client.call('GET', `/v3/webhooks/${hook.id}/deliveries?status=retrying`);
        const r = (d.body?.deliveries ?? []).filter((x: { attempts: number }) => x.attempts >= 3);
        return r.length > 0 ? r : undefined;
      },
      30_000,
      100,
    );
    expect(retrying[0]).toMatchObject({ status: 'retrying', lastStatusCode: 503 });
    expect(retrying[0].lastError).toMatch(/HTTP 503/);
    expect(Date.parse(retrying[0].nextRetryAt)).toBeGreaterThan(Date.parse(retrying[0].lastAttemptAt));
    expect(rx.refused.length).toBeGreaterThan(0);
    // Down for a couple of seconds at least, so several retries of every delivery fail (and well
    // under the retry budget, so none is given up).
    await new Promise((r) => setTimeout(r, Math.max(0, 2_000 - (Date.now() - outageStarted))));
    const outageMs = Date.now() - outageStarted;
    rx.setDown(false);
    console.log(`receiver outage of ${outageMs} ms: ${rx.refused.length} attempts refused with 503`);
    await waitFor('every transition after the outage', async () => (ids.every((id) => new Set(transitionsOf(rx.at('/outage'), id)).size === 5) ? true : undefined), 60_000);
    const got = [...new Map(rx.at('/outage').map((x) => [x.json.id, x])).values()];
    expect(got.length).toBe(10);
    for (const id of ids) expect(transitionsOf(got, id).sort()).toEqual([...TRANSITIONS].sort());
    for (const r of got) expect(verifies(hook.secret, r)).toBe(true);
    // The record of an attempt is written just after the receiver answers it.
    const d = await waitFor('every delivery recorded as delivered', async () => {
      const r = await client.call('GET', `/v3/webhooks/${hook.id}/deliveries`);
      return r.body?.counts?.delivered === 10 ? r : undefined;
    });
    expect(d.body.counts).toMatchObject({ delivered: 10, retrying: 0, failed: 0 });
    expect(d.body.deliveries.some((x: { attempts: number }) => x.attempts > 1)).toBe(true);
    // The notifier's /metrics counts the same attempts: the refused ones as retrying.
    const metrics = await (await fetch(`${stack.procs.get('notifier')!.opsUrl!}/metrics`)).text();
    const count = (result: string) => Number(new RegExp(`^memstream_webhook_deliveries_total\\{[^}]*result="${result}"[^}]*\\} (\\d+)`, 'm').exec(metrics)?.[1] ?? 0);
    expect(count('retrying')).toBeGreaterThanOrEqual(rx.refused.length);
    expect(count('delivered')).toBeGreaterThanOrEqual(10);
  }, 90_000);

  it('a tag-scoped webhook gets only its tag; a dead receiver ends as failed, visible and dead-lettered', async () => {
    const scoped = await register({ url: `${rxUrl}/scoped`, containerTags: ['wh-c'] });
    // Nothing listens on port 9 of loopback: every attempt is refused.
    const dead = await register({ url: 'http://127.0.0.1:9/nobody', containerTags: ['wh-c'], events: ['done'] });
    const [mine] = await addDocs(1, 'wh-c');
    const [other] = await addDocs(1, 'wh-other');
    await waitFor('the scoped webhook gets its document', async () => (new Set(transitionsOf(rx.at('/scoped'), mine!)).size === 5 ? true : undefined), 60_000);
    await waitFor('the other document done', async () => ((await client.get(other!)).body?.status === 'done' ? true : undefined), 60_000);
    const failed = await waitFor(
      'the dead receiver given up',
      async () => {
        const d = await client.call('GET', `/v3/webhooks/${dead.id}/deliveries?status=failed`);
        return d.body?.deliveries?.length === 1 ? d.body.deliveries[0] : undefined;
      },
      60_000,
      200,
    );
    expect(failed).toMatchObject({ status: 'failed', attempts: 8, documentId: mine, type: 'document.done', lastStatusCode: null, nextRetryAt: null });
    expect(failed.lastError).toMatch(/ECONNREFUSED.*after 8 attempts/);
    const letter = await bus.jsm.streams.getMessage(STREAM_DEAD_LETTERS, { last_by_subj: `dead.notifier-deliveries.${dead.id}` });
    expect(JSON.parse(new TextDecoder().decode(letter!.data))).toMatchObject({ webhookId: dead.id, event: { documentId: mine, status: 'done' } });
    expect(rx.at('/scoped').every((x) => x.json.documentId === mine)).toBe(true);
    expect(transitionsOf(rx.at('/scoped'), other!)).toEqual([]);
    await client.call('DELETE', `/v3/webhooks/${scoped.id}`);
    await client.call('DELETE', `/v3/webhooks/${dead.id}`);
  }, 90_000);

  it('a scoped API key manages only webhooks of its own tags, and streams only its tags', async (ctx) => {
    const key = await scopedKeyOrSkip(ctx, { containerTags: ['wh-s1', 'wh-s2'], name: 'webhooks test' });
    if (!key) return;
    const { scoped } = key;
    const global = await register({ url: `${rxUrl}/global-admin` });
    const own = await scoped.call('POST', '/v3/webhooks', { url: `${rxUrl}/scoped-key` });
    expect(own.status, JSON.stringify(own.body)).toBe(201);
    expect(own.body.containerTags).toEqual(['wh-s1', 'wh-s2']);
    const outside = await scoped.call('POST', '/v3/webhooks', { url: `${rxUrl}/x`, containerTags: ['wh-s1', 'wh-a'] });
    expect(outside.status).toBe(403);
    expect(outside.body.details).toMatch(/^containerTags: .*"wh-a"/);
    const listed = await scoped.call('GET', '/v3/webhooks');
    expect(listed.body.webhooks.map((w: { id: string }) => w.id)).toEqual([own.body.id]);
    expect((await scoped.call('GET', `/v3/webhooks/${global.id}/deliveries`)).status).toBe(404);
    expect((await scoped.call('DELETE', `/v3/webhooks/${global.id}`)).status).toBe(404);
    expect((await scoped.call('GET', '/v3/events?containerTag=wh-a')).status).toBe(403);
    expect((await scoped.call('DELETE', `/v3/webhooks/${own.body.id}`)).status).toBe(204);
    await client.call('DELETE', `/v3/webhooks/${global.id}`);
  });

  it("a revoked key's webhooks stop delivering and are listed as disabled, saying why", async (ctx) => {
    const key = await scopedKeyOrSkip(ctx, { containerTag: 'wh-revoke', name: 'revoked webhooks' });
    if (!key) return;
    const { scoped } = key;
    const hook = await scoped.call('POST', '/v3/webhooks', { url: `${rxUrl}/revoked-key`, events: ['done'] });
    expect(hook.status, JSON.stringify(hook.body)).toBe(201);
    // The same URL and tags again: one registration, not two deliveries of every event.
    const twin = await scoped.call('POST', '/v3/webhooks', { url: `${rxUrl}/revoked-key` });
    expect(twin.status).toBe(409);
    expect(twin.body.details).toContain(hook.body.id);
    // A witness that sees the same documents and is never disabled (the admin key's).
    const witness = await register({ url: `${rxUrl}/revoked-witness`, containerTags: ['wh-revoke'], events: ['done'] });
    const [before] = await addDocs(1, 'wh-revoke');
    await waitFor('the first done at both', async () => (rx.at('/revoked-key').length === 1 && rx.at('/revoked-witness').length === 1 ? true : undefined), 60_000, 50);
    expect(rx.at('/revoked-key')[0]!.json.documentId).toBe(before);

    expect((await client.call('DELETE', `/v3/auth/scoped-key/${key.id}`)).status).toBe(200);
    const [after] = await addDocs(1, 'wh-revoke');
    await waitFor("the witness to get the second document's done", async () => (rx.at('/revoked-witness').some((x) => x.json.documentId === after) ? true : undefined), 60_000, 50);
    // Deliveries of one event to its webhooks go out together: the revoked key's would be in by now.
    await new Promise((r) => setTimeout(r, 1_000));
    expect(rx.at('/revoked-key').map((x) => x.json.documentId)).toEqual([before]);
    const listed = (await client.call('GET', '/v3/webhooks')).body.webhooks as Array<{ id: string; disabled: unknown }>;
    expect(listed.find((w) => w.id === hook.body.id)?.disabled).toMatchObject({ reason: 'key_revoked', message: expect.stringMatching(/revoked at/) });
    expect(listed.find((w) => w.id === witness.id)?.disabled).toBeNull();
    await client.call('DELETE', `/v3/webhooks/${hook.body.id}`);
    await client.call('DELETE', `/v3/webhooks/${witness.id}`);
  }, 150_000);

  it('streams the same transitions as Server-Sent Events, in order, filtered by tag, resumable', async () => {
    const abort = new AbortController();
    const res = await fetch(`${stack.baseUrl}/v3/events?containerTag=wh-sse`, { headers: { authorization: `Bearer ${stack.apiKey}` }, signal: abort.signal });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const { events, done: reading } = await readEvents<Received['json']>(res);
    const ids = await addDocs(2, 'wh-sse');
    await addDocs(1, 'wh-not-sse');
    // A URL on loopback: the extractor refuses to fetch it, so the document fails.
    const failing = (await client.add('http://127.0.0.1:9/private', { containerTag: 'wh-sse' })).body.id as string;
    await waitFor('queued…done for both documents', async () => (ids.every((id) => events.some((e) => e.data.documentId === id && e.data.status === 'done')) ? true : undefined), 60_000);
    for (const id of ids) expect(events.filter((e) => e.data.documentId === id).map((e) => e.data.status)).toEqual(TRANSITIONS);
    await waitFor('the failure', async () => (events.some((e) => e.data.documentId === failing && e.data.status === 'failed') ? true : undefined), 30_000);
    expect(events.filter((e) => e.data.documentId === failing).map((e) => e.data.status)).toEqual(['queued', 'extracting', 'failed']);
    expect(events.find((e) => e.data.documentId === failing && e.data.status === 'failed')!.data).toMatchObject({ error: { stage: 'extracting', class: 'permanent' } });
    expect(events.every((e) => e.data.containerTags.includes('wh-sse'))).toBe(true);
    expect(events.every((e) => e.type === `document.${e.data.status}`)).toBe(true);
    const seqs = events.map((e) => e.id);
    expect([...seqs].sort((a, b) => a - b)).toEqual(seqs);
    abort.abort();
    await reading;

    // Resume after the first event: everything after it, from the stored stream.
    const first = events[0]!;
    const again = await fetch(`${stack.baseUrl}/v3/events?containerTag=wh-sse`, { headers: { authorization: `Bearer ${stack.apiKey}`, 'last-event-id': String(first.id) } });
    const reader = again.body!.getReader();
    let text = '';
    const dec = new TextDecoder();
    await waitFor('the replayed events', async () => {
      const { value } = await reader.read();
      text += dec.decode(value ?? new Uint8Array(), { stream: true });
      return (text.match(/^id: /gm) ?? []).length >= events.length - 1 ? true : undefined;
    });
    const resumed = [...text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));
    expect(resumed.slice(0, events.length - 1)).toEqual(seqs.slice(1));
    await reader.cancel();
    // The server-side consumers of both streams are gone once the clients are.
    await waitFor('event stream consumers cleaned up', async () => ((await bus.jsm.streams.info(STREAM_LIFECYCLE)).state.consumer_count === 0 ? true : undefined), 10_000, 100);

    expect((await client.call('GET', '/v3/events?containerTag=bad%20tag')).status).toBe(400);
    expect((await client.call('GET', '/v3/events?events=nope')).status).toBe(400);
    expect((await client.call('GET', '/v3/events', undefined, { 'last-event-id': 'abc' })).status).toBe(400);
  }, 90_000);
});
