import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startNatsServer, type NatsServerHandle } from '@memstream/cli';
import { STREAM_DEAD_LETTERS, STREAM_DOCS, TASK_TYPE_HEADER, type DocumentEvent } from '@memstream/contracts';
import { PermanentError, RetryableError, createLogger } from '@memstream/kit';
import { connectBus, type Bus } from './connect.js';
import { ensureTopology } from './topology.js';
import { decodeEvent, follow, lastEvent, publishEvent } from './events.js';
import { runConsumer, type Handler, type RunnerOptions } from './runner.js';
import { submittedEvent } from './testing.js';

/** The runner against a real nats-server: every outcome mapped to the right ack, and what it emits. */
describe('consumer runner over real JetStream', () => {
  let dir: string;
  let nats: NatsServerHandle;
  let bus: Bus;
  const log = createLogger('test', { level: 'silent' });

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'memstream-bus-'));
    nats = await startNatsServer({ storeDir: dir });
    bus = await connectBus({ url: nats.url, name: 'runner-test', log });
    await ensureTopology(bus.jsm, { ackWaitMs: 2_000 });
  });
  afterAll(async () => {
    await bus?.close();
    await nats?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  async function run(handle: Handler, events: DocumentEvent[], until: () => Promise<boolean>, opts: { maxDeliver?: number } = {}) {
    for (const e of events) await publishEvent(bus, e);
    const r = runConsumer({ bus, consumer: 'extractor', log, handle, stage: 'extracting', skipStale: true, backoffMs: () => 50, ...opts });
    const deadline = Date.now() + 15_000;
    while (!(await until())) {
      if (Date.now() > deadline) throw new Error('timed out');
      await new Promise((res) => setTimeout(res, 25));
    }
    await r.stop();
  }

  it('publishes what the handler returns, then acks: nothing is redelivered', async () => {
    const sub = submittedEvent('ok');
    let calls = 0;
    await run(
      async (e) => {
        calls++;
        return [follow(e, 'document.extracted.v1', { title: null, type: 'text', text: 'ok', url: null, format: 'plain' })];
      },
      [sub],
      async () => (await lastEvent(bus, sub.documentId, 'extracted')) !== null,
    );
    const info = await bus.jsm.consumers.info(STREAM_DOCS, 'extractor');
    expect(info.num_ack_pending).toBe(0);
    expect(info.num_pending).toBe(0);
    expect(calls).toBe(1);
  });

  it('a message waiting for a free slot is kept alive: nothing is redelivered while this worker lives', async () => {
    // Ack wait 2 s, one slot, 2.5 s per message: the second waits 2.5 s for the slot. Had it been
    // prefetched where the runner cannot keep it alive, the server would have redelivered it
    // meanwhile, and it would run twice (deliveries 1, 1, 2).
    const subs = [submittedEvent('queued 1'), submittedEvent('queued 2')];
    const ids = new Set(subs.map((s) => s.documentId));
    const seen: number[] = [];
    let running = 0;
    for (const e of subs) await publishEvent(bus, e);
    const r = runConsumer({
      bus,
      consumer: 'extractor',
      log,
      concurrency: 1,
      stage: 'extracting',
      handle: async (e, ctx) => {
        if (!ids.has(e.documentId)) return [];
        seen.push(ctx.msg.deliveryCount);
        running++;
        await new Promise((res) => setTimeout(res, 2_500));
        running--;
        return [];
      },
    });
    const deadline = Date.now() + 15_000;
    for (;;) {
      const info = await bus.jsm.consumers.info(STREAM_DOCS, 'extractor');
      if (seen.length >= 2 && running === 0 && info.num_ack_pending === 0 && info.num_pending === 0) break;
      if (Date.now() > deadline) throw new Error('timed out');
      await new Promise((res) => setTimeout(res, 50));
    }
    await r.stop();
    expect(seen).toEqual([1, 1]);
  }, 20_000);

  it('a duplicate publish (same event id) is dropped by the server', async () => {
    const sub = submittedEvent('dup');
    const a = await publishEvent(bus, sub);
    const b = await publishEvent(bus, sub);
    expect(b.duplicate).toBe(true);
    expect(b.seq).toBe(a.seq);
  });

  it('naks transient errors with backoff and succeeds on a later delivery', async () => {
    const sub = submittedEvent('flaky');
    const deliveries: number[] = [];
    await run(
      async (e, ctx) => {
        if (e.documentId !== sub.documentId) return [];
        deliveries.push(ctx.msg.deliveryCount);
        if (ctx.msg.deliveryCount < 3) throw new Error('endpoint down');
        return [follow(e, 'document.extracted.v1', { title: null, type: 'text', text: 'x', url: null, format: 'plain' })];
      },
      [sub],
      async () => (await lastEvent(bus, sub.documentId, 'extracted')) !== null,
    );
    expect(deliveries).toEqual([1, 2, 3]);
    expect(await lastEvent(bus, sub.documentId, 'failed')).toBeNull();
  });

  it('a publish of what a handler returned that fails is the message\'s failure, never an unhandled rejection that ends the process', async () => {
    // What the handler returns is published without the runner holding on to each publish's own
    // promise (it awaits them together): a failing one (here an event its schema refuses; under
    // a broker restart the connection-lost rejection of every publish in flight) must not be
    // reported as unhandled, which ends a Node process (it took a worker host down in faults.e2e).
    const unhandled: unknown[] = [];
    const onUnhandled = (err: unknown) => unhandled.push(err);
    process.on('unhandledRejection', onUnhandled);
    try {
      const sub = submittedEvent('emits garbage once');
      const deliveries: number[] = [];
      await run(
        async (e, ctx) => {
          if (e.documentId !== sub.documentId) return [];
          deliveries.push(ctx.msg.deliveryCount);
          const extracted = follow(e, 'document.extracted.v1', { title: null, type: 'text', text: 'x', url: null, format: 'plain' });
          return [ctx.msg.deliveryCount === 1 ? ({ ...extracted, revision: -1 } as DocumentEvent) : extracted];
        },
        [sub],
        async () => (await lastEvent(bus, sub.documentId, 'extracted')) !== null,
      );
      // A turn for a late rejection to be reported.
      await new Promise((r) => setTimeout(r, 50));
      expect(unhandled).toEqual([]);
      expect(deliveries).toEqual([1, 2]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });

  it('on the last allowed delivery: failed (exhausted) and a copy in DEAD_LETTERS', async () => {
    const sub = submittedEvent('always down');
    let calls = 0;
    await run(
      async () => {
        calls++;
        // A dependency that stays away (transient every time): exhausted, not poison.
        throw new RetryableError('still down');
      },
      [sub],
      async () => (await lastEvent(bus, sub.documentId, 'failed')) !== null,
      { maxDeliver: 3 },
    );
    expect(calls).toBe(3);
    const failed = (await lastEvent(bus, sub.documentId, 'failed'))!.event;
    expect(failed.data).toMatchObject({ stage: 'extracting', class: 'exhausted' });
    expect((failed.data as { reason: string }).reason).toMatch(/still down \(after 3 attempts\)/);
    const dead = await bus.jsm.streams.getMessage(STREAM_DEAD_LETTERS, { last_by_subj: `dead.extractor.${sub.documentId}` });
    expect(dead?.header.get('Memstream-Reason')).toMatch(/still down/);
    expect((await decodeEvent(bus, dead!.data)).id).toBe(sub.id);
  });

  it('the same non-transient error on every delivery: failed as poison, with a copy in DEAD_LETTERS', async () => {
    const sub = submittedEvent('breaks the parser');
    let calls = 0;
    await run(
      async (e) => {
        if (e.documentId !== sub.documentId) return [];
        calls++;
        // A parser bug: not a PermanentError, so it is retried; the same on every attempt.
        throw new TypeError(`cannot read properties of undefined (reading 'node ${calls}')`);
      },
      [sub],
      async () => (await lastEvent(bus, sub.documentId, 'failed')) !== null,
      { maxDeliver: 3 },
    );
    expect(calls).toBe(3);
    const failed = (await lastEvent(bus, sub.documentId, 'failed'))!.event;
    expect(failed.data).toMatchObject({ stage: 'extracting', class: 'poison' });
    expect((failed.data as { reason: string }).reason).toMatch(/the same error on every one of 3 attempts/);
    expect(await bus.jsm.streams.getMessage(STREAM_DEAD_LETTERS, { last_by_subj: `dead.extractor.${sub.documentId}` })).not.toBeNull();
  });

  it('failures that differ, or a last one that is a timeout, end exhausted rather than poison', async () => {
    for (const errors of [
      [new TypeError('bad node'), new RangeError('out of range'), new TypeError('bad node')],
      [new TypeError('bad node'), new TypeError('bad node'), Object.assign(new Error('connect failed'), { code: 'ECONNRESET' })],
    ]) {
      const sub = submittedEvent('mixed');
      await run(
        async (e, ctx) => {
          if (e.documentId !== sub.documentId) return [];
          throw errors[ctx.msg.deliveryCount - 1]!;
        },
        [sub],
        async () => (await lastEvent(bus, sub.documentId, 'failed')) !== null,
        { maxDeliver: 3 },
      );
      expect((await lastEvent(bus, sub.documentId, 'failed'))!.event.data).toMatchObject({ class: 'exhausted' });
    }
  });

  it('a permanent error fails the document at once, without retries', async () => {
    const sub = submittedEvent('bad');
    let calls = 0;
    await run(
      async () => {
        calls++;
        throw new PermanentError('no extractable text');
      },
      [sub],
      async () => (await lastEvent(bus, sub.documentId, 'failed')) !== null,
    );
    expect(calls).toBe(1);
    expect((await lastEvent(bus, sub.documentId, 'failed'))!.event.data).toEqual({ stage: 'extracting', reason: 'no extractable text', class: 'permanent' });
  });

  it('an undecodable message is dead-lettered and terminated, not retried', async () => {
    await bus.js.publish('doc.garbage1.submitted', new TextEncoder().encode('{not json'));
    let calls = 0;
    await run(
      async () => {
        calls++;
        return [];
      },
      [],
      async () => (await bus.jsm.streams.getMessage(STREAM_DEAD_LETTERS, { last_by_subj: 'dead.extractor.garbage1' }).catch(() => null)) !== null,
    );
    expect(calls).toBe(0);
  });

  it('drops the work of a stale revision', async () => {
    const r1 = submittedEvent('v1', { documentId: 'stale1', revision: 1 });
    const r2 = submittedEvent('v2', { documentId: 'stale1', revision: 2 });
    const seen: number[] = [];
    await run(
      async (e) => {
        seen.push(e.revision);
        return [follow(e, 'document.extracted.v1', { title: null, type: 'text', text: 'x', url: null, format: 'plain' })];
      },
      [r1, r2],
      async () => (await lastEvent(bus, 'stale1', 'extracted')) !== null,
    );
    expect(seen).toEqual([2]);
  });

  it('events over 256 KB travel by claim check and come back whole', async () => {
    const big = 'memstream '.repeat(60_000);
    const sub = submittedEvent(big);
    await publishEvent(bus, sub);
    const m = await bus.jsm.streams.getMessage(STREAM_DOCS, { last_by_subj: `doc.${sub.documentId}.submitted` });
    expect(m!.data.byteLength).toBeLessThan(4096);
    expect(JSON.parse(new TextDecoder().decode(m!.data)).claim.key).toBe(`doc/${sub.documentId}/events/${sub.id}`);
    const back = await decodeEvent(bus, m!.data);
    expect(back).toEqual(sub);
  });

  it('stop() returns unstarted messages and waits for the one in flight, acking nothing unfinished', async () => {
    const subs = Array.from({ length: 5 }, (_, i) => submittedEvent(`slow ${i}`));
    for (const s of subs) await publishEvent(bus, s);
    let started = 0;
    let finished = 0;
    const r = runConsumer({
      bus,
      consumer: 'extractor',
      log,
      concurrency: 1,
      stage: 'extracting',
      handle: async (e) => {
        // Leftovers of earlier cases may come first: count only this case's documents.
        if (!subs.some((s) => s.documentId === e.documentId)) return [];
        started++;
        await new Promise((res) => setTimeout(res, 300));
        finished++;
        return [follow(e, 'document.extracted.v1', { title: null, type: 'text', text: 'x', url: null, format: 'plain' })];
      },
    });
    while (started === 0) await new Promise((res) => setTimeout(res, 10));
    await r.stop();
    expect(finished).toBe(started);
    expect(finished).toBeLessThan(5);
    // What was not finished comes back to the next process: none of it was acked.
    const handledAfter = new Set<string>();
    const mine = new Set(subs.map((s) => s.documentId));
    const r2 = runConsumer({
      bus,
      consumer: 'extractor',
      log,
      handle: async (e) => {
        if (mine.has(e.documentId)) handledAfter.add(e.documentId);
        return [];
      },
    });
    const deadline = Date.now() + 10_000;
    while (handledAfter.size < 5 - finished && Date.now() < deadline) await new Promise((res) => setTimeout(res, 25));
    await r2.stop();
    expect(handledAfter.size).toBe(5 - finished);
    const info = await bus.jsm.consumers.info(STREAM_DOCS, 'extractor');
    expect(info.num_pending + info.num_ack_pending).toBe(0);
  });

  /** Until `done` holds and the extractor consumer has nothing pending or unacked. */
  async function drained(done: () => Promise<boolean>): Promise<void> {
    const deadline = Date.now() + 15_000;
    for (;;) {
      const info = await bus.jsm.consumers.info(STREAM_DOCS, 'extractor');
      if ((await done()) && info.num_ack_pending === 0 && info.num_pending === 0) return;
      if (Date.now() > deadline) throw new Error('timed out');
      await new Promise((res) => setTimeout(res, 25));
    }
  }

  /** The extractor's consumer, gathering long enough that everything already in the stream arrives in one batch. */
  const batchedExtractor = (over: Partial<RunnerOptions>) =>
    runConsumer({ bus, consumer: 'extractor', log, stage: 'extracting', skipStale: true, concurrency: 64, batch: { size: 64, waitMs: 1_000 }, ...over });

  it('a batch handler gets the batch together; each message ends on its own: a rejected one is retried, the others acked once', async () => {
    const subs = Array.from({ length: 6 }, (_, i) => submittedEvent(`batched ${i}`));
    const mine = new Set(subs.map((s) => s.documentId));
    for (const s of subs) await publishEvent(bus, s);
    const batches: string[][] = [];
    const handled = new Map<string, number[]>();
    const r = batchedExtractor({
      backoffMs: () => 50,
      handleBatch: async (items) => {
        batches.push(items.map((i) => i.event.documentId).filter((id) => mine.has(id)));
        return items.map(({ event, ctx }) => {
          if (!mine.has(event.documentId)) return { status: 'fulfilled', value: [] };
          handled.set(event.documentId, [...(handled.get(event.documentId) ?? []), ctx.msg.deliveryCount]);
          // The third document fails its first delivery only.
          if (event.documentId === subs[2]!.documentId && ctx.msg.deliveryCount === 1) return { status: 'rejected', reason: new RetryableError('store busy') };
          return { status: 'fulfilled', value: [follow(event, 'document.extracted.v1', { title: null, type: 'text', text: 'x', url: null, format: 'plain' })] };
        });
      },
    });
    await drained(async () => (await Promise.all(subs.map((s) => lastEvent(bus, s.documentId, 'extracted')))).every(Boolean));
    await r.stop();
    // All six came in one batch; the retried one came back alone.
    expect(batches[0]).toHaveLength(6);
    expect(batches.slice(1).filter((b) => b.length > 0)).toEqual([[subs[2]!.documentId]]);
    for (const s of subs) expect(handled.get(s.documentId)).toEqual(s === subs[2] ? [1, 2] : [1]);
  });

  it('staleness is read once per document of a batch: two revisions of one document in one batch, only the newest is handled', async () => {
    const r1 = submittedEvent('b1', { documentId: 'stale-batch', revision: 1 });
    const r2 = submittedEvent('b2', { documentId: 'stale-batch', revision: 2 });
    for (const e of [r1, r2]) await publishEvent(bus, e);
    const seen: number[] = [];
    const r = batchedExtractor({
      handle: async (e) => {
        if (e.documentId !== 'stale-batch') return [];
        seen.push(e.revision);
        return [follow(e, 'document.extracted.v1', { title: null, type: 'text', text: 'x', url: null, format: 'plain' })];
      },
    });
    await drained(async () => (await lastEvent(bus, 'stale-batch', 'extracted')) !== null);
    await r.stop();
    expect(seen).toEqual([2]);
  });

  it('a reader of some task types acks the others unread by their header, and decodes a message without one', async () => {
    const mem = submittedEvent('a memory', { data: { taskType: 'memory' } });
    const rag = submittedEvent('a superrag one', { data: { taskType: 'superrag' } });
    const old = submittedEvent('written before the header', { data: { taskType: 'superrag' } });
    const indexed = (s: DocumentEvent) => follow(s, 'document.indexed.v1', { model: 'm', dim: 2, chunkCount: 1, removed: 0 });
    // The header as the stages carry it from the submission; `old` has none.
    await publishEvent(bus, indexed(mem), { headers: { [TASK_TYPE_HEADER]: 'memory' } });
    await publishEvent(bus, indexed(rag), { headers: { [TASK_TYPE_HEADER]: 'superrag' } });
    await publishEvent(bus, indexed(old));
    const seen: string[] = [];
    const mine = new Set([mem.documentId, rag.documentId, old.documentId]);
    const r = runConsumer({ bus, consumer: 'memorizer', log, handle: async (e) => void (mine.has(e.documentId) && seen.push(e.documentId)) });
    await drained(async () => {
      const i = await bus.jsm.consumers.info(STREAM_DOCS, 'memorizer');
      return i.num_pending === 0 && i.num_ack_pending === 0;
    });
    await r.stop();
    expect(seen.sort()).toEqual([mem.documentId, old.documentId].sort());
  });

  it('publishEvent marks a submission with its task type', async () => {
    const sub = submittedEvent('marked', { data: { taskType: 'memory' } });
    await publishEvent(bus, sub);
    const m = await bus.jsm.direct.getMessage(STREAM_DOCS, { last_by_subj: `doc.${sub.documentId}.submitted` });
    expect(m?.header.get(TASK_TYPE_HEADER)).toBe('memory');
  });

  it('serial batches (group commit): one batch at a time, and what arrives meanwhile is the next batch', async () => {
    const indexed = (text: string) => follow(submittedEvent(text), 'document.indexed.v1', { model: 'm', dim: 2, chunkCount: 1, removed: 0 });
    const first = Array.from({ length: 3 }, (_, i) => indexed(`first ${i}`));
    const later = Array.from({ length: 20 }, (_, i) => indexed(`later ${i}`));
    const mine = new Set([...first, ...later].map((e) => e.documentId));
    for (const e of first) await publishEvent(bus, e);
    const sizes: number[] = [];
    let active = 0;
    let most = 0;
    let handled = 0;
    const r = runConsumer({
      bus,
      consumer: 'memorizer',
      log,
      concurrency: 64,
      batch: { size: 32, waitMs: 5, serial: true },
      handleBatch: async (items) => {
        const n = items.filter((i) => mine.has(i.event.documentId)).length;
        active++;
        most = Math.max(most, active);
        if (n > 0) sizes.push(n);
        // The first batch is slow (a long commit): the 20 published meanwhile gather behind it.
        if (sizes.length === 1 && n > 0) await new Promise((res) => setTimeout(res, 500));
        handled += n;
        active--;
        return items.map(() => ({ status: 'fulfilled' as const, value: [] }));
      },
    });
    await new Promise((res) => setTimeout(res, 150));
    for (const e of later) await publishEvent(bus, e);
    const deadline = Date.now() + 15_000;
    while (handled < first.length + later.length && Date.now() < deadline) await new Promise((res) => setTimeout(res, 25));
    await r.stop();
    expect(most).toBe(1);
    expect(sizes[0]).toBe(3);
    expect(sizes.slice(1).reduce((a, b) => a + b, 0)).toBe(20);
    // Without serial batches they would have gone in batches gathered for 5 ms each, one or a few at a time.
    expect(sizes[1]).toBeGreaterThanOrEqual(15);
  });
});
