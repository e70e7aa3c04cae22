import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { asHandler, connectBus, follow, lastEvent, publishEvent, recordingContext, runConsumer, submittedEvent, ensureTopology, type Bus, type Handler } from '@memstream/bus';
import { SqliteChunkIndex } from '@memstream/chunk-index';
import { compareViews, readLog, startNatsServer, type NatsServerHandle } from '@memstream/cli';
import { STREAM_DOCS, decodeVector, docSubject, type DocumentEvent, type DocumentSubmitted } from '@memstream/contracts';
import { createLogger } from '@memstream/kit';
import { SqliteDocumentViews, canonical } from '@memstream/views';
// The consuming handlers themselves, run in this process against fresh stores.
import { applyEvent, createProjectionHandler } from '../services/projection/src/handlers/index.js';
import { createIndexHandler, createMetadataHandler } from '../services/indexer/src/handlers/index.js';
import { endedSinceFromLog, stateFromLog } from '../services/indexer/src/adapters/scope-from-log.js';
import { createEmbedHandler } from '../services/embedder/src/handlers/index.js';
import { createChunkHandler } from '../services/chunker/src/handlers/index.js';
import { createExtractHandler } from '../services/extractor/src/handlers/index.js';
import { createEmbedder } from '../packages/embedder/src/index.js';
import { api, startTestStack, waitFor, type TestStack } from './support/stack.js';
import { rng, shuffle } from './retrieval/manpages.js';

const silent = createLogger('test', { level: 'silent' });

/** A seeded shuffle (mulberry32), so a failing order can be replayed. */
function shuffled<T>(items: T[], seed: number): T[] {
  return shuffle(items, rng(seed));
}

/** Run `fn` over items with at most `n` at once, as a consumer with that concurrency would. */
async function pool<T>(items: T[], n: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: n }, async () => {
      while (next < items.length) await fn(items[next++]!);
    }),
  );
}

const WORDS = 'ledger replay chunk vector broker durable consumer revision projection tombstone payload subject'.split(' ');
const text = (i: number, v = 1) => `# Idempotent ${i} v${v}\n\n${WORDS.map((w, k) => `${w}-${(i * 17 + k * v) % 89}`).join(' ')}.\n\nSecond paragraph of ${i}, version ${v}.`;

/**
 * Redelivery must be harmless: every consuming handler, given every event of a real run twice
 * and in a shuffled order, must end in the same state as the live services did. The events are
 * the ones the live run logged (same ids, same times), read back from the stream; the handlers
 * run against fresh stores and look things up in the same log, as they do in production.
 */
