import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import path from 'node:path';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { execFileSync } from 'node:child_process';
import { SqliteDocumentViews } from '@memstream/views';
import { SqliteChunkIndex } from '@memstream/chunk-index';
import { REPO_ROOT, compareViews, isHost, rebuildViews } from '@memstream/cli';
import { connectBus, type Bus } from '@memstream/bus';
import { CONSUMERS, STREAM_DOCS } from '@memstream/contracts';
import { compareIndexes, rebuildIndex } from '../packages/cli/src/replay-index.js';
import { createLogger } from '@memstream/kit';
import { api, startTestStack, waitFor, waitTagDone, type TestStack } from './support/stack.js';
import { deliverySnapshot, redeliveries, waitIdle } from './support/deliveries.js';

/** Documents per round (the kill comes at a third, while batches are held); MEMSTREAM_CRASH_DOCS changes it. */
const DOCS_PER_ROUND = Number(process.env.MEMSTREAM_CRASH_DOCS ?? 300);
const SENDERS = 8;
const WORKERS = ['extractor', 'chunker', 'embedder', 'indexer', 'projection'] as const;

const WORDS = 'stream ledger replay chunk vector index broker durable consumer revision projection tombstone payload subject sequence window backoff redelivery snapshot tenant'.split(' ');
function text(round: string, i: number): string {
  const w = (k: number) => WORDS[(i * 7 + k * 13) % WORDS.length];
  const paras = Array.from({ length: 3 + (i % 4) }, (_, p) => `Paragraph ${p} of document ${i} in round ${round}: the ${w(p)} meets the ${w(p + 1)} and the ${w(p + 2)}.`);
  return `# ${round} ${i}\n\n${paras.join('\n\n')}`;
}

/**
 * kill -9 each service in turn — every worker, the projection and the gateway — while documents
 * stream (each batch consumer in the middle of a batch: while it holds several unacked messages),
 * then start it again. The stack runs as `./memstream up` does: a worker's process is its worker
 * host, so each kill takes the other workers of the host with it, each in the middle of its own
 * batches, and the host comes back whole. Every document the gateway accepted must reach done exactly once:
 * one view at revision 1 and the index holding exactly its chunks — no duplicates, nothing
 * missing, nothing left in progress. A request the dead gateway never answered is retried with
 * its customId (or given up); the document then exists once, done, or not at all.
 */
