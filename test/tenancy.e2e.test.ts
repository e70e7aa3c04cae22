import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectBus, lastEvent, type Bus } from '@memstream/bus';
import { createLogger } from '@memstream/kit';
import { SqliteDocumentViews, type DocumentView } from '@memstream/views';
import { api, startTestStack, waitFor, type TestStack } from './support/stack.js';

const silent = createLogger('test', { level: 'silent' });
/** A small answer cap for this stack, so a test can pass it with a few documents. */
const ANSWER_CAP = 400_000;

/**
 * Issue 12: one tenant cannot hurt another, and deletion deletes. Each case drives real service
 * processes over a private nats-server.
 */
describe('deletion by selector, over the log', () => {
  let stack: TestStack;
  let bus: Bus;
  let http: ReturnType<typeof api>;

  beforeAll(async () => {
    // The gateway alone at first: nothing projects, so the view store knows none of the documents
    // added below — the state the view is in for documents still in flight.
    // The fairness cases stop the stages while the projection records what is accepted: one process per
    // service (as in Kubernetes), since under ./memstream up the indexer shares its process with the projection.
    stack = await startTestStack({ layout: 'per-service', services: ['gateway'], env: { MEMSTREAM_MAX_ANSWER_BYTES: String(ANSWER_CAP) } });
    bus = await connectBus({ url: stack.nats.url, name: 'tenancy-test', log: silent });
    http = api(stack);
  }, 60_000);

  afterAll(async () => {
    await bus?.close();
    await stack?.teardown();
  });

  async function addMany(n: number, extra: (i: number) => Record<string, unknown>): Promise<string[]> {
    const res = await Promise.all(Array.from({ length: n }, (_, i) => http.add(`document ${i} of a bulk-delete race`, extra(i))));
    for (const r of res) expect(r.status).toBe(200);
    return res.map((r) => r.body.id as string);
  }

  /** Nothing of these documents left: no view, a tombstone in the log for each. */
  async function expectAllGone(ids: string[], listBody: Record<string, unknown>): Promise<void> {
    let left: unknown[] = [];
    await waitFor(
      'the list to be empty',
      async () => {
        const list = await http.call('POST', '/v3/documents/list', { ...listBody, limit: 200 });
        left = list.body.memories.map((m: { id: string; status: string }) => `${m.id}:${m.status}`);
        return list.body.pagination.totalItems === 0 ? true : undefined;
      },
      10_000,
      100,
    ).catch((err) => {
      throw new Error(`${String(err)}; left: ${JSON.stringify(left)}`);
    });
    for (const id of ids) {
      expect((await http.get(id)).status, id).toBe(404);
      expect((await lastEvent(bus, id, 'deleted'))?.event.type, id).toBe('document.deleted.v1');
    }
  }

  it('an empty containerTags or ids is refused with 400, and deletes nothing', async () => {
    const [id] = await addMany(1, () => ({ containerTag: 'empty-selector' }));
    for (const body of [{ containerTags: [] }, { ids: [] }, { ids: [id], containerTags: [] }]) {
      const r = await http.call('DELETE', '/v3/documents/bulk', body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.body.error).toBeTruthy();
      expect(r.body.details).toMatch(/must not be empty/);
    }
    expect((await http.get(id!)).status).toBe(200);
    expect(await lastEvent(bus, id!, 'deleted')).toBeNull();
  });

  it('by container tag: every document accepted before the delete goes, projected or not', async () => {
    const ids = await addMany(50, () => ({ containerTag: 'race-tag' }));
    const keep = await addMany(3, () => ({ containerTag: 'race-other' }));
    const r = await http.call('DELETE', '/v3/documents/bulk', { containerTags: ['race-tag'] });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ success: true, deletedCount: 50 });
    // The projection catches up afterwards: the tombstones win over the submissions it applies.
    if (!stack.procs.has('projection')) await stack.start('projection');
    await expectAllGone(ids, { containerTags: ['race-tag'] });
    for (const id of keep) expect((await http.get(id)).status).toBe(200);
  }, 60_000);

  it('by filepath prefix: the same', async () => {
    const ids = await addMany(50, (i) => ({ containerTag: 'race-path', filepath: `/race/dir${i % 3}/f${i}.md` }));
    const keep = await addMany(2, (i) => ({ containerTag: 'race-path', filepath: `/elsewhere/f${i}.md` }));
    const r = await http.call('DELETE', '/v3/documents/bulk', { filepath: '/race/' });
    expect(r.body).toMatchObject({ success: true, deletedCount: 50 });
    await expectAllGone(ids, { containerTags: ['race-path'], filepath: '/race/' });
    for (const id of keep) expect((await http.get(id)).status).toBe(200);
  }, 60_000);

  it('a container tag: settings and counts, then deleted with all its documents', async () => {
    const tag = 'whole-tag';
    const patched = await http.call('PATCH', `/v3/container-tags/${tag}`, { entityContext: 'notes about kettles' });
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({ containerTag: tag, entityContext: 'notes about kettles' });
    const ids = await addMany(5, () => ({ containerTag: tag }));
    const shared = (await http.add('in two tags', { containerTags: [tag, 'whole-tag-neighbour'] })).body.id as string;
    await waitFor('the view to count them', async () => {
      const got = await http.call('GET', `/v3/container-tags/${tag}`);
      return got.body.documentCount === 6 ? got.body : undefined;
    });
    expect((await http.call('PATCH', `/v3/container-tags/${tag}`, { entityContext: 5 })).status).toBe(400);
    expect((await http.call('PATCH', `/v3/container-tags/${tag}`, { other: 'x' })).status).toBe(400);

    const del = await http.call('DELETE', `/v3/container-tags/${tag}`);
    expect(del.status).toBe(200);
    expect(del.body).toMatchObject({ success: true, containerTag: tag, deletedCount: 6 });
    await expectAllGone([...ids, shared], { containerTags: [tag] });
    const openapi = await http.call('GET', '/openapi.json');
    for (const m of ['get', 'patch', 'delete']) expect(openapi.body.paths['/v3/container-tags/{tag}']?.[m], m).toBeDefined();
    const after = await http.call('GET', `/v3/container-tags/${tag}`);
    expect(after.body).toMatchObject({ containerTag: tag, entityContext: null, documentCount: 0 });
  }, 60_000);

  async function scopedKey(tag: string): Promise<string> {
    const r = await http.call('POST', '/v3/auth/scoped-key', { containerTag: tag, rateLimitMax: 10_000 });
    expect(r.status).toBe(200);
    return r.body.key as string;
  }

  it('metadata over the limits is refused with 400 naming metadata; within them it is kept', async () => {
    const ok = await http.add('small metadata', { containerTag: 'meta', metadata: { source: 'x'.repeat(2048), n: 1, list: ['a', 'b'] } });
    expect(ok.status).toBe(200);
    const cases: Array<Record<string, unknown>> = [
      { big: 'x'.repeat(2049) },
      Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`k${i}`, i])),
      Object.fromEntries(Array.from({ length: 10 }, (_, i) => [`k${i}`, 'y'.repeat(2000)])),
      { list: Array.from({ length: 101 }, () => 'z') },
    ];
    for (const metadata of cases) {
      const r = await http.add('too much metadata', { containerTag: 'meta', metadata });
      expect(r.status, Object.keys(metadata).slice(0, 3).join()).toBe(400);
      expect(r.body.details).toMatch(/^metadata/);
    }
    // PATCH and batch take the same limits.
    expect((await http.call('PATCH', `/v3/documents/${ok.body.id}`, { metadata: { big: 'x'.repeat(5000) } })).status).toBe(400);
    const batch = await http.call('POST', '/v3/documents/batch', { documents: [{ content: 'b', metadata: { big: 'x'.repeat(5000) } }] });
    expect(batch.body).toMatchObject({ success: 0, failed: 1 });
  });

  it("one tenant's 8 MB metadata is refused (4xx) and another tenant's GETs stay fast meanwhile", async () => {
    const [keyA, keyB] = [await scopedKey('amp-a'), await scopedKey('amp-b')];
    const asB = api({ baseUrl: stack.baseUrl, apiKey: keyB });
    const asA = api({ baseUrl: stack.baseUrl, apiKey: keyA });
    const mineB = (await asB.add('tenant b reads this')).body.id as string;
    const huge = 'm'.repeat(8 * 1024 * 1024 - 200);
    const bTimes: number[] = [];
    let attacking = true;
    const reader = (async () => {
      while (attacking || bTimes.length < 20) {
        const t0 = performance.now();
        const r = await asB.get(mineB);
        bTimes.push(performance.now() - t0);
        expect(r.status).toBe(200);
      }
    })();
    // Serialised once here, so the test process's own JSON.stringify does not delay B's timings.
    const body = JSON.stringify({ content: 'amplifier', metadata: { blob: huge } });
    const attacks = await Promise.all(Array.from({ length: 12 }, () => asA.call('POST', '/v3/documents', body)));
    attacking = false;
    await reader;
    for (const r of attacks) expect(r.status).toBe(400);
    const sorted = [...bTimes].sort((a, b) => a - b);
    const p = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
    console.log(`[amplification] 12 adds with 8 MB metadata: all ${attacks[0]!.status}; tenant B ${bTimes.length} GETs p50 ${p(0.5).toFixed(1)} ms, p99 ${p(0.99).toFixed(1)} ms`);
    // Generous: measured on a 2-core machine shared with other builds (p99 2.1 s, p50 22 ms, there); on the old main the adds were accepted and a list of 40 took 10 s.
    expect(p(0.99)).toBeLessThan(3_000);
    // Nothing of A's was stored, so no later answer can carry it.
    const listA = await asA.call('POST', '/v3/documents/list', {});
    expect(listA.body.pagination.totalItems).toBe(0);
  }, 120_000);

  it('an answer over the cap is a 400 saying how to ask for less, never a 5xx', async () => {
    const tag = 'answer-cap';
    const big = 'c'.repeat(150_000);
    for (let i = 0; i < 4; i++) expect((await http.add(`${big} ${i}`, { containerTag: tag })).status).toBe(200);
    if (!stack.procs.has('projection')) await stack.start('projection');
    await waitFor('the view to hold them', async () => {
      const r = await http.call('POST', '/v3/documents/list', { containerTags: [tag] });
      return r.body.pagination.totalItems === 4 ? true : undefined;
    });
    const withContent = await http.call('POST', '/v3/documents/list', { containerTags: [tag], includeContent: true });
    expect(withContent.status).toBe(400);
    expect(withContent.body).toMatchObject({ error: 'Answer too large' });
    expect(withContent.body.details).toMatch(/includeContent/);
    const without = await http.call('POST', '/v3/documents/list', { containerTags: [tag] });
    expect(without.status).toBe(200);
    expect(without.body.memories[0].content).toBeUndefined();
  }, 60_000);

  it("revoking a key closes its open GET /v3/events stream", async () => {
    const created = await http.call('POST', '/v3/auth/scoped-key', { containerTag: 'sse-revoke', rateLimitMax: 10_000 });
    const ac = new AbortController();
    const res = await fetch(`${stack.baseUrl}/v3/events`, { headers: { authorization: `Bearer ${created.body.key}` }, signal: ac.signal });
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let text = '';
    const ended = (async () => {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return performance.now();
        text += decoder.decode(value);
      }
    })();
    await waitFor('the stream to say connected', async () => (text.includes('connected') ? true : undefined), 5_000);
    const revokedAt = performance.now();
    expect((await http.call('DELETE', `/v3/auth/scoped-key/${created.body.id}`)).status).toBe(200);
    const timer = setTimeout(() => ac.abort(), 10_000);
    const endedAt = await ended.catch(() => Infinity);
    clearTimeout(timer);
    console.log(`[revocation] stream closed ${(endedAt - revokedAt).toFixed(0)} ms after the revoke`);
    expect(endedAt - revokedAt).toBeLessThan(5_000);
    expect(text).toMatch(/API key revoked or expired/);
  }, 30_000);

  it('a key may hold 10 event streams; the 11th is a 429, and closing one makes room', async () => {
    const created = await http.call('POST', '/v3/auth/scoped-key', { containerTag: 'sse-cap', rateLimitMax: 10_000 });
    const open = async () => {
      const ac = new AbortController();
      const res = await fetch(`${stack.baseUrl}/v3/events`, { headers: { authorization: `Bearer ${created.body.key}` }, signal: ac.signal });
      return { res, ac };
    };
    const streams = [];
    for (let i = 0; i < 10; i++) {
      const s = await open();
      expect(s.res.status).toBe(200);
      streams.push(s);
    }
    const refused = await open();
    expect(refused.res.status).toBe(429);
    expect(await refused.res.json()).toMatchObject({ error: 'Too many event streams' });
    streams[0]!.ac.abort();
    const again = await waitFor('room for one more', async () => {
      const s = await open();
      if (s.res.status === 200) return s;
      await s.res.body?.cancel();
      return undefined;
    }, 5_000, 100);
    for (const s of [...streams.slice(1), again]) s.ac.abort();
  }, 30_000);

  /** The pipeline from here on: these cases need documents processed, not only accepted. */
  async function startPipeline(): Promise<void> {
    await Promise.all((['projection', 'extractor', 'chunker', 'embedder', 'indexer'] as const).filter((s) => !stack.procs.has(s)).map((s) => stack.start(s)));
  }

  /**
   * Read from the view store the gateway answers from: a GET of a 3 MB document is over this
   * stack's answer cap (ANSWER_CAP), and list items carry no error or chunk count.
   */
  async function settled(id: string, timeoutMs: number): Promise<DocumentView> {
    const views = SqliteDocumentViews.open(path.join(stack.dataDir, 'views.sqlite'));
    try {
      return await waitFor(`document ${id} to be done or failed`, async () => {
        const doc = await views.get(id);
        return doc?.status === 'done' || doc?.status === 'failed' ? doc : undefined;
      }, timeoutMs, 100);
    } finally {
      await views.close();
    }
  }

  it('an 8 MB word ends failed in seconds, saying why, and none of it is searchable', async () => {
    await startPipeline();
    const asA = api({ baseUrl: stack.baseUrl, apiKey: await scopedKey('bomb-8mb') });
    // One "word" of 8 MB after a marker sentence: over the 5 MB text cap (EXTRACT_MAX_TEXT_BYTES).
    // On the old main the chunker timed out six times (~3.5 min of CPU), and its chunks were then indexed anyway.
    const body = JSON.stringify({ content: `zebracorn marker sentence. ${'abcdefghij'.repeat(800_000)}` });
    const r = await asA.call('POST', '/v3/documents', body);
    expect(r.status).toBe(200);
    const t0 = performance.now();
    const doc = await settled(r.body.id, 120_000);
    console.log(`[stages bounded] 8 MB word: ${doc.status} ${((performance.now() - t0) / 1000).toFixed(1)} s after the add`);
    expect(doc.status).toBe('failed');
    expect(doc.error).toMatchObject({ stage: 'extracting', class: 'permanent', reason: expect.stringMatching(/extracted text is 7\.6 MB, more than the 5\.0 MB one document may have \(EXTRACT_MAX_TEXT_BYTES\)/) });
    expect(doc.chunkCount).toBe(0);
    const search = await asA.call('POST', '/v3/search', { q: 'zebracorn marker sentence' });
    expect(search.status).toBe(200);
    expect(search.body.results).toEqual([]);
  }, 300_000);

  it("a 3 MB word does not hold up another tenant's small document", async () => {
    await startPipeline();
    const asA = api({ baseUrl: stack.baseUrl, apiKey: await scopedKey('bomb-3mb') });
    const asB = api({ baseUrl: stack.baseUrl, apiKey: await scopedKey('bystander') });
    // A warm-up document, so B's figure below is not a cold start of the stages.
    const warm = await asB.add('warm up the pipeline');
    await settled(warm.body.id, 120_000);
    const big = await asA.call('POST', '/v3/documents', JSON.stringify({ content: `unicornfish marker sentence. ${'abcdefghij'.repeat(300_000)}` }));
    expect(big.status).toBe(200);
    // B's document goes in just behind A's, while A's is in the extractor or the chunker.
    await new Promise((r) => setTimeout(r, 500));
    const t0 = performance.now();
    const small = await asB.add('a small note from another tenant about kettles');
    const smallDoc = await settled(small.body.id, 120_000);
    const bMs = performance.now() - t0;
    const views = SqliteDocumentViews.open(path.join(stack.dataDir, 'views.sqlite'));
    const bigNow = (await views.get(big.body.id))?.status ?? 'queued';
    await views.close();
    console.log(`[stages bounded] the other tenant's small document done ${(bMs / 1000).toFixed(2)} s after its add, the 3 MB one meanwhile ${bigNow} (the old main: 8.7 s, against 0.37 s alone)`);
    expect(smallDoc.status).toBe('done');
    // Its processing is not what this case is about (a 2 MB word chunks in seconds: chunk.unit.test.ts;
    // measured here once: done with 1,184 chunks 72 s after the add under a load of 20): deleted, to keep the suite short.
    expect((await asA.call('DELETE', `/v3/documents/${big.body.id}`)).status).toBe(204);
  }, 300_000);
  it("one tenant's backlog does not starve another's document (per-tag fairness)", async () => {
    await startPipeline();
    const asA = api({ baseUrl: stack.baseUrl, apiKey: await scopedKey('backlog-a') });
    const asB = api({ baseUrl: stack.baseUrl, apiKey: await scopedKey('backlog-b') });
    // The stages stopped while A's backlog and B's document are accepted (the gateway and the
    // projection run): every stage then starts with the whole backlog in front of it, whatever
    // the machine's speed, as a backlog larger than the stages keep up with would be.
    const stages = ['extractor', 'chunker', 'embedder', 'indexer'] as const;
    await Promise.all(stages.map((s) => stack.stopService(s)));
    const N = 600;
    const note = (k: number) => `Backlog note ${k}: the tide tables of harbour ${k % 97}, with the moon's phase for week ${k % 52}.`;
    const batches = await Promise.all(
      Array.from({ length: 6 }, (_, b) => asA.call('POST', '/v3/documents/batch', { documents: Array.from({ length: 100 }, (_, i) => ({ content: note(b * 100 + i) })) })),
    );
    for (const r of batches) expect(r.body).toMatchObject({ success: 100, failed: 0 });
    const b = await asB.add('one note from another tenant about kettles');
    expect(b.status).toBe(200);
    const views = SqliteDocumentViews.open(path.join(stack.dataDir, 'views.sqlite'));
    const doneOfA = async () => (await views.list({ containerTags: ['backlog-a'], statuses: ['done'], sort: 'createdAt', order: 'asc', limit: 1, offset: 0 })).total;
    const t0 = performance.now();
    await Promise.all(stages.map((s) => stack.start(s)));
    const startedMs = performance.now() - t0;
    const bDoc = await settled(b.body.id, 300_000);
    const bMs = performance.now() - t0;
    const aSeenAtB = await doneOfA();
    // The rest of A's backlog (and so later cases start on an idle pipeline).
    await waitFor("A's backlog to be done", async () => ((await doneOfA()) === N ? true : undefined), 600_000, 250);
    const aMs = performance.now() - t0;
    // Which of A's were done before B, by the time each became done (its `indexed` event's time,
    // which a done view keeps as updatedAt), ties counted against B. The count read when the poll
    // above first saw B done also holds what finished during the poll's 100 ms and the read
    // after it (up to 38 more of A's in runs here): noise, not the order the lanes give.
    const doneA = (await views.list({ containerTags: ['backlog-a'], statuses: ['done'], sort: 'updatedAt', order: 'asc', limit: N, offset: 0 })).items;
    const aDoneBeforeB = doneA.filter((d) => d.updatedAt <= bDoc.updatedAt).length;
    await views.close();
    console.log(
      `[fairness] A's ${N} documents then B's one accepted with the stages stopped; from the stages' start (${(startedMs / 1000).toFixed(1)} s to start them): ` +
        `B done in ${(bMs / 1000).toFixed(2)} s, when ${aDoneBeforeB} of A's ${N} were done by their done times (${aSeenAtB} by the count read after the poll saw B done); ` +
        `all of A's done in ${(aMs / 1000).toFixed(1)} s`,
    );
    expect(bDoc.status).toBe('done');
    expect(doneA).toHaveLength(N);
    expect(aDoneBeforeB).toBeLessThan(N / 2);
  }, 900_000);

  it('many mid-sized tenants at once do not hold up a small one (a crowded normal lane)', async () => {
    await startPipeline();
    const asB = api({ baseUrl: stack.baseUrl, apiKey: await scopedKey('crowd-small') });
    const stages = ['extractor', 'chunker', 'embedder', 'indexer'] as const;
    await Promise.all(stages.map((s) => stack.stopService(s)));
    // 100 tags × 8 documents, each tag far under the bulk threshold (64): by the tag counts alone
    // all 800 would be in the normal lane, ahead of B's. The lane is crowded past 256 (the
    // default): from then on a tag's third document and later go in the bulk lane.
    const TAGS = 100;
    const N = TAGS * 8;
    const batches = await Promise.all(
      Array.from({ length: N / TAGS }, (_, b) =>
        http.call('POST', '/v3/documents/batch', {
          documents: Array.from({ length: TAGS }, (_, t) => ({ content: `Crowd note ${b} of tenant ${t}: the ferry timetable for pier ${(b * 7 + t) % 31}.`, containerTag: `crowd-${t}` })),
        }),
      ),
    );
    for (const r of batches) expect(r.body).toMatchObject({ success: TAGS, failed: 0 });
    const b = await asB.add('one note from a small tenant about lighthouses');
    expect(b.status).toBe(200);
    const t0 = performance.now();
    await Promise.all(stages.map((s) => stack.start(s)));
    const bDoc = await settled(b.body.id, 300_000);
    const bMs = performance.now() - t0;
    const views = SqliteDocumentViews.open(path.join(stack.dataDir, 'views.sqlite'));
    const crowdTags = Array.from({ length: TAGS }, (_, t) => `crowd-${t}`);
    await waitFor('the crowd to be done', async () => ((await views.list({ containerTags: crowdTags, statuses: ['done'], sort: 'createdAt', order: 'asc', limit: 1, offset: 0 })).total === N ? true : undefined), 600_000, 250);
    const done = (await views.list({ containerTags: crowdTags, statuses: ['done'], sort: 'updatedAt', order: 'asc', limit: N, offset: 0 })).items;
    await views.close();
    const beforeB = done.filter((d) => d.updatedAt <= bDoc.updatedAt).length;
    console.log(`[fairness, crowded] ${TAGS} tags × ${N / TAGS} documents, then a small tenant's one, accepted with the stages stopped: B done in ${(bMs / 1000).toFixed(2)} s, when ${beforeB} of the ${N} were done`);
    expect(bDoc.status).toBe('done');
    expect(done).toHaveLength(N);
    // Ahead of B in the normal lane: the ~256 placed before it was crowded; the bulk lane meanwhile
    // takes up to half the entrance (396 of the 800 done before B in a run here). Without the
    // rule all 800 are ahead of it.
    expect(beforeB).toBeLessThan(N * 0.75);
  }, 900_000);
});