describe('idempotency: every event twice, out of order, ends in the same state', () => {
  let stack: TestStack;
  let client: ReturnType<typeof api>;
  let bus: Bus;
  let events: DocumentEvent[] = [];
  const scratch: string[] = [];
  const fresh = (name: string) => {
    const dir = mkdtempSync(path.join(tmpdir(), 'memstream-idem-'));
    scratch.push(dir);
    return path.join(dir, name);
  };

  beforeAll(async () => {
    // The hashed model, not the default static one: the documents below differ only in numbered
    // words ("ledger-17"), which the static model does not know, so their vectors are equal and a
    // dense search's ties are ordered by row id, which differs between the live index and one
    // rebuilt from shuffled events. Hashed vectors differ, so the rankings compared are unique.
    stack = await startTestStack({ env: { EMBEDDER: 'hashed' } });
    client = api(stack);
    bus = await connectBus({ url: stack.nats.url, name: 'idempotency-test', log: silent });
    // A run with some history: plain documents, new revisions, tag changes, a deletion, a failure.
    const ids: string[] = [];
    for (let i = 0; i < 30; i++) ids.push((await client.add(text(i), { containerTag: 'idem', metadata: { i }, ...(i % 3 === 0 ? { customId: `idem-${i}` } : {}) })).body.id);
    const failing = (await client.add(' \n\t ', { containerTag: 'idem' })).body.id as string;
    const allDone = () =>
      waitFor(
        'every document terminal',
        async () => {
          for (const id of [...ids, failing]) {
            const s = (await client.get(id)).body.status;
            if (s !== 'done' && s !== 'failed') return undefined;
          }
          return true;
        },
        60_000,
        100,
      );
    await allDone();
    // New content for five customIds (revision 2), new tags for three, one deleted.
    for (const i of [0, 3, 6, 9, 12]) await client.add(text(i, 2), { customId: `idem-${i}` });
    for (const i of [1, 2, 4]) expect((await client.call('PATCH', `/v3/documents/${ids[i]}`, { containerTags: ['idem', 'patched'], metadata: { i, patched: true } })).status).toBe(200);
    expect((await client.call('DELETE', `/v3/documents/${ids[5]}`)).status).toBe(204);
    await waitFor(
      'revisions 2 done and the patches applied',
      async () => {
        for (const i of [0, 3, 6, 9, 12]) {
          const d = (await client.get(ids[i]!)).body;
          if (d.status !== 'done' || !d.content.includes('v2')) return undefined;
        }
        for (const i of [1, 2, 4]) if (!(await client.get(ids[i]!)).body.containerTags.includes('patched')) return undefined;
        return true;
      },
      60_000,
      100,
    );
    // The index's copy of tags follows on its own consumer: wait until it has them too.
    const index = SqliteChunkIndex.open(path.join(stack.dataDir, 'index.sqlite'));
    try {
      await waitFor('the index has the patched tags', async () => {
        for (const i of [1, 2, 4]) if (!(await index.getDocumentChunks(ids[i]!))[0]?.containerTags.includes('patched')) return undefined;
        return true;
      });
    } finally {
      await index.close();
    }
    await readLog(bus, async (e) => void events.push(e));
    events = events.filter(Boolean);
  }, 120_000);

  afterAll(async () => {
    await bus?.close();
    await stack?.teardown();
    for (const d of scratch) rmSync(d, { recursive: true, force: true });
  });

  const ofType = <T extends DocumentEvent['type']>(t: T) => events.filter((e): e is Extract<DocumentEvent, { type: T }> => e.type === t);
  const byCause = (type: DocumentEvent['type'], causationId: string) => events.find((e) => e.type === type && e.causationId === causationId);

  // Seeds 1 and 2 one event at a time, 16 at once; seed 3 as the projection runs, in batches
  // (one transaction, one compare-and-set per document), two batches at once so they race.
  for (const seed of [1, 2, 3]) {
    const batched = seed === 3;
    it(`projection: every event twice, shuffled (seed ${seed}), ${batched ? 'in batches of 32, 2 at once' : '16 at once'} → the live view`, async () => {
      const live = SqliteDocumentViews.open(path.join(stack.dataDir, 'views.sqlite'));
      const rebuilt = SqliteDocumentViews.open(fresh('views.sqlite'));
      try {
        const deliveries = shuffled([...events, ...events], seed);
        const ports = {
          lastSubmitted: async (id: string) => ((await lastEvent(bus, id, 'submitted'))?.event as DocumentSubmitted | undefined) ?? null,
          tombstoneRevision: async (id: string) => (await lastEvent(bus, id, 'deleted'))?.event.revision ?? 0,
        };
        const t0 = Date.now();
        if (batched) {
          const handleBatch = createProjectionHandler(rebuilt, ports);
          const batches = Array.from({ length: Math.ceil(deliveries.length / 32) }, (_, i) => deliveries.slice(i * 32, i * 32 + 32));
          await pool(batches, 2, async (b) => {
            for (const r of await handleBatch(b.map((event) => ({ event, ctx: recordingContext() })))) if (r.status === 'rejected') throw r.reason;
          });
        } else await pool(deliveries, 16, async (e) => void (await applyEvent(rebuilt, e, ports)));
        const cmp = await compareViews(live, rebuilt);
        if (cmp.different.length) {
          const id = cmp.different[0]!;
          console.log('[idempotency] first difference', canonical(await live.get(id)), canonical(await rebuilt.get(id)));
        }
        expect(cmp.different).toEqual([]);
        expect(cmp.onlyInA).toEqual([]);
        expect(cmp.onlyInB).toEqual([]);
        console.log(`[idempotency] projection, seed ${seed}: ${deliveries.length} deliveries of ${events.length} events → ${cmp.same} views equal to the live ones in ${Date.now() - t0} ms`);
      } finally {
        await live.close();
        await rebuilt.close();
      }
    });
  }

  it('indexer: every embedded and metadata-updated event twice, shuffled → the live index, and the same indexed event ids', async () => {
    const live = SqliteChunkIndex.open(path.join(stack.dataDir, 'index.sqlite'));
    const rebuilt = SqliteChunkIndex.open(fresh('index.sqlite'));
    try {
      const ports = { index: rebuilt, documentState: stateFromLog(bus), endedSince: endedSinceFromLog(bus) };
      const index = asHandler(createIndexHandler(ports));
      const meta = createMetadataHandler(ports);
      const input = [...ofType('document.embedded.v1'), ...ofType('document.metadata-updated.v1')];
      const deliveries = shuffled([...input, ...input], 7);
      let emitted = 0;
      await pool(deliveries, 2, async (e) => {
        const out = (await (e.type === 'document.embedded.v1' ? index : meta)(e, recordingContext())) ?? [];
        for (const o of out) {
          emitted++;
          // The id a redelivery emits is the one the live run logged: the server drops the copy.
          expect(byCause('document.indexed.v1', e.id)?.id).toBe(o.id);
        }
      });
      const docs = new Set(ofType('document.embedded.v1').map((e) => e.documentId));
      let chunks = 0;
      for (const id of docs) {
        const a = await live.getDocumentChunks(id);
        const b = await rebuilt.getDocumentChunks(id);
        expect(canonical(b), id).toBe(canonical(a));
        chunks += a.length;
      }
      expect(await rebuilt.stats()).toEqual(await live.stats());
      // Vectors too: a dense search with each live revision's first vector ranks the same hits, with the same scores.
      for (const e of ofType('document.embedded.v1')) {
        const c = e.data.chunks[0];
        if (!c) continue;
        const q = { mode: 'dense' as const, vector: decodeVector(c.vector), model: e.data.model, limit: 5 };
        expect(canonical(await rebuilt.search(q))).toBe(canonical(await live.search(q)));
      }
      console.log(`[idempotency] indexer: ${deliveries.length} deliveries (${input.length} events) → ${docs.size} documents, ${chunks} chunks equal to the live index; ${emitted} indexed events emitted, all with the live ids`);
    } finally {
      await live.close();
      await rebuilt.close();
    }
  });

  it('extractor, chunker, embedder: each input twice → the very events the live run logged (same ids, same data)', async () => {
    // The model the stack's embedder ran (EMBEDDER=hashed, above).
    const embedder = createEmbedder({ kind: 'hashed', dim: 384 });
    const previousVectors = async (documentId: string, model: string) => {
      const last = await lastEvent(bus, documentId, 'embedded');
      const m = new Map<string, string>();
      if (last?.event.type === 'document.embedded.v1' && last.event.data.model === model) for (const c of last.event.data.chunks) m.set(c.hash, c.vector);
      return m;
    };
    const stages: Array<{ name: string; handle: Handler; input: DocumentEvent[]; output: DocumentEvent['type'] }> = [
      {
        name: 'extractor',
        handle: createExtractHandler({
          blobs: { getStream: async () => null },
          fetchUrl: async () => {
            throw new Error('no URL in this run');
          },
        }),
        input: ofType('document.submitted.v1'),
        output: 'document.extracted.v1',
      },
      { name: 'chunker', handle: createChunkHandler({ maxTokens: 512 }), input: ofType('document.extracted.v1'), output: 'document.chunked.v1' },
      { name: 'embedder', handle: asHandler(createEmbedHandler({ embedder, batch: 64, previousVectors })), input: ofType('document.chunked.v1'), output: 'document.embedded.v1' },
    ];
    const strip = (e: DocumentEvent) => {
      const { occurredAt: _t, data, ...rest } = e;
      // How many vectors were computed rather than reused depends on what the log held at the time.
      const { computed: _c, ...d } = data as Record<string, unknown>;
      return canonical({ ...rest, data: d });
    };
    for (const s of stages) {
      let same = 0;
      let failed = 0;
      for (const e of shuffled([...s.input, ...s.input], 11)) {
        const ctx = recordingContext();
        let out: DocumentEvent[];
        try {
          out = (await s.handle(e, ctx)) ?? [];
        } catch (err) {
          // The live run failed it the same way.
          expect(byCause('document.failed.v1', e.id), `${s.name} ${e.documentId}`).toBeDefined();
          failed++;
          continue;
        }
        for (const o of [...ctx.emitted, ...out]) {
          const logged = events.find((x) => x.id === o.id);
          expect(logged, `${s.name} emitted ${o.type} ${o.id} that the live run did not`).toBeDefined();
          expect(strip(o)).toBe(strip(logged!));
        }
        expect(out.map((o) => o.type)).toEqual([s.output]);
        same++;
      }
      console.log(`[idempotency] ${s.name}: ${s.input.length} events twice → ${same} outputs identical to the logged ones, ${failed} failed as the live run did`);
      expect(same).toBeGreaterThan(0);
    }
  });
});

