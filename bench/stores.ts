/**
 * Store work benchmark: the CPU the projection and the indexer spend per ~2 KB document in their
 * stores (SQLite files in a temporary directory), in process, without NATS.
 *
 * - projection: the events of each document's life (submitted, stage-started, extracted, chunked,
 *   indexed, as the pipeline logs them), interleaved as a pipeline with ~25 documents in flight,
 *   handed to the projection's batch handler in batches of --batch events, as the runner hands
 *   them (its log look-ups answer as in log order: nothing to apply first).
 * - indexer: the same documents chunked by the chunker and embedded by the default static model,
 *   written with ChunkIndex.replaceDocuments in batches of --batch documents, as the indexer's
 *   batch handler does.
 *
 * Each part runs --runs times on a fresh store; the first run (the JIT warming up) is reported
 * apart from the median and minimum of the others.
 *
 *   node --import tsx bench/stores.ts [--docs 3000] [--batch 32] [--runs 5] [--only projection|indexer] [--json]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { follow, recordingContext, submittedEvent } from '@memstream/bus';
import { commandArgs } from '@memstream/cli';
import type { DocumentEvent } from '@memstream/contracts';
import { createEmbedder } from '@memstream/embedder';
import { SqliteDocumentViews } from '@memstream/views';
import { SqliteChunkIndex, type ReplaceDocumentInput } from '../packages/chunk-index/src/index.js';
import { createProjectionHandler } from '../services/projection/src/handlers/index.js';
import { chunkText } from '../services/chunker/src/handlers/index.js';
import { makeDoc } from './bench-docs.js';

const USAGE = `usage: node --import tsx bench/stores.ts [--docs 3000] [--batch 32] [--runs 5] [--only projection|indexer] [--json]

CPU microseconds per ~2 KB document of the projection's and the indexer's store work, in process.`;
const { values } = commandArgs('bench stores', USAGE, {
  options: {
    docs: { type: 'string', default: '3000' },
    batch: { type: 'string', default: '32' },
    runs: { type: 'string', default: '5' },
    only: { type: 'string' },
    json: { type: 'boolean', default: false },
  },
});
const N = Number(values.docs);
const BATCH = Number(values.batch);
const RUNS = Math.max(2, Number(values.runs));

function cpuUs(): number {
  const u = process.cpuUsage();
  return u.user + u.system;
}

function documentId(i: number): string {
  return `bench${String(i).padStart(8, '0')}`;
}

/** The projection's events of document i, 7 ms apart from `t0`: what the log holds for a document that went through. */
function lifeOf(i: number, t0: number): DocumentEvent[] {
  const content = makeDoc(i);
  const sub = submittedEvent(content, {
    documentId: documentId(i),
    occurredAt: new Date(t0).toISOString(),
    data: { containerTags: ['bench'], taskType: 'superrag' },
  });
  let t = t0;
  const at = () => {
    const d = new Date((t += 7));
    return () => d;
  };
  return [
    sub,
    follow(sub, 'document.stage-started.v1', { stage: 'extracting' }, 0, at()),
    follow(sub, 'document.extracted.v1', { title: null, type: 'text', text: content, url: null, format: 'markdown' }, 0, at()),
    follow(sub, 'document.chunked.v1', { tokenizer: 'o200k_base', chunks: [{ index: 0, hash: 'h'.repeat(64), text: content, tokens: 400 }] }, 0, at()),
    follow(sub, 'document.indexed.v1', { model: 'm', dim: 100, chunkCount: 1, removed: 0 }, 0, at()),
  ];
}

