import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import path from 'node:path';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { SqliteDocumentViews } from '@memstream/views';
import { SqliteChunkIndex } from '@memstream/chunk-index';
import { compareViews, rebuildViews } from '@memstream/cli';
import { connectBus } from '@memstream/bus';
import { createLogger } from '@memstream/kit';
import { execFileSync } from 'node:child_process';
import { REPO_ROOT } from '@memstream/cli';
import { api, startTestStack, waitFor, type TestStack } from './support/stack.js';

const DOCS_PER_ROUND = 200;
const WORKERS = ['extractor', 'chunker', 'embedder', 'indexer', 'projection'] as const;

const WORDS = 'stream ledger replay chunk vector index broker durable consumer revision projection tombstone payload subject sequence window backoff redelivery snapshot tenant'.split(' ');
function text(round: string, i: number): string {
  const w = (k: number) => WORDS[(i * 7 + k * 13) % WORDS.length];
  const paras = Array.from({ length: 3 + (i % 4) }, (_, p) => `Paragraph ${p} of document ${i} in round ${round}: the ${w(p)} meets the ${w(p + 1)} and the ${w(p + 2)}.`);
  return `# ${round} ${i}\n\n${paras.join('\n\n')}`;
}

/**
 * kill -9 each worker in turn while 200 documents are in flight, then start it again.
 * Every document must reach done exactly once: one view per document at revision 1, and the
 * index holding exactly its chunks — no duplicates, nothing missing, nothing left in progress.
 */
describe('crash: kill -9 each worker while documents are in flight', () => {
  let stack: TestStack;
  let client: ReturnType<typeof api>;
  const ids = new Map<string, string[]>();

  beforeAll(async () => {
    stack = await startTestStack();
    client = api(stack);
  });
  afterAll(async () => {
    await stack?.teardown();
  });

  for (const worker of WORKERS) {
    it(`kill -9 ${worker}: all ${DOCS_PER_ROUND} documents reach done`, async () => {
      const round = `crash-${worker}`;
      const mine: string[] = [];
      ids.set(round, mine);
      const t0 = Date.now();
      let next = 0;
      let killed = false;
      const send = async () => {
        while (next < DOCS_PER_ROUND) {
          const i = next++;
          if (i === Math.floor(DOCS_PER_ROUND / 3) && !killed) {
            killed = true;
            await stack.stopService(worker, 'SIGKILL');
          }
          const r = await client.add(text(round, i), { containerTag: round, metadata: { i } });
          expect(r.status).toBe(200);
          mine.push(r.body.id);
        }
      };
      await Promise.all(Array.from({ length: 8 }, send));
      expect(killed).toBe(true);
      await stack.start(worker);
      const views = SqliteDocumentViews.open(path.join(stack.dataDir, 'views.sqlite'));
      try {
        await waitFor(
          `${DOCS_PER_ROUND} documents of ${round} done`,
          async () => {
            const { total } = await views.list({ containerTags: [round], statuses: ['done'], sort: 'createdAt', order: 'asc', limit: 1, offset: 0 });
            return total === DOCS_PER_ROUND ? true : undefined;
          },
          120_000,
          200,
        );
      } finally {
        await views.close();
      }
      console.log(`[crash] ${worker}: ${DOCS_PER_ROUND} documents done in ${Date.now() - t0} ms after a kill -9 mid-stream`);
    }, 180_000);
  }

  it('no document is duplicated or left behind in the view or the index', async () => {
    const views = SqliteDocumentViews.open(path.join(stack.dataDir, 'views.sqlite'));
    const index = SqliteChunkIndex.open(path.join(stack.dataDir, 'index.sqlite'));
    try {
      const all: string[] = [...ids.values()].flat();
      expect(new Set(all).size).toBe(WORKERS.length * DOCS_PER_ROUND);
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
    } finally {
      await views.close();
      await index.close();
    }
  });

  it('the view rebuilt from the log equals the live one', async () => {
    const bus = await connectBus({ url: stack.nats.url, name: 'replay-test', log: createLogger('test', { level: 'silent' }) });
    const live = SqliteDocumentViews.open(path.join(stack.dataDir, 'views.sqlite'));
    const rebuilt = SqliteDocumentViews.open(path.join(mkdtempSync(path.join(tmpdir(), 'memstream-rebuild-')), 'views.sqlite'));
    try {
      const t0 = Date.now();
      const r = await rebuildViews(bus, rebuilt);
      console.log(`[crash] replay: ${r.documents} documents from ${r.events} events in ${Date.now() - t0} ms`);
      expect(r.documents).toBe(WORKERS.length * DOCS_PER_ROUND);
      const cmp = await compareViews(live, rebuilt);
      expect(cmp).toEqual({ same: WORKERS.length * DOCS_PER_ROUND, different: [], onlyInA: [], onlyInB: [] });
    } finally {
      await live.close();
      await rebuilt.close();
      await bus.close();
    }
  });

  it('./memstream replay projection says the same, as a user runs it', () => {
    const out = execFileSync(process.execPath, ['--import', 'tsx', 'packages/cli/src/main.ts', 'replay', 'projection'], {
      cwd: REPO_ROOT,
      env: { ...process.env, NATS_URL: stack.nats.url, MEMSTREAM_DATA_DIR: stack.dataDir, MEMSTREAM_ACK_WAIT_MS: '4000' },
      encoding: 'utf8',
    });
    const n = WORKERS.length * DOCS_PER_ROUND;
    expect(out).toContain(`rebuilt ${n} documents from`);
    expect(out).toContain(`compared with the live view: ${n} equal, 0 different, 0 only live, 0 only rebuilt`);
  });
});