/**
 * A late ack: a handler slower than ack_wait. With the runner's keep-alive (working()) nothing is
 * redelivered; without it the server hands the message to another slot while the first attempt
 * still runs — and the outcome is still one event, because the emitted id is derived from the
 * cause and the stream drops the copy.
 */
describe('late ack: a handler slower than ack_wait', () => {
  let dir: string;
  let nats: NatsServerHandle;
  let bus: Bus;
  const ACK_WAIT = 1_000;

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'memstream-lateack-'));
    nats = await startNatsServer({ storeDir: dir });
    bus = await connectBus({ url: nats.url, name: 'late-ack-test', log: silent });
    await ensureTopology(bus.jsm, { ackWaitMs: ACK_WAIT });
  });
  afterAll(async () => {
    await bus?.close();
    await nats?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  async function slowRun(keepAlive: boolean) {
    const sub = submittedEvent(`slow ${keepAlive}`);
    const deliveries: number[] = [];
    let running = 0;
    let overlapped = false;
    const r = runConsumer({
      bus,
      consumer: 'extractor',
      log: silent,
      concurrency: 4,
      stage: 'extracting',
      keepAlive,
      handle: async (e, ctx) => {
        if (e.documentId !== sub.documentId) return [];
        deliveries.push(ctx.msg.deliveryCount);
        running++;
        if (running > 1) overlapped = true;
        // 2.5 × ack_wait of work.
        await new Promise((res) => setTimeout(res, 2.5 * ACK_WAIT));
        running--;
        return [follow(e, 'document.extracted.v1', { title: null, type: 'text', text: 'slow', url: null, format: 'plain' })];
      },
    });
    const t0 = Date.now();
    await publishEvent(bus, sub);
    await waitFor('handled and acked', async () => {
      const info = await bus.jsm.consumers.info(STREAM_DOCS, 'extractor');
      return deliveries.length > 0 && running === 0 && info.num_ack_pending === 0 && info.num_pending === 0 ? true : undefined;
    }, 20_000, 50);
    await r.stop();
    const stream = await bus.jsm.streams.info(STREAM_DOCS, { subjects_filter: docSubject(sub.documentId, 'extracted') });
    const extracted = Object.values(stream.state.subjects ?? {}).reduce((a, b) => a + b, 0);
    return { deliveries, overlapped, extracted, ms: Date.now() - t0, documentId: sub.documentId };
  }

  it('with keep-alive: one delivery, one result', async () => {
    const r = await slowRun(true);
    expect(r.deliveries).toEqual([1]);
    expect(r.extracted).toBe(1);
    console.log(`[late-ack] keep-alive on, handler 2.5 × ack_wait (${ACK_WAIT} ms): ${r.deliveries.length} delivery, ${r.extracted} extracted event, ${r.ms} ms`);
  }, 30_000);

  it('without keep-alive: redelivered while the first attempt still runs, and still one result', async () => {
    const r = await slowRun(false);
    expect(r.deliveries.length).toBeGreaterThanOrEqual(2);
    expect(r.deliveries.slice(0, 2)).toEqual([1, 2]);
    expect(r.overlapped).toBe(true);
    expect(r.extracted).toBe(1);
    const last = await lastEvent(bus, r.documentId, 'extracted');
    expect(last?.event.causationId).toBeDefined();
    console.log(`[late-ack] keep-alive off, handler 2.5 × ack_wait (${ACK_WAIT} ms): ${r.deliveries.length} deliveries (counts ${r.deliveries.join(', ')}), overlapping; ${r.extracted} extracted event in the log, ${r.ms} ms`);
  }, 30_000);
});
