/**
 * Memorizer cost benchmark: the memorizer's per-document work on one container tag (read what the
 * extractor is shown, offline extraction, look up what the candidates may concern, resolve, apply
 * the commit to a SQLite memory store with its embeddings), in process, without NATS, on the
 * ingest bench's ~2 KB documents. Reports CPU ms per document per block of documents as the tag
 * grows, beside a baseline in the same run: the whole-tag approach memstream used before
 * (every live memory of the tag read and compared with every candidate).
 *
 * Then `dreaming: "dynamic"` groups: the same documents through memorizeGroup (the memorizer's
 * pass, with a broker-less log that applies each commit) one at a time and in groups of --group,
 * on fresh tags in the same run: CPU ms per document and commits made.
 *
 *   ./memstream bench memorizer [--docs 2000] [--baseline-docs 300] [--block 100] [--group 8] [--group-docs 400] [--json]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { commandArgs } from '@memstream/cli';
import type { MemoryCommit } from '@memstream/contracts';
import type { MemoryLog } from '@memstream/memory';
import { HashedEmbedder } from '@memstream/embedder';
import { OfflineExtractor, SqliteMemoryStore, extractionContext, memorizeGroup, resolveExtraction, type DocumentToMemorize } from '@memstream/memory';
import { makeDoc } from './bench-docs.js';

const USAGE = `usage: ./memstream bench memorizer [--docs 2000] [--baseline-docs 300] [--block 100] [--group 8] [--group-docs 400] [--json]

The memorizer's CPU per document on one growing tag, indexed lookups (now) against reading the whole tag (before).`;
const { values } = commandArgs('bench memorizer', USAGE, {
  options: {
    docs: { type: 'string', default: '2000' },
    'baseline-docs': { type: 'string', default: '300' },
    block: { type: 'string', default: '100' },
    group: { type: 'string', default: '8' },
    'group-docs': { type: 'string', default: '400' },
    json: { type: 'boolean', default: false },
  },
});
const BLOCK = Number(values.block);

async function run(n: number, wholeTag: boolean): Promise<Array<{ docs: string; memoriesAfter: number; cpuMsPerDoc: number }>> {
  const dir = mkdtempSync(path.join(tmpdir(), 'memstream-bench-memorizer-'));
  const store = SqliteMemoryStore.open(path.join(dir, 'memories.sqlite'), new HashedEmbedder());
  const extractor = new OfflineExtractor();
  const tag = 'bench';
  const rows: Array<{ docs: string; memoriesAfter: number; cpuMsPerDoc: number }> = [];
  let cpu = 0;
  try {
    for (let i = 0; i < n; i++) {
      const c0 = process.cpuUsage();
      const now = new Date();
      const at = now.toISOString();
      const shown = wholeTag ? await store.tagMemories(tag, { liveAt: now }) : await extractionContext(store, tag, now);
      const { candidates } = await extractor.extract({ text: makeDoc(i), format: 'markdown', documentDate: at, entityContext: null, existing: shown });
      const related = wholeTag
        ? shown
        : await store.related(tag, { attributes: candidates.flatMap((c) => (c.attribute ? [c.attribute] : [])), statements: candidates.map((c) => c.memory), ids: [], liveAt: now });
      const id = `mem:d${i}:1:${tag}`;
      const changes = resolveExtraction(related, { commitId: id, containerTag: tag, documentId: `d${i}`, documentDate: at, metadata: {}, extractor: extractor.name, candidates, at });
      const commit: MemoryCommit = {
        id,
        type: 'memory.committed.v1',
        containerTag: tag,
        occurredAt: at,
        correlationId: id,
        cause: { kind: 'extraction', documentId: `d${i}`, revision: 1, extractor: extractor.name, candidates, tokens: 0, ms: 0 },
        changes,
      };
      await store.apply(commit, i + 1);
      const d = process.cpuUsage(c0);
      cpu += (d.user + d.system) / 1000;
      if ((i + 1) % BLOCK === 0 || i + 1 === n) {
        const size = (i % BLOCK) + 1;
        const total = (await store.list({ containerTags: [tag], sort: 'createdAt', order: 'asc', limit: 1, offset: 0 })).total;
        rows.push({ docs: `${i + 2 - size}-${i + 1}`, memoriesAfter: total, cpuMsPerDoc: +(cpu / size).toFixed(1) });
        if (!values.json) process.stdout.write(`  ${wholeTag ? 'whole tag (before)' : 'indexed (now)     '}  documents ${`${i + 2 - size}-${i + 1}`.padEnd(11)} ${String(total).padStart(7)} memories in the tag   ${(cpu / size).toFixed(1).padStart(7)} CPU ms/document\n`);
        cpu = 0;
      }
    }
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
  return rows;
}

/** `n` documents of one tag through memorizeGroup, `size` at a time: CPU ms per document and commits made. */
async function grouped(n: number, size: number): Promise<{ group: number; docs: number; commits: number; memories: number; cpuMsPerDoc: number }> {
  const dir = mkdtempSync(path.join(tmpdir(), 'memstream-bench-memorizer-'));
  const store = SqliteMemoryStore.open(path.join(dir, 'memories.sqlite'), new HashedEmbedder());
  let seq = 0;
  // The broker's part (publish expecting the tag's sequence) is left out: the log applies each commit in order.
  const log = {
    store,
    commit: async (_tag: string, decide: () => Promise<MemoryCommit | null>) => {
      const c = await decide();
      if (!c) return null;
      await store.apply(c, ++seq);
      return { commit: c, seq };
    },
  } as unknown as MemoryLog;
  const ports = { log, extractor: new OfflineExtractor(), now: () => new Date() };
  const tag = 'bench';
  const doc = (i: number): DocumentToMemorize => ({
    documentId: `d${i}`, revision: 1, taskType: 'memory', containerTags: [tag], metadata: {}, entityContext: null, filterByMetadata: null,
    text: makeDoc(i), format: 'markdown', documentDate: new Date().toISOString(), correlationId: `d${i}`, dreaming: 'dynamic',
  });
  try {
    const c0 = process.cpuUsage();
    for (let i = 0; i < n; i += size) await memorizeGroup(ports, tag, Array.from({ length: Math.min(size, n - i) }, (_, k) => doc(i + k)));
    const d = process.cpuUsage(c0);
    const memories = (await store.list({ containerTags: [tag], sort: 'createdAt', order: 'asc', limit: 1, offset: 0 })).total;
    const row = { group: size, docs: n, commits: seq, memories, cpuMsPerDoc: +((d.user + d.system) / 1000 / n).toFixed(1) };
    if (!values.json) process.stdout.write(`  memorizeGroup, groups of ${String(size).padEnd(3)} ${n} documents, ${String(seq).padStart(5)} commits, ${String(memories).padStart(7)} memories   ${row.cpuMsPerDoc.toFixed(1).padStart(7)} CPU ms/document\n`);
    return row;
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (!values.json) process.stdout.write(`memstream memorizer bench — one tag, ${values.docs} documents (baseline ${values['baseline-docs']}), CPU per document per block of ${BLOCK}\n`);
const indexed = await run(Number(values.docs), false);
const baseline = await run(Number(values['baseline-docs']), true);
const groups = Number(values['group-docs']) > 0 ? [await grouped(Number(values['group-docs']), 1), await grouped(Number(values['group-docs']), Number(values.group))] : [];
if (values.json) process.stdout.write(JSON.stringify({ block: BLOCK, indexed, baseline, groups }, null, 2) + '\n');
