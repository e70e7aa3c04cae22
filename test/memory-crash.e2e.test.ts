import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { connectBus, type Bus } from '@memstream/bus';
import { createLogger } from '@memstream/kit';
import { REPO_ROOT } from '@memstream/cli';
import { HashedEmbedder } from '@memstream/embedder';
import { SqliteMemoryStore, readCommits } from '@memstream/memory';
import { api, startTestStack, waitFor, type TestStack } from './support/stack.js';

/** Documents in all; MEMSTREAM_MEMORY_CRASH_DOCS lowers or raises it. */
const DOCS = Number(process.env.MEMSTREAM_MEMORY_CRASH_DOCS ?? 120);
const TAGS = 4;
const CITIES = ['Lisbon', 'Berlin', 'Porto', 'Madrid', 'Vienna', 'Oslo'];
const EMPLOYERS = ['Siemens', 'Bosch', 'Zeiss', 'Airbus'];

/** Statements that version each other within a tag (a move, a new job) and some that stand alone. */
function text(i: number): string {
  return `I live in ${CITIES[i % CITIES.length]}. I work at ${EMPLOYERS[(i >> 1) % EMPLOYERS.length]}. On day ${i} I went hiking near the river with my sister.`;
}

/**
 * kill -9 the memorizer while memory documents stream, start it again: every document is
 * memorized exactly once per tag (in one extraction commit of the MEMORY stream, its own or its
 * dynamic-dreaming group's), and a replay
 * of the stream into an empty store equals the live store record for record.
 */
describe('memory crash: kill -9 the memorizer mid-stream, then replay the memory store', () => {
  let stack: TestStack;
  let bus: Bus;
  beforeAll(async () => {
    stack = await startTestStack();
    bus = await connectBus({ url: stack.nats.url, name: 'memory-crash-test', log: createLogger('test', { level: 'silent' }) });
  });
  afterAll(async () => {
    await bus?.close();
    await stack?.teardown();
  });

  it(`all ${DOCS} documents are memorized once; the replayed store equals the live one`, async () => {
    const client = api(stack);
    const tagOf = (i: number) => `mcrash-${i % TAGS}`;
    const ids: string[] = [];
    for (let i = 0; i < DOCS; i++) {
      if (i === Math.floor(DOCS / 3)) await stack.stopService('memorizer', 'SIGKILL');
      const r = await client.add(text(i), { containerTag: tagOf(i), metadata: { date: new Date(Date.UTC(2026, 0, 1) + i * 3600_000).toISOString() } });
      expect(r.status).toBe(200);
      ids.push(r.body.id);
    }
    await stack.start('memorizer');

    const live = SqliteMemoryStore.open(path.join(stack.dataDir, 'memories.sqlite'), new HashedEmbedder());
    try {
      await waitFor(
        `all ${DOCS} documents memorized`,
        async () => {
          const done = await Promise.all(ids.map((id, i) => live.memorized(id, tagOf(i))));
          return done.every((d) => d !== null) ? true : undefined;
        },
        180_000,
        250,
      );

      // Exactly one extraction per (document, tag), alone or in a dynamic-dreaming group: nothing
      // memorized twice, nothing lost (the kill lands while groups wait and while they commit).
      const extractions = new Map<string, number>();
      let groups = 0;
      for await (const { commit } of readCommits(bus)) {
        const c = commit.cause;
        const docs = c.kind === 'extraction' ? [c.documentId] : c.kind === 'extraction-group' ? c.documents.map((d) => d.documentId) : [];
        if (c.kind === 'extraction-group') groups++;
        for (const d of docs) extractions.set(`${d}|${commit.containerTag}`, (extractions.get(`${d}|${commit.containerTag}`) ?? 0) + 1);
      }
      expect(extractions.size).toBe(DOCS);
      expect([...extractions.values()].every((n) => n === 1)).toBe(true);
      // The restarted memorizer meets a backlog of every tag: documents of one tag were grouped.
      expect(groups).toBeGreaterThan(0);

      // Each tag ends with one latest home and one latest employer: the chain resolved in order.
      for (let t = 0; t < TAGS; t++) {
        const latest = (await live.tagMemories(`mcrash-${t}`)).filter((m) => m.isLatest && !m.isForgotten);
        expect(latest.filter((m) => m.attribute?.key === 'lives_in')).toHaveLength(1);
        expect(latest.filter((m) => m.attribute?.key === 'works_at')).toHaveLength(1);
      }

      // The operator's command: rebuild from the log beside the live store and compare.
      const replay = spawnSync(process.execPath, ['--import', 'tsx', 'packages/cli/src/main.ts', 'replay', 'memories'], {
        cwd: REPO_ROOT,
        env: { ...process.env, NATS_URL: stack.nats.url, MEMSTREAM_DATA_DIR: stack.dataDir, LOG_LEVEL: 'warn' },
        encoding: 'utf8',
        timeout: 120_000,
      });
      expect(replay.status, replay.stderr).toBe(0);
      const memories = (await live.list({ containerTags: undefined, sort: 'createdAt', order: 'asc', limit: 1_000_000, offset: 0 })).total;
      expect(replay.stdout).toContain(`compared with the live store: ${memories} equal, 0 different, 0 only live, 0 only rebuilt; digests equal`);
    } finally {
      await live.close();
    }
  }, 400_000);
});