describe('crash: kill -9 each service while documents are in flight', () => {
  let stack: TestStack;
  let client: ReturnType<typeof api>;
  let bus: Bus;
  /** Per round, every document that must exist (and be done) at the end. */
  const ids = new Map<string, string[]>();
  const t0 = Date.now();

  beforeAll(async () => {
    stack = await startTestStack();
    client = api(stack);
    bus = await connectBus({ url: stack.nats.url, name: 'crash-test', log: createLogger('test', { level: 'silent' }) });
  });
  afterAll(async () => {
    await bus?.close();
    await stack?.teardown();
    console.log(`[crash] whole file: ${Date.now() - t0} ms`);
  });

  const waitDone = (round: string, n: number) => waitTagDone(stack, round, n, 120_000, 200);

  for (const worker of WORKERS) {
    it(`kill -9 ${worker}: all ${DOCS_PER_ROUND} documents reach done`, async () => {
      const round = `crash-${worker}`;
      const mine: string[] = [];
      ids.set(round, mine);
      const before = await deliverySnapshot(bus);
      const start = Date.now();
      let next = 0;
      let killed = false;
      let heldAtKill = 0;
      // Under ./memstream up's layout a worker shares its process with the others of its host: the kill takes them all.
      let killedProcess = '';
      const send = async () => {
        while (next < DOCS_PER_ROUND) {
          const i = next++;
          if (i === Math.floor(DOCS_PER_ROUND / 3) && !killed) {
            killed = true;
            // In the middle of a batch: killed once its consumer holds several messages unacked.
            heldAtKill = await waitFor(`${worker} holding a batch`, async () => {
              // Either lane's consumer (a round is one tag: past its first 64 documents, the bulk lane).
              const durables = [CONSUMERS[worker].durable, ...(CONSUMERS[worker].bulkDurable ? [CONSUMERS[worker].bulkDurable] : [])];
              let held = 0;
              for (const d of durables) held += (await bus.jsm.consumers.info(STREAM_DOCS, d)).num_ack_pending;
              return held >= 2 ? held : undefined;
            }, 60_000, 5);
            const p = stack.procs.get(worker)!;
            killedProcess = isHost(p) ? `process ${p.name} (${p.services.join(', ')})` : 'its process';
            await stack.stopService(worker, 'SIGKILL');
          }
          const r = await client.add(text(round, i), { containerTag: round, metadata: { i } });
          expect(r.status).toBe(200);
          mine.push(r.body.id);
        }
      };
      await Promise.all(Array.from({ length: SENDERS }, send));
      expect(killed).toBe(true);
      expect(heldAtKill).toBeGreaterThanOrEqual(2);
      const sentMs = Date.now() - start;
      await stack.start(worker);
      await waitDone(round, DOCS_PER_ROUND);
      const doneMs = Date.now() - start;
      await waitIdle(bus);
      const re = redeliveries(before, await deliverySnapshot(bus));
      console.log(`[crash] kill -9 ${worker}, ${killedProcess}, holding ${heldAtKill} messages of its batches: ${DOCS_PER_ROUND} documents, all sent in ${(sentMs / 1000).toFixed(1)} s, all done in ${(doneMs / 1000).toFixed(1)} s; redeliveries ${re.total} (${re.text})`);
    }, 180_000);
  }

  it(`kill -9 gateway: every document whose add got a 200 is done once; one whose add failed is done or absent`, async () => {
    const round = 'crash-gateway';
    const accepted = new Map<string, string>();
    const abandoned: string[] = [];
    const mine: string[] = [];
    ids.set(round, mine);
    const before = await deliverySnapshot(bus);
    const start = Date.now();
    let next = 0;
    let gatewayUp = true;
    let restart: Promise<void> | null = null;
    let connectionErrors = 0;
    let retried = 0;
    let storedBeforeRetry = 0;
    const send = async () => {
      while (next < DOCS_PER_ROUND) {
        const i = next++;
        if (i === Math.floor(DOCS_PER_ROUND / 3) && !restart) {
          // Killed while the other senders' requests are in flight; started again at once, on a new port.
          gatewayUp = false;
          restart = (async () => {
            await stack.stopService('gateway', 'SIGKILL');
            await stack.start('gateway');
            gatewayUp = true;
          })();
        }
        const customId = `${round}-${i}`;
        for (let attempt = 0; ; attempt++) {
          const r = await client.add(text(round, i), { containerTag: round, customId, metadata: { i } }).catch((err: Error) => ({ status: 0, body: { error: String(err.cause ?? err) } }));
          if (r.status === 200) {
            accepted.set(customId, r.body.id);
            break;
          }
          // No answer: the connection was reset or refused. Nothing else is acceptable.
          expect(r.status, JSON.stringify(r.body)).toBe(0);
          connectionErrors++;
          await waitFor('the gateway back', async () => (gatewayUp ? true : undefined), 60_000, 50);
          // Half the failed adds are given up (the client went away), half retried with the same customId.
          if (i % 2 === 1) {
            abandoned.push(customId);
            break;
          }
          // Whether the dead gateway had stored it before it died: the retry must then change nothing.
          if ((await client.get(customId)).status === 200) storedBeforeRetry++;
          retried++;
          if (attempt > 20) throw new Error(`${customId} never accepted`);
        }
      }
    };
    await Promise.all(Array.from({ length: SENDERS }, send));
    await restart;
    expect(connectionErrors).toBeGreaterThan(0);
    mine.push(...accepted.values());
    // A given-up add either never reached the log, or did and is processed like any other.
    let abandonedPresent = 0;
    for (const customId of abandoned) {
      const r = await client.get(customId);
      expect([200, 404]).toContain(r.status);
      if (r.status === 200) {
        abandonedPresent++;
        mine.push(r.body.id);
      }
    }
    const sentMs = Date.now() - start;
    await waitDone(round, mine.length);
    const doneMs = Date.now() - start;
    for (const customId of abandoned) {
      const r = await client.get(customId);
      if (r.status === 200) expect(r.body.status).toBe('done');
    }
    // Retried adds did not make a second revision: the same customId is the same document, unchanged.
    const views = SqliteDocumentViews.open(path.join(stack.dataDir, 'views.sqlite'));
    try {
      const { items, total } = await views.list({ containerTags: [round], sort: 'createdAt', order: 'asc', limit: 1000, offset: 0 });
      expect(total).toBe(mine.length);
      expect(new Set(items.map((v) => v.customId)).size).toBe(total);
      for (const v of items) expect(v.revision, v.id).toBe(1);
    } finally {
      await views.close();
    }
    await waitIdle(bus);
    const re = redeliveries(before, await deliverySnapshot(bus));
    console.log(
      `[crash] kill -9 gateway: ${DOCS_PER_ROUND} adds, ${accepted.size} answered 200 (${retried} of them after a retry, ${storedBeforeRetry} of those already stored by the dead gateway), ${abandoned.length} given up after a connection error ` +
        `(${abandonedPresent} of those had reached the log and are done, ${abandoned.length - abandonedPresent} never existed); ${connectionErrors} connection errors; ` +
        `all sent in ${(sentMs / 1000).toFixed(1)} s, all done in ${(doneMs / 1000).toFixed(1)} s; redeliveries ${re.total} (${re.text})`,
    );
  }, 180_000);

  it('no document is duplicated or left behind in the view or the index', async () => {
    const views = SqliteDocumentViews.open(path.join(stack.dataDir, 'views.sqlite'));
    const index = SqliteChunkIndex.open(path.join(stack.dataDir, 'index.sqlite'));
    try {
      const all: string[] = [...ids.values()].flat();
      expect(new Set(all).size).toBe(all.length);
      let chunkSum = 0;
      let viewCount = 0;
      for await (const v of views.all()) {
        viewCount++;
        expect(v.status, v.id).toBe('done');
        expect(v.revision, v.id).toBe(1);
        const chunks = await index.getDocumentChunks(v.id);
        expect(chunks.length, v.id).toBe(v.chunkCount);
        expect(chunks.map((c) => c.index)).toEqual(chunks.map((_, i) => i));
        chunkSum += v.chunkCount;
      }
      expect(viewCount).toBe(all.length);
      const stats = await index.stats();
      expect(stats).toEqual({ documents: all.length, chunks: chunkSum });
      const counts = await views.countByStatus();
      expect(counts).toMatchObject({ queued: 0, extracting: 0, chunking: 0, embedding: 0, failed: 0, done: all.length });
      console.log(`[crash] end state: ${viewCount} views all done at revision 1, ${chunkSum} chunks, index holds exactly each document's chunks`);
    } finally {
      await views.close();
      await index.close();
    }
  });

  it('the view rebuilt from the log equals the live one', async () => {
    const live = SqliteDocumentViews.open(path.join(stack.dataDir, 'views.sqlite'));
    const rebuilt = SqliteDocumentViews.open(path.join(mkdtempSync(path.join(tmpdir(), 'memstream-rebuild-')), 'views.sqlite'));
    const n = [...ids.values()].flat().length;
    try {
      const t = Date.now();
      const r = await rebuildViews(bus, rebuilt);
      console.log(`[crash] replay: ${r.documents} documents from ${r.events} events in ${Date.now() - t} ms`);
      expect(r.documents).toBe(n);
      const cmp = await compareViews(live, rebuilt);
      expect(cmp).toEqual({ same: n, different: [], onlyInA: [], onlyInB: [] });
    } finally {
      await live.close();
      await rebuilt.close();
    }
  });

  it('the index rebuilt from the log equals the live one', async () => {
    const live = SqliteChunkIndex.open(path.join(stack.dataDir, 'index.sqlite'));
    const rebuilt = SqliteChunkIndex.open(path.join(mkdtempSync(path.join(tmpdir(), 'memstream-rebuild-')), 'index.sqlite'));
    const all = [...ids.values()].flat();
    try {
      const r = await rebuildIndex(bus, rebuilt);
      expect(r.documents).toBe(all.length);
      const cmp = await compareIndexes(live, rebuilt, all);
      expect(cmp).toMatchObject({ same: all.length, different: [], onlyInA: [], onlyInB: [] });
      expect(cmp.statsA).toEqual(cmp.statsB);
      console.log(`[crash] index replay: ${r.documents} documents, ${r.chunks} chunks, equal to the live index`);
    } finally {
      await live.close();
      await rebuilt.close();
    }
  });

  it('./memstream replay projection says the same, as a user runs it', () => {
    const out = execFileSync(process.execPath, ['--import', 'tsx', 'packages/cli/src/main.ts', 'replay', 'projection'], {
      cwd: REPO_ROOT,
      env: { ...process.env, NATS_URL: stack.nats.url, MEMSTREAM_DATA_DIR: stack.dataDir, MEMSTREAM_ACK_WAIT_MS: '4000' },
      encoding: 'utf8',
    });
    const n = [...ids.values()].flat().length;
    expect(out).toContain(`rebuilt ${n} documents from`);
    expect(out).toContain(`compared with the live view: ${n} equal, 0 different, 0 only live, 0 only rebuilt`);
  }, 60_000);
});
