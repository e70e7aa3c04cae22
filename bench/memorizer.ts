/**
 * Memorizer cost benchmark: the memorizer's per-document work on one container tag (read what the
 * extractor is shown, offline extraction, look up what the candidates may concern, resolve, apply
 * the commit to a SQLite memory store with its embeddings), in process, without NATS, on the
 * ingest bench's ~2 KB documents. Reports CPU ms per document per block of documents as the tag
 * grows, beside a baseline in the same run: the whole-tag approach memstream used before
 * (every live memory of the tag read and compared with every candidate).
 *
 *   ./memstream bench memorizer [--docs 2000] [--baseline-docs 300] [--block 100] [--json]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { commandArgs } from '@memstream/cli';
import type { MemoryCommit } from '@memstream/contracts';
import { HashedEmbedder } from '@memstream/embedder';
import { OfflineExtractor, SqliteMemoryStore, extractionContext, resolveExtraction } from '@memstream/memory';
import { makeDoc } from './bench-docs.js';

const USAGE = `usage: ./memstream bench memorizer [--docs 2000] [--baseline-docs 300] [--block 100] [--json]

The memorizer's CPU per document on one growing tag, indexed lookups (now) against reading the whole tag (before).`;
const { values } = commandArgs('bench memorizer', USAGE, {
  options: { docs: { type: 'string', default: '2000' }, 'baseline-docs': { type: 'string', default: '300' }, block: { type: 'string', default: '100' }, json: { type: 'boolean', default: false } },
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

if (!values.json) process.stdout.write(`memstream memorizer bench — one tag, ${values.docs} documents (baseline ${values['baseline-docs']}), CPU per document per block of ${BLOCK}\n`);
const indexed = await run(Number(values.docs), false);
const baseline = await run(Number(values['baseline-docs']), true);
if (values.json) process.stdout.write(JSON.stringify({ block: BLOCK, indexed, baseline }, null, 2) + '\n');
