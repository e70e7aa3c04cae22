import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHmac } from 'node:crypto';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import { AckPolicy, DeliverPolicy, connectBus } from '@memstream/bus';
import { MEMORY_EVENTS_CONSUMER, MEMORY_SUBJECTS, STREAM_MEMORY } from '@memstream/contracts';
import { createLogger } from '@memstream/kit';
import Supermemory, { NotFoundError, PermissionDeniedError, BadRequestError } from 'supermemory';
import { startTestStack, waitFor, type TestStack } from './support/stack.js';
import { recordingClient, unique, waitForDoc } from './support/sdk.js';
import { readEvents } from './support/sse.js';

/**
 * The memory layer through the official SDK (client.profile, client.search, client.memories.*,
 * and client.post for what SDK 4.x has no method for), against a real memstream with the
 * memorizer and the offline extractor.
 */

/** What the SSE stream and the webhooks carry for a memory. */
type MemoryEvent = { id: string; type: string; memoryId: string; containerTag: string; containerTags: string[]; memory: string | null; version: number | null; parentMemoryId: string | null; documentId: string | null; cause: string };

/** A webhook receiver on loopback: everything it is sent, answered 204. */
async function receiver() {
  const got: Array<{ path: string; headers: IncomingHttpHeaders; body: string; json: MemoryEvent }> = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      got.push({ path: req.url ?? '/', headers: req.headers, body, json: JSON.parse(body) });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const a = server.address();
  return { url: `http://127.0.0.1:${typeof a === 'object' && a ? a.port : 0}`, at: (path: string) => got.filter((x) => x.path === path), close: () => new Promise<void>((r) => server.close(() => r())) };
}

/** Standard Webhooks verification, from the scheme. */
function verifies(secret: string, r: { headers: IncomingHttpHeaders; body: string }): boolean {
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
  const expected = 'v1,' + createHmac('sha256', key).update(`${String(r.headers['webhook-id'])}.${String(r.headers['webhook-timestamp'])}.${r.body}`).digest('base64');
  return String(r.headers['webhook-signature']).split(' ').includes(expected);
}

/** GET /v3/events read in the background: every event, in the order it came. */
async function sse(baseUrl: string, apiKey: string, query: string) {
  const abort = new AbortController();
  const res = await fetch(`${baseUrl}/v3/events?${query}`, { headers: { authorization: `Bearer ${apiKey}` }, signal: abort.signal });
  expect(res.status).toBe(200);
  const { events, done: reading } = await readEvents<MemoryEvent>(res);
  return {
    events,
    close: async () => {
      abort.abort();
      await reading;
    },
  };
}

type Hit = { id: string; memory?: string; chunk?: string; similarity: number; version?: number; context?: { parents?: Array<{ memory: string; relation: string; version?: number | null }> } };
type DocWithDreaming = { dreamingStatus?: string; memories?: Array<{ id: string; memory: string }> };