/** One projection run on a fresh store: CPU µs per document. */
async function projectionRun(): Promise<number> {
  // Document i's j-th event at tick i + 5j: about 25 documents in flight, each batch mixing their stages.
  const ticks = Array.from({ length: N }, (_, i) => lifeOf(i, Date.parse('2026-01-01T00:00:00Z') + i * 10))
    .flatMap((events, i) => events.map((event, j) => ({ tick: i + 5 * j, event })))
    .sort((a, b) => a.tick - b.tick);
  const dir = mkdtempSync(path.join(tmpdir(), 'memstream-bench-stores-'));
  const views = SqliteDocumentViews.open(path.join(dir, 'views.sqlite'));
  try {
    const handle = createProjectionHandler(views, { lastSubmitted: async () => null, tombstoneRevision: async () => 0 });
    const ctx = recordingContext();
    const c0 = cpuUs();
    for (let k = 0; k < ticks.length; k += BATCH) {
      for (const r of await handle(ticks.slice(k, k + BATCH).map(({ event }) => ({ event, ctx })))) if (r.status === 'rejected') throw r.reason;
    }
    const us = (cpuUs() - c0) / N;
    const counts = await views.countByStatus();
    if (counts.done !== N) throw new Error(`${counts.done} of ${N} views done`);
    return us;
  } finally {
    await views.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The indexer's input for every document: chunked and embedded once, before any run. */
async function embeddedDocuments(): Promise<ReplaceDocumentInput[]> {
  const embedder = createEmbedder({ kind: 'static' });
  const inputs: ReplaceDocumentInput[] = [];
  for (let i = 0; i < N; i++) {
    const chunks = chunkText(makeDoc(i), 'markdown');
    const vectors = await embedder.embed(chunks.map((c) => c.text));
    inputs.push({
      documentId: documentId(i),
      revision: 1,
      model: embedder.model,
      dim: embedder.dim,
      containerTags: ['bench'],
      metadata: {},
      chunks: chunks.map((c, k) => ({ index: c.index, hash: c.hash, text: c.text, vector: vectors[k]! })),
    });
  }
  return inputs;
}

/** One indexer run on a fresh index: CPU µs per document. */
async function indexerRun(inputs: ReplaceDocumentInput[]): Promise<number> {
  const dir = mkdtempSync(path.join(tmpdir(), 'memstream-bench-stores-'));
  const index = SqliteChunkIndex.open(path.join(dir, 'index.sqlite'));
  try {
    const c0 = cpuUs();
    for (let k = 0; k < inputs.length; k += BATCH) await index.replaceDocuments(inputs.slice(k, k + BATCH));
    const us = (cpuUs() - c0) / N;
    const { documents } = await index.stats();
    if (documents !== N) throw new Error(`${documents} of ${N} documents indexed`);
    return us;
  } finally {
    await index.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

function summary(runs: number[]): { firstRun: number; median: number; min: number } {
  const warm = runs.slice(1).sort((a, b) => a - b);
  return { firstRun: Math.round(runs[0]!), median: Math.round(warm[Math.floor((warm.length - 1) / 2)]!), min: Math.round(warm[0]!) };
}

const out: Record<string, unknown> = { docs: N, batch: BATCH, runs: RUNS };
if (values.only !== 'indexer') {
  const runs: number[] = [];
  for (let r = 0; r < RUNS; r++) runs.push(await projectionRun());
  out.projectionCpuUsPerDoc = summary(runs);
}
if (values.only !== 'projection') {
  const inputs = await embeddedDocuments();
  out.chunks = inputs.reduce((n, d) => n + d.chunks.length, 0);
  const runs: number[] = [];
  for (let r = 0; r < RUNS; r++) runs.push(await indexerRun(inputs));
  out.indexerCpuUsPerDoc = summary(runs);
}
if (values.json) console.log(JSON.stringify(out));
else {
  console.log(`store work: ${N} documents of ~2 KB, batches of ${BATCH}, ${RUNS} runs (CPU µs per document: first run; median and min of the others)`);
  for (const [name, key] of [['projection', 'projectionCpuUsPerDoc'], ['indexer', 'indexerCpuUsPerDoc']] as const) {
    const s = out[key] as ReturnType<typeof summary> | undefined;
    if (s) console.log(`  ${name.padEnd(10)} first ${s.firstRun}  median ${s.median}  min ${s.min}${name === 'indexer' ? `  (${out.chunks} chunks)` : ''}`);
  }
}
