/**
 * Scaling one stage: the same load with 1 and then 2 embedder replicas on one durable consumer,
 * and the check that no event is processed twice.
 *
 *   ./memstream bench scaling [--docs 200] [--latency-ms 50] [--clients 8]
 *
 * The embedder is made the bottleneck the way it is in real deployments: an OpenAI-compatible
 * embeddings endpoint with a fixed latency per request (a loopback server here, so the figure
 * measures memstream and not a network), and EMBEDDER_CONCURRENCY=1 so one replica has one
 * request in flight. A second replica on the same consumer should then double the stage's
 * throughput; on 2 cores the rest of the pipeline caps it somewhat below.
 *
 * "Processed once": every document has exactly one `embedded` event in its timeline, and the
 * endpoint saw every chunk text exactly once (replicas never embedded the same message twice).
 * Figures, not assertions; the exit code is non-zero if a document was processed twice.
 */
import { createServer, type Server } from 'node:http';
import { cpus, loadavg } from 'node:os';
import { stopProcess } from '@memstream/cli';
import { api, startTestStack, waitTagDone, type TestStack } from '../test/support/stack.js';
import { commandArgs } from '@memstream/cli';

const USAGE = `usage: ./memstream bench scaling [--docs 200] [--latency-ms 50] [--clients 8]

one and then two embedder replicas on one consumer, and the check that nothing is processed twice.`;
const { values } = commandArgs('bench scaling', USAGE, {
  options: {
    docs: { type: 'string', default: '200' },
    'latency-ms': { type: 'string', default: '50' },
    clients: { type: 'string', default: '8' },
  },
});
const DOCS = Number(values.docs);
const LATENCY = Number(values['latency-ms']);
const CLIENTS = Number(values.clients);
const DIM = 64;

/** The slow embeddings endpoint, counting how often it saw each text. */
function slowEndpoint(): Promise<{ url: string; seen: Map<string, number>; requests: () => number; close: () => Promise<void> }> {
  const seen = new Map<string, number>();
  let requests = 0;
  const server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      requests++;
      const input = (JSON.parse(body) as { input: string[] | string }).input;
      const texts = Array.isArray(input) ? input : [input];
      for (const t of texts) seen.set(t, (seen.get(t) ?? 0) + 1);
      setTimeout(() => {
        const data = texts.map((t, index) => {
          const v = Array.from({ length: DIM }, (_, i) => Math.sin((t.length + 1) * (i + 1)));
          const n = Math.hypot(...v) || 1;
          return { object: 'embedding', index, embedding: v.map((x) => x / n) };
        });
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ object: 'list', data, model: 'bench-slow', usage: { prompt_tokens: 0, total_tokens: 0 } }));
      }, LATENCY);
    });
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => {
      const port = (server.address() as { port: number }).port;
      resolve({ url: `http://127.0.0.1:${port}/v1`, seen, requests: () => requests, close: () => new Promise((r) => server.close(() => r())) });
    }),
  );
}

async function phase(stack: TestStack, tag: string): Promise<{ ms: number; ids: string[] }> {
  const client = api(stack);
  const ids: string[] = [];
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: CLIENTS }, async () => {
      while (next < DOCS) {
        const i = next++;
        const r = await client.add(`# ${tag} document ${i}\n\nThe ${tag} run sends document number ${i}, unique words ${tag}-${i}-${i * 7919}.`, { containerTag: tag });
        if (r.status !== 200) throw new Error(`add failed: ${r.status} ${JSON.stringify(r.body)}`);
        ids.push(r.body.id as string);
      }
    }),
  );
  await waitTagDone(stack, tag, DOCS, 600_000, 50);
  return { ms: performance.now() - t0, ids };
}

async function embeddedOnce(stack: TestStack, ids: string[]): Promise<number> {
  const client = api(stack);
  let twice = 0;
  for (const id of ids) {
    const t = await client.call('GET', `/v3/documents/${id}/timeline`);
    const n = (t.body.events as Array<{ type: string }>).filter((e) => e.type === 'document.embedded.v1').length;
    if (n !== 1) twice++;
  }
  return twice;
}

const endpoint = await slowEndpoint();
const stack = await startTestStack({
  env: {
    LOG_LEVEL: 'warn',
    EMBEDDER: 'openai',
    EMBEDDING_BASE_URL: endpoint.url,
    EMBEDDING_MODEL: 'bench-slow',
    EMBEDDING_DIM: String(DIM),
    EMBEDDER_CONCURRENCY: '1',
  },
});
let failed = false;
try {
  console.log(`machine: ${cpus().length} × ${cpus()[0]?.model ?? '?'}, load ${loadavg()[0]!.toFixed(2)}, node ${process.version}`);
  console.log(`${DOCS} documents per run, ${CLIENTS} clients, embedding endpoint latency ${LATENCY} ms, EMBEDDER_CONCURRENCY=1`);
  const one = await phase(stack, 'one-replica');
  const first = stack.procs.get('embedder')!;
  await stack.start('embedder');
  const second = stack.procs.get('embedder')!;
  stack.procs.set('embedder', first);
  const two = await phase(stack, 'two-replicas');
  const twiceOne = await embeddedOnce(stack, one.ids);
  const twiceTwo = await embeddedOnce(stack, two.ids);
  const docTexts = [...endpoint.seen.entries()].filter(([t]) => /one-replica|two-replicas/.test(t));
  const repeated = docTexts.filter(([, n]) => n !== 1).length;
  const rate = (r: { ms: number }) => (DOCS / r.ms) * 1000;
  console.log(`1 embedder replica : ${rate(one).toFixed(1)} documents/s (${(one.ms / 1000).toFixed(1)} s)`);
  console.log(`2 embedder replicas: ${rate(two).toFixed(1)} documents/s (${(two.ms / 1000).toFixed(1)} s), ×${(rate(two) / rate(one)).toFixed(2)}`);
  console.log(`ceiling: 1 replica can send at most ${(1000 / LATENCY).toFixed(1)} requests/s to the endpoint, 2 replicas ${((2 * 1000) / LATENCY).toFixed(1)}`);
  console.log(`processed once: documents with other than one embedded event: ${twiceOne + twiceTwo}; chunk texts the endpoint embedded more than once: ${repeated} of ${docTexts.length}; endpoint requests ${endpoint.requests()}`);
  failed = twiceOne + twiceTwo + repeated > 0;
  await stopProcess(second.child, 'SIGTERM', 10_000);
} finally {
  await stack.teardown();
  await endpoint.close();
}
process.exit(failed ? 1 : 0);