describe('memories through the official SDK', () => {
  let stack: TestStack;
  let client: Supermemory;

  beforeAll(async () => {
    // Webhook receivers of this file listen on loopback.
    stack = await startTestStack({ env: { MEMSTREAM_WEBHOOK_ALLOW_PRIVATE: 'true' } });
    ({ client } = recordingClient(stack));
    // Eight services starting on a loaded machine (MEMSTREAM_TEST_READY_MS allows each 60 s).
  }, 180_000);
  afterAll(async () => {
    await stack?.teardown();
  });

  const dreamed = (id: string) => waitForDoc(client, id, 'dreamed', (d) => (d as unknown as DocWithDreaming).dreamingStatus === 'done', 30_000);

  it('Lisbon → Berlin: the Berlin memory comes first, Lisbon only as its parent (updates); the profile names Berlin', async () => {
    const tag = unique('priya');
    const first = await client.documents.add({ content: 'My name is Priya Raman. I live in Lisbon and work as a nurse.', containerTag: tag });
    const d1 = (await dreamed(first.id)) as unknown as DocWithDreaming;
    expect(d1.memories?.map((m) => m.memory)).toEqual(expect.arrayContaining(['Priya Raman lives in Lisbon.', 'Priya Raman works as a nurse.']));
    const second = await client.documents.add({ content: 'I moved to Berlin last month.', containerTag: tag });
    await dreamed(second.id);

    const out = await client.search.memories({ q: 'where does Priya live?', containerTag: tag, include: { relatedMemories: true } });
    const hits = out.results as unknown as Hit[];
    expect(hits[0]!.memory).toBe('Priya Raman lives in Berlin.');
    expect(hits[0]!.id).toMatch(/^mem_/);
    expect(hits[0]!.version).toBe(2);
    expect(hits.some((h) => h.memory?.includes('Lisbon'))).toBe(false);
    expect(hits[0]!.context?.parents).toEqual([expect.objectContaining({ memory: 'Priya Raman lives in Lisbon.', relation: 'updates', version: -1 })]);

    // What the memorizer committed is counted per tag (by the notifier, which reads every commit once).
    const metrics = await waitFor('the update counted', async () => {
      const m = await (await fetch(`${stack.procs.get('notifier')!.opsUrl}/metrics`)).text();
      return new RegExp(`memstream_memories_total\\{[^}]*tag="${tag}"[^}]*change="updated"[^}]*\\} 1`).test(m) ? m : undefined;
    });
    expect(metrics).toMatch(new RegExp(`memstream_memories_total\\{[^}]*tag="${tag}"[^}]*change="created"[^}]*\\} [1-9]`));

    const { profile } = await client.profile({ containerTag: tag });
    expect(profile.static).toContain('Priya Raman lives in Berlin.');
    expect(profile.static.join(' ')).not.toContain('Lisbon');
    expect(profile.static).toContain("The user's name is Priya Raman.");

    // Another tag knows nothing of it; an empty tag answers empty arrays, never null.
    const other = await client.profile({ containerTag: unique('nobody'), q: 'Berlin' });
    expect(other.profile).toEqual({ static: [], dynamic: [] });
    expect(other.searchResults?.results).toEqual([]);
  });

  it('direct writes are searchable on return; update makes version 2; forget hides and include.forgottenMemories recovers', async () => {
    const tag = unique('direct');
    const written = await client.post<{ documentId: string; memories: Array<{ id: string; memory: string }> }>('/v4/memories', {
      body: { containerTag: tag, memories: [{ content: 'Ana prefers window seats on long flights.', isStatic: true }, { content: 'Ana is allergic to peanuts.' }] },
    });
    expect(written.memories).toHaveLength(2);
    const seat = written.memories[0]!;
    const found = await client.search.memories({ q: 'window seats', containerTag: tag });
    expect((found.results as unknown as Hit[])[0]).toMatchObject({ id: seat.id, memory: 'Ana prefers window seats on long flights.' });

    const v2 = await client.memories.updateMemory({ containerTag: tag, id: seat.id, newContent: 'Ana prefers aisle seats on long flights.' });
    expect(v2).toMatchObject({ version: 2, parentMemoryId: seat.id, rootMemoryId: seat.id, memory: 'Ana prefers aisle seats on long flights.' });
    const v3 = await client.memories.updateMemory({ containerTag: tag, content: 'Ana prefers aisle seats on long flights.', newContent: 'Ana prefers aisle seats, near the front.' });
    expect(v3).toMatchObject({ version: 3, parentMemoryId: v2.id, rootMemoryId: seat.id });
    const seats = (await client.search.memories({ q: 'seats', containerTag: tag })).results as unknown as Hit[];
    // Superseded versions are left out: of the chain, only version 3 is a hit.
    expect(seats.filter((h) => h.memory?.includes('seats')).map((h) => h.memory)).toEqual(['Ana prefers aisle seats, near the front.']);

    const peanut = written.memories[1]!;
    expect(await client.memories.forget({ containerTag: tag, id: peanut.id, reason: 'outdated' })).toEqual({ id: peanut.id, forgotten: true });
    const afterForget = (await client.search.memories({ q: 'peanuts allergic', containerTag: tag })).results as unknown as Hit[];
    expect(afterForget.map((h) => h.id)).not.toContain(peanut.id);
    const recovered = (await client.search.memories({ q: 'peanuts allergic', containerTag: tag, include: { forgottenMemories: true } })).results as unknown as Hit[];
    expect(recovered[0]!.id).toBe(peanut.id);
    await expect(client.memories.forget({ containerTag: tag, id: 'mem_doesnotexist000' })).rejects.toBeInstanceOf(NotFoundError);
    await expect(client.memories.forget({ containerTag: tag })).rejects.toBeInstanceOf(BadRequestError);

    const listed = await client.post<{ memoryEntries: Array<{ id: string; version: number; isLatest: boolean; history: unknown[] }>; pagination: { totalItems: number } }>('/v4/memories/list', { body: { containerTags: [tag] } });
    expect(listed.pagination.totalItems).toBe(4);
    expect(listed.memoryEntries.find((e) => e.id === v3.id)).toMatchObject({ version: 3, isLatest: true, history: [expect.anything(), expect.anything(), expect.anything()] });
  });

  it('past forgetAfter a memory is hidden; forget-matching previews, then forgets', async () => {
    const tag = unique('expire');
    const past = new Date(Date.now() - 60_000).toISOString();
    await client.post('/v4/memories', {
      body: { containerTag: tag, memories: [{ content: 'The dentist appointment is at noon.', forgetAfter: past }, { content: 'The gym closes at ten tonight.' }, { content: 'The gym opens at six.' }] },
    });
    expect((await client.search.memories({ q: 'dentist appointment', containerTag: tag })).results.map((h) => (h as unknown as Hit).memory)).not.toContain('The dentist appointment is at noon.');
    const preview = await client.post<{ dryRun: boolean; count: number; candidates: Array<{ memory: string }> }>('/v4/memories/forget-matching', { body: { containerTag: tag, query: 'gym', dryRun: true, threshold: 0.3 } });
    expect(preview).toMatchObject({ dryRun: true, count: 2 });
    const done = await client.post<{ dryRun: boolean; count: number }>('/v4/memories/forget-matching', { body: { containerTag: tag, query: 'gym', threshold: 0.3 } });
    expect(done).toMatchObject({ dryRun: false, count: 2 });
    const left = (await client.search.memories({ q: 'gym', containerTag: tag })).results as unknown as Hit[];
    expect(left.filter((h) => h.memory?.includes('gym'))).toEqual([]);
  });

  it('superrag makes no memories; documents mode answers chunks, hybrid both kinds', async () => {
    const tag = unique('rag');
    const rag = await client.documents.add({ content: 'I live in Porto and I work as a carpenter building oak furniture.', containerTag: tag, taskType: 'superrag' });
    const mem = await client.documents.add({ content: 'I really enjoy sailing along the coast on summer weekends.', containerTag: tag });
    await dreamed(mem.id);
    const ragDoc = await waitForDoc(client, rag.id, 'done', (d) => d.status === 'done');
    expect((ragDoc as unknown as DocWithDreaming).dreamingStatus).toBeUndefined();
    const memories = (await client.search.memories({ q: 'Porto carpenter oak furniture', containerTag: tag })).results as unknown as Hit[];
    expect(memories.every((h) => !h.memory?.includes('Porto'))).toBe(true);
    const documents = (await client.search({ q: 'Porto carpenter oak furniture', containerTag: tag, searchMode: 'documents' })).results as unknown as Hit[];
    expect(documents[0]!.chunk).toContain('Porto');
    const hybrid = (await client.search({ q: 'sailing coast Porto carpenter', containerTag: tag, searchMode: 'hybrid', limit: 4 })).results as unknown as Hit[];
    expect(hybrid.some((h) => h.memory !== undefined && h.chunk === undefined)).toBe(true);
    expect(hybrid.some((h) => h.chunk !== undefined && h.memory === undefined)).toBe(true);
  });

  it('no memory, profile or hit crosses a container tag or a scoped key', async () => {
    const mine = unique('mine');
    const theirs = unique('theirs');
    await client.post('/v4/memories', { body: { containerTag: theirs, memories: [{ content: 'The vault code is 4411.', isStatic: true }] } });
    await client.post('/v4/memories', { body: { containerTag: mine, memories: [{ content: 'My locker code is 9090.', isStatic: true }] } });
    const key = await client.post<{ key: string }>('/v3/auth/scoped-key', { body: { containerTag: mine, name: 'mine only' } });
    const { client: scoped } = recordingClient(stack, { apiKey: key.key });
    const hits = (await scoped.search.memories({ q: 'vault code locker code' })).results as unknown as Hit[];
    expect(hits.map((h) => h.memory)).toEqual(['My locker code is 9090.']);
    await expect(scoped.profile({ containerTag: theirs })).rejects.toBeInstanceOf(PermissionDeniedError);
    await expect(scoped.search.memories({ q: 'vault', containerTag: theirs })).rejects.toBeInstanceOf(PermissionDeniedError);
    const theirMemory = (await client.search.memories({ q: 'vault code', containerTag: theirs })).results[0] as unknown as Hit;
    await expect(scoped.memories.forget({ containerTag: mine, id: theirMemory.id })).rejects.toBeInstanceOf(NotFoundError);
    await expect(scoped.memories.updateMemory({ containerTag: theirs, id: theirMemory.id, newContent: 'x' })).rejects.toBeInstanceOf(PermissionDeniedError);
    const listed = await scoped.post<{ memoryEntries: Array<{ memory: string }> }>('/v4/memories/list', { body: {} });
    expect(listed.memoryEntries.map((e) => e.memory)).toEqual(['My locker code is 9090.']);
  });

  it('/v3/settings (client.settings): per key scope, secrets never answered in full; chunkSize and excludeItems shape what is added next', async () => {
    const tag = unique('settings');
    const key = await client.post<{ key: string }>('/v3/auth/scoped-key', { body: { containerTag: tag, name: 'settings' } });
    const { client: scoped } = recordingClient(stack, { apiKey: key.key });
    const upd = await scoped.settings.update({ chunkSize: 64, excludeItems: ['peanut'], notionClientId: 'notion-app', notionClientSecret: 'secret_abcdefghijkl1234' });
    expect(upd.updated).toEqual({ chunkSize: 64, excludeItems: ['peanut'], notionClientId: 'notion-app', notionClientSecret: '…1234' });
    const got = await scoped.settings.get();
    expect(got).toEqual({ chunkSize: 64, excludeItems: ['peanut'], notionClientId: 'notion-app', notionClientSecret: '…1234' });
    // The admin key's settings are its own; null resets a field; bad input is a 400.
    expect(await client.settings.get()).not.toHaveProperty('chunkSize');
    await scoped.settings.update({ notionClientId: null });
    expect(await scoped.settings.get()).not.toHaveProperty('notionClientId');
    await expect(scoped.settings.update({ chunkSize: 5 })).rejects.toBeInstanceOf(BadRequestError);
    await expect(scoped.settings.update({ includeItems: { a: 1 } })).rejects.toBeInstanceOf(BadRequestError);
    await expect(scoped.patch('/v3/settings', { body: { colour: 'blue' } })).rejects.toBeInstanceOf(BadRequestError);
    const openapi = (await (await fetch(`${stack.baseUrl}/openapi.json`, { headers: { authorization: `Bearer ${stack.apiKey}` } })).json()) as { paths: Record<string, object> };
    expect(Object.keys(openapi.paths['/v3/settings'] ?? {}).sort()).toEqual(['get', 'patch']);

    const sentences = Array.from({ length: 30 }, (_, i) => `Entry ${i}: the weekly ledger of the bakery lists flour, butter and sugar deliveries in detail.`).join(' ');
    const doc = await scoped.documents.add({ content: `I am allergic to peanuts since childhood. I live in Porto. ${sentences}` });
    const done = (await waitForDoc(scoped, doc.id, 'dreamed', (d) => (d as unknown as DocWithDreaming).dreamingStatus === 'done', 30_000)) as unknown as DocWithDreaming & { chunkCount: number };
    expect(done.memories?.map((m) => m.memory)).toContain('The user lives in Porto.');
    expect(done.memories?.some((m) => /peanut/i.test(m.memory))).toBe(false);
    // ~600 tokens of text in chunks of at most 64 tokens (the service default is 512).
    expect(done.chunkCount).toBeGreaterThan(5);
  });

  it('/v4/conversations: one document per conversation; later messages append and teach', async () => {
    const tag = unique('conv');
    const conversationId = unique('c');
    const a = await client.post<{ id: string; conversationId: string; status: string }>('/v4/conversations', {
      body: { conversationId, containerTag: tag, messages: [{ role: 'user', content: 'Hi! I work at Siemens as an engineer.' }, { role: 'assistant', content: 'Nice to meet you, how can I help?' }] },
    });
    expect(a).toMatchObject({ conversationId });
    await dreamed(a.id);
    const b = await client.post<{ id: string }>('/v4/conversations', {
      body: { conversationId, containerTag: tag, messages: [{ role: 'user', content: 'I joined Bosch last week, actually.' }] },
    });
    expect(b.id).toBe(a.id);
    await waitFor('the appended message is memorized', async () => {
      const { profile } = await client.profile({ containerTag: tag });
      return profile.static.includes('The user works at Bosch.') ? profile : undefined;
    }, 30_000, 100);
    const doc = await client.documents.get(a.id);
    expect(JSON.parse(doc.content!)).toHaveLength(3);
    const { profile } = await client.profile({ containerTag: tag });
    expect(profile.static).not.toContain('The user works at Siemens.');
  });
  it('memory events reach GET /v3/events and webhooks (signed, in order, counted in /metrics); another tag and its key see none', async () => {
    const tag = unique('events');
    const other = unique('events-other');
    const rx = await receiver();
    const MEMORY_EVENTS = ['memory.created', 'memory.updated', 'memory.forgotten'];
    const streams: Array<{ close(): Promise<void> }> = [];
    try {
      const hook = await client.post<{ id: string; secret: string }>('/v3/webhooks', { body: { url: `${rx.url}/mine`, containerTags: [tag], events: MEMORY_EVENTS } });
      // Without `events`: document transitions only, as before memory events existed.
      await client.post('/v3/webhooks', { body: { url: `${rx.url}/docs-only`, containerTags: [tag] } });
      const otherKey = await client.post<{ key: string }>('/v3/auth/scoped-key', { body: { containerTag: other, name: 'the other tag' } });
      const { client: otherClient } = recordingClient(stack, { apiKey: otherKey.key });
      await otherClient.post('/v3/webhooks', { body: { url: `${rx.url}/other`, events: MEMORY_EVENTS } });
      const mine = await sse(stack.baseUrl, stack.apiKey, `containerTag=${tag}&events=${MEMORY_EVENTS.join(',')}`);
      const theirs = await sse(stack.baseUrl, otherKey.key, `events=${MEMORY_EVENTS.join(',')}`);
      streams.push(mine, theirs);

      // A taskType: memory document, then a direct write, its update (version 2) and its forgetting.
      const doc = await client.documents.add({ content: 'My name is Lena Ortiz. I live in Porto.', containerTag: tag });
      const taught = ((await dreamed(doc.id)) as unknown as DocWithDreaming).memories ?? [];
      expect(taught.length).toBeGreaterThanOrEqual(2);
      const written = await client.post<{ memories: Array<{ id: string }> }>('/v4/memories', { body: { containerTag: tag, memories: [{ content: 'Lena keeps bees on her roof.' }] } });
      const bees = written.memories[0]!;
      const v2 = await client.memories.updateMemory({ containerTag: tag, id: bees.id, newContent: 'Lena keeps bees in her garden.' });
      await client.memories.forget({ containerTag: tag, id: v2.id, reason: 'the bees left' });
      // The other tag's own memory: its key's stream and webhook do work, and get only this.
      await otherClient.post('/v4/memories', { body: { containerTag: other, memories: [{ content: 'Omar collects vinyl records.' }] } });

      const expected = [
        ...taught.map((m) => ['memory.created', m.id]),
        ['memory.created', bees.id],
        ['memory.updated', v2.id],
        ['memory.forgotten', v2.id],
      ];
      await waitFor('every memory event on the stream', async () => (mine.events.length >= expected.length ? true : undefined), 30_000, 50);
      await waitFor('every memory event at the webhook', async () => (rx.at('/mine').length >= expected.length ? true : undefined), 30_000, 50);
      await waitFor("the other tag's event at its stream and webhook", async () => (theirs.events.length >= 1 && rx.at('/other').length >= 1 ? true : undefined), 30_000, 50);
      await waitFor('the document transitions at the default webhook', async () => (rx.at('/docs-only').some((x) => x.json.type === 'document.done') ? true : undefined), 30_000, 50);
      // Room for a stray or duplicate event to show up.
      await new Promise((r) => setTimeout(r, 750));

      // The stream: exactly these, in the order they were committed (the document's memories, in
      // any order among themselves, as one commit; then the write, its update, its forgetting).
      const got = mine.events.map((e) => [e.data.type, e.data.memoryId]);
      const n = taught.length;
      expect(got.slice(0, n).sort()).toEqual(expected.slice(0, n).sort());
      expect(got.slice(n)).toEqual(expected.slice(n));
      expect(mine.events.every((e) => e.type === e.data.type && e.data.containerTag === tag && e.data.containerTags.join() === tag)).toBe(true);
      const seqs = mine.events.map((e) => e.id);
      expect([...seqs].sort((a, b) => a - b)).toEqual(seqs);
      expect(mine.events[0]!.data).toMatchObject({ documentId: doc.id, cause: 'extraction', version: 1 });
      expect(mine.events.find((e) => e.data.memoryId === bees.id)!.data).toMatchObject({ cause: 'direct-write', memory: 'Lena keeps bees on her roof.', version: 1 });
      expect(mine.events.find((e) => e.data.type === 'memory.updated')!.data).toMatchObject({ version: 2, parentMemoryId: bees.id, memory: 'Lena keeps bees in her garden.', cause: 'update' });
      expect(mine.events.at(-1)!.data).toMatchObject({ type: 'memory.forgotten', memoryId: v2.id, forgotten: { cause: 'user', reason: 'the bees left' } });

      // The webhook: the same events, once each, in the same order, signed; the id is the webhook-id.
      const delivered = rx.at('/mine');
      expect(delivered.map((x) => x.json.id)).toEqual(mine.events.map((e) => e.data.id));
      for (const r of delivered) {
        expect(verifies(hook.secret, r)).toBe(true);
        expect(r.headers['webhook-id']).toBe(r.json.id);
      }
      expect(rx.at('/docs-only').every((x) => x.json.type.startsWith('document.'))).toBe(true);

      // Another tag's key: its own memory only, on its stream and at its webhook.
      expect(theirs.events.map((e) => [e.data.type, e.data.containerTag, e.data.memory])).toEqual([['memory.created', other, 'Omar collects vinyl records.']]);
      expect(rx.at('/other').map((x) => x.json.containerTag)).toEqual([other]);

      // The deliveries say which memory each was; /metrics counts every writer's changes once.
      const d = await waitFor('the deliveries recorded', async () => {
        const r = await client.get<{ deliveries: Array<{ memoryId: string | null; type: string; status: string }>; counts: { delivered: number } }>(`/v3/webhooks/${hook.id}/deliveries`);
        return r.counts.delivered === expected.length ? r : undefined;
      });
      expect(d.deliveries.map((x) => x.memoryId).sort()).toEqual(expected.map((e) => e[1]).sort());
      const metrics = await waitFor('the memory metrics', async () => {
        const m = await (await fetch(`${stack.procs.get('notifier')!.opsUrl}/metrics`)).text();
        return new RegExp(`memstream_memories_total\\{[^}]*tag="${tag}"[^}]*change="forgotten"[^}]*\\} 1`).test(m) ? m : undefined;
      });
      const count = (change: string) => Number(new RegExp(`^memstream_memories_total\\{[^}]*tag="${tag}"[^}]*change="${change}"[^}]*\\} (\\d+)`, 'm').exec(metrics)?.[1] ?? 0);
      expect({ created: count('created'), updated: count('updated'), forgotten: count('forgotten') }).toEqual({ created: taught.length + 1, updated: 1, forgotten: 1 });

      // A replay: the notifier's MEMORY consumer made again from the start of the log, so it reads
      // every commit of this file again. Nothing already announced goes out again, nor is counted again.
      const bus = await connectBus({ url: stack.nats.url, name: 'memory-events-replay', log: createLogger('test', { level: 'silent' }) });
      try {
        await bus.jsm.consumers.delete(STREAM_MEMORY, MEMORY_EVENTS_CONSUMER);
        await bus.jsm.consumers.add(STREAM_MEMORY, {
          durable_name: MEMORY_EVENTS_CONSUMER,
          ack_policy: AckPolicy.Explicit,
          deliver_policy: DeliverPolicy.All,
          filter_subject: MEMORY_SUBJECTS,
          ack_wait: 30_000_000_000,
          max_deliver: -1,
        });
        const last = (await bus.jsm.streams.info(STREAM_MEMORY)).state.last_seq;
        await waitFor(
          'the whole MEMORY log read again',
          async () => {
            const c = await bus.jsm.consumers.info(STREAM_MEMORY, MEMORY_EVENTS_CONSUMER);
            return c.ack_floor.stream_seq >= last ? c : undefined;
          },
          30_000,
          100,
        );
      } finally {
        await bus.close();
      }
      await new Promise((r) => setTimeout(r, 750));
      expect(rx.at('/mine')).toHaveLength(expected.length);
      expect(mine.events).toHaveLength(expected.length);
      expect(rx.at('/other')).toHaveLength(1);
      const after = await (await fetch(`${stack.procs.get('notifier')!.opsUrl}/metrics`)).text();
      const countAfter = (change: string) => Number(new RegExp(`^memstream_memories_total\\{[^}]*tag="${tag}"[^}]*change="${change}"[^}]*\\} (\\d+)`, 'm').exec(after)?.[1] ?? 0);
      expect([countAfter('created'), countAfter('updated'), countAfter('forgotten')]).toEqual([taught.length + 1, 1, 1]);
    } finally {
      for (const s of streams) await s.close();
      await rx.close();
    }
  }, 120_000);
});
