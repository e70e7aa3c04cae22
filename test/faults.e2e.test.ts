import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import path from 'node:path';
import { stopProcess } from '@memstream/cli';
import { SqliteChunkIndex } from '@memstream/chunk-index';
import { SqliteDocumentViews } from '@memstream/views';
import { api, startTestStack, waitFor, waitTagDone, type TestStack } from './support/stack.js';

const WORDS = 'ledger replay chunk vector broker durable consumer revision projection tombstone payload subject'.split(' ');
const text = (round: string, i: number) => `# ${round} ${i}\n\n${WORDS.map((w, k) => `${w}-${(i * 31 + k) % 97}`).join(' ')}.\n\nSecond paragraph of ${round} number ${i}.`;

/**
 * Faults of the infrastructure rather than of one stage: the broker restarting under load, and
 * one of two embedder replicas dying. Every document the gateway accepted must reach done
 * exactly once; a request refused while the broker is away is retried by the client, as the
 * SDK would.
 */
describe('faults: broker restart and a lost replica', () => {
  let stack: TestStack;
  let client: ReturnType<typeof api>;

  beforeAll(async () => {
    stack = await startTestStack();
    client = api(stack);
  });
  afterAll(async () => {
    await stack?.teardown();
  });

  async function expectAllDoneOnce(tag: string, ids: string[]) {
    await waitTagDone(stack, tag, ids.length, 120_000, 250);
    const views = SqliteDocumentViews.open(path.join(stack.dataDir, 'views.sqlite'));
    const index = SqliteChunkIndex.open(path.join(stack.dataDir, 'index.sqlite'));
    try {
      const { items, total } = await views.list({ containerTags: [tag], sort: 'createdAt', order: 'asc', limit: 1000, offset: 0 });
      expect(total).toBe(ids.length);
      expect(new Set(items.map((v) => v.id))).toEqual(new Set(ids));
      for (const v of items) {
        expect(v.revision, v.id).toBe(1);
        expect((await index.getDocumentChunks(v.id)).length, v.id).toBe(v.chunkCount);
      }
    } finally {
      await views.close();
      await index.close();
    }
  }

  it('restart nats-server while 300 documents stream: every accepted one is done exactly once', async () => {
    const tag = 'fault-broker';
    const ids: string[] = [];
    let refused = 0;
    let next = 0;
    let restarted = false;
    const t0 = Date.now();
    const send = async () => {
      while (next < 300) {
        const i = next++;
        if (i === 100 && !restarted) {
          restarted = true;
          void stack.nats.restart();
        }
        // A client retries what the gateway refused (the SDK does for 5xx), with the document's
        // customId: a request in flight when the broker went away is refused though it may have
        // been stored (its 503 says so), and the retry must land on the same document.
        for (let attempt = 0; ; attempt++) {
          const r = await client.add(text(tag, i), { containerTag: tag, customId: `${tag}-${i}` }).catch(() => ({ status: 599, body: null }));
          if (r.status === 200) {
            ids.push(r.body.id);
            break;
          }
          refused++;
          // The gateway says the broker is away with a 503 and Retry-After, never a bare 500.
          if (r.status !== 599) expect(r.status).toBe(503);
          if (attempt > 200) throw new Error(`document ${i} never accepted: ${r.status}`);
          await new Promise((res) => setTimeout(res, 100));
        }
      }
    };
    await Promise.all(Array.from({ length: 6 }, send));
    expect(restarted).toBe(true);
    await expectAllDoneOnce(tag, ids);
    // Nothing rode it out by being started again: no service process ended while the broker was away.
    expect(stack.crashes).toEqual([]);
    console.log(`[faults] nats-server restarted mid-stream: ${ids.length} accepted, ${refused} requests refused while it was away and retried, all done once in ${Date.now() - t0} ms`);
  }, 180_000);

  it('two embedder replicas on one consumer, one killed mid-stream: every document done exactly once', async () => {
    const tag = 'fault-replica';
    const first = stack.procs.get('embedder')!;
    const second = await stack.start('embedder');
    // The stack tracks one process per name: keep the first as the one teardown stops.
    stack.procs.set('embedder', first);
    const ids: string[] = [];
    let next = 0;
    let killed = false;
    const t0 = Date.now();
    const send = async () => {
      while (next < 300) {
        const i = next++;
        if (i === 120 && !killed) {
          killed = true;
          await stopProcess(second.child, 'SIGKILL');
        }
        const r = await client.add(text(tag, i), { containerTag: tag });
        expect(r.status).toBe(200);
        ids.push(r.body.id);
      }
    };
    await Promise.all(Array.from({ length: 6 }, send));
    expect(killed).toBe(true);
    await expectAllDoneOnce(tag, ids);
    console.log(`[faults] one of two embedder replicas killed mid-stream: ${ids.length} documents done once in ${Date.now() - t0} ms`);
  }, 180_000);
});

/** A stage that stops moving: its documents are re-driven after a lease, then failed — never stuck. */
describe('stalled documents', () => {
  let stack: TestStack;
  let client: ReturnType<typeof api>;

  beforeAll(async () => {
    // One stage missing while the others run: a process per service, as in Kubernetes (under ./memstream up a
    // stage goes, and comes back, with the other stages of its worker host; crash.e2e kills those).
    stack = await startTestStack({ layout: 'per-service', env: { STALL_LEASE_MS: '1500', STALL_SCAN_MS: '200', STALL_MAX_REDRIVES: '2' } });
    client = api(stack);
  });
  afterAll(async () => {
    await stack?.teardown();
  });

  const timelineIds = async (id: string) => ((await client.call('GET', `/v3/documents/${id}/timeline`)).body.events as Array<{ type: string }>).map((e) => e.type);

  it('a document stuck behind a missing stage is re-driven and finishes once the stage is back', async () => {
    await stack.stopService('chunker', 'SIGKILL');
    const t0 = Date.now();
    const id = (await client.add('Stalled then rescued: the chunker was away for a while.')).body.id as string;
    // The extracted event published again under a new id: two of them in the log.
    await waitFor('a re-drive', async () => ((await timelineIds(id)).filter((t) => t === 'document.extracted.v1').length >= 2 ? true : undefined), 20_000, 200);
    const redrivenMs = Date.now() - t0;
    await stack.start('chunker');
    const doc = await waitFor('done', async () => {
      const d = (await client.get(id)).body;
      return d.status === 'done' ? d : undefined;
    }, 30_000, 100);
    expect(doc.chunkCount).toBeGreaterThan(0);
    console.log(`[faults] stalled (lease 1.5 s): first re-drive ${redrivenMs} ms after the add, done ${Date.now() - t0} ms after it once the chunker was back`);
  }, 60_000);

  it('past its re-drives it ends failed with the reason, not in progress for ever', async () => {
    await stack.stopService('chunker', 'SIGKILL');
    const t0 = Date.now();
    const id = (await client.add('Stalled for good: no chunker ever comes back.')).body.id as string;
    const doc = await waitFor('failed', async () => {
      const d = (await client.get(id)).body;
      return d.status === 'failed' ? d : undefined;
    }, 30_000, 200);
    expect(doc.error).toMatchObject({ class: 'exhausted' });
    expect(doc.reason).toMatch(/stalled: no progress in chunking after 2 re-drives/);
    console.log(`[faults] stalled for good (lease 1.5 s, 2 re-drives): failed as exhausted ${Date.now() - t0} ms after the add: ${doc.reason}`);
    await stack.start('chunker');
  }, 60_000);
});
