/**
 * Ingest benchmark: N documents of about 2 KB of text through a private memstream.
 *
 *   ./memstream bench [--docs 1000] [--concurrency 16]
 *
 * Two phases in one run: N documents with taskType superrag (no memories), then --memory-docs with taskType
 * memory (the memorizer extracts and resolves memories after indexing). Reports, per phase, add
 * throughput (HTTP requests/s), end-to-end documents/s to done, p50/p99 time-to-done (and for
 * memory, to memorized), the CPU milliseconds each service (and nats-server) spent per document,
 * so the next bottleneck is visible, and — as the ceiling, measured in the same run on the same
 * broker — the raw JetStream publish rate of the same payloads (publishes pipelined, 256 in
 * flight). Beside it, as the bound of any Node front door on this machine, the adds a second of a bare node:http
 * server that only publishes each body and answers (bench/bare-front-door.ts), from the same clients with the same
 * requests, cold, before memstream starts. Figures, not assertions.
 */
import { makeDoc } from './bench-docs.js';
import { cpuMs, writeSyscalls } from './proc-cpu.js';
import { intFlag } from './flags.js';
import { rawConnection, request, type RawConnection } from './raw-http.js';
import { fork } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir, cpus, totalmem } from 'node:os';
import path from 'node:path';
import { StorageType } from '@nats-io/jetstream';
import { connectBus } from '@memstream/bus';
import { DEFAULT_WORKER_NICE, DEFAULT_WORKER_SEMI_SPACE_MB, LAYOUTS, isHost, REPO_ROOT, SERVICES, serviceBundles, spawnLauncherLayout, LAUNCHER_NATS, startNatsServer, stopProcess, type Layout, type ServiceProcess } from '@memstream/cli';
import { createLogger } from '@memstream/kit';
import { SqliteDocumentViews } from '@memstream/views';
import { commandArgs } from '@memstream/cli';

const USAGE = `usage: ./memstream bench [ingest] [--docs 1000] [--memory-docs N (default: --docs)] [--concurrency 16] [--batch 1] [--warmup 0] [--layout grouped|per-service|one-process] [--worker-nice N] [--worker-semi-space MB] [--timeline] [--json]

N documents of about 2 KB through a private memstream: add throughput, end-to-end documents/s, time to done, the raw JetStream publish ceiling,
and (one document a request) a bare front door's adds/s: node:http that publishes each body and answers, the bound of any Node gateway here.
The services run as ./memstream up runs them: from the compiled bundles, the workers at nice --worker-nice (default
${DEFAULT_WORKER_NICE}) with a V8 semi-space of --worker-semi-space MB (default ${DEFAULT_WORKER_SEMI_SPACE_MB}; 0: V8's own) in the processes of --layout: grouped (up's default: two worker hosts, the stages before the last and the
services that write the stores), per-service (one process each, as in Kubernetes: the CPU line then has every service
on its own) or one-process (every worker in one); MEMSTREAM_TSX=1 runs them through tsx. --warmup N first sends N other
documents (another tag) and waits for them, unmeasured: the figures are then the running system's rather than the first
documents' after a start (docs/pipeline.md, "Measured"). --batch N sends the documents N to a request through
POST /v3/documents/batch (the SDK's batchAdd, at most 100), as a bulk import would, instead of one POST /v3/documents each.`;
const { values } = commandArgs('bench', USAGE, {
  options: {
    docs: { type: 'string', default: '1000' },
    concurrency: { type: 'string', default: '16' },
    batch: { type: 'string', default: '1' },
    json: { type: 'boolean', default: false },
    'memory-docs': { type: 'string' },
    warmup: { type: 'string', default: '0' },
    // Documents done in each second of a phase, and the machine's idle share in it: where the time goes (a slow start, a long tail).
    timeline: { type: 'boolean', default: false },
    // The processes the workers run in (packages/cli/src/stack.ts, layoutProcesses): grouped is ./memstream up's.
    layout: { type: 'string', default: 'grouped' },
    'worker-nice': { type: 'string', default: String(DEFAULT_WORKER_NICE) },
    'worker-semi-space': { type: 'string', default: String(DEFAULT_WORKER_SEMI_SPACE_MB) },
  },
});
const N = intFlag('ingest', 'docs', values.docs, 0, 10_000_000);
const C = intFlag('ingest', 'concurrency', values.concurrency, 1, 10_000);
// Documents per request: 1 is POST /v3/documents, more the batch endpoint (BATCH_MAX in packages/contracts).
const B = intFlag('ingest', 'batch', values.batch, 1, 100);
// The memorizer resolves one tag serially, and the bench puts every memory document in one tag: its phase can be
// sized on its own so a large superrag run does not wait on it.
const NM = intFlag('ingest', 'memory-docs', values['memory-docs'] ?? values.docs, 0, 10_000_000);
const W = intFlag('ingest', 'warmup', values.warmup, 0, 10_000_000);
const NICE = intFlag('ingest', 'worker-nice', values['worker-nice'], 0, 19);
const SEMI_SPACE = intFlag('ingest', 'worker-semi-space', values['worker-semi-space'], 0, 1024);
if (!(LAYOUTS as readonly string[]).includes(values.layout)) {
  process.stderr.write(`bench ingest: --layout must be one of ${LAYOUTS.join(', ')} (got "${values.layout}")\n`);
  process.exit(2);
}
const LAYOUT = values.layout as Layout;

/** The machine's idle time so far, in clock ticks (/proc/stat's cpu line; CLK_PER_SEC of them a second per core). */
const CLK_PER_SEC = 100;
function idleTicks(): number {
  try {
    const f = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/);
    return Number(f[4]) + Number(f[5]);
  } catch {
    return NaN;
  }
}

/**
 * Every request over the connections, each connection sending the next unsent one when its answer
 * has come; `onAnswer` gets each 200 answer with the time its request was sent. Anything else throws.
 */
async function sendAll(conns: RawConnection[], requests: Buffer[], onAnswer: (body: Buffer, sentAt: number) => void = () => {}): Promise<void> {
  let next = 0;
  await Promise.all(
    conns.map(async (conn) => {
      while (next < requests.length) {
        const t = performance.now();
        const res = await conn.send(requests[next++]!);
        if (res.status !== 200) throw new Error(`add answered ${res.status}: ${res.body.toString('utf8')}`);
        onAnswer(res.body, t);
      }
    }),
  );
}

/**
 * The same requests as the superrag phase's (B = 1) to a bare node:http server in a fresh process of its own that
 * publishes each body to JetStream, waits for the acknowledgement and answers (bench/bare-front-door.ts): how
 * many adds a second any Node front door could answer from cold on this machine, with nothing else running.
 */
async function bareFrontDoor(natsUrl: string, bus: Awaited<ReturnType<typeof connectBus>>, contents: string[], apiKey: string): Promise<{ addsPerSec: number; cpuMsPerAdd: number }> {
  await bus.jsm.streams.add({ name: 'BARE', subjects: ['bare.>'], storage: StorageType.File });
  // Detached, as the gateway is started (a session and scheduling group of its own); the same --import tsx as this process.
  const child = fork(new URL('./bare-front-door.ts', import.meta.url).pathname, [], { env: { ...process.env, NATS_URL: natsUrl }, detached: true, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  try {
    const port = await new Promise<number>((resolve, reject) => {
      child.once('message', (m) => resolve((m as { port: number }).port));
      child.once('exit', (code) => reject(new Error(`bench ingest: the bare front door exited (${code}) before it listened`)));
    });
    const conns = await Promise.all(Array.from({ length: C }, () => rawConnection('127.0.0.1', port)));
    const requests = contents.map((content) => request({ method: 'POST', host: `127.0.0.1:${port}`, path: '/v3/documents', headers: { authorization: `Bearer ${apiKey}` }, body: JSON.stringify({ content, containerTag: 'bench-superrag', taskType: 'superrag' }) }));
    const cpu0 = cpuMs(child.pid);
    const t0 = performance.now();
    await sendAll(conns, requests);
    const secs = (performance.now() - t0) / 1000;
    const cpuMsPerAdd = (cpuMs(child.pid) - cpu0) / requests.length;
    for (const c of conns) c.close();
    return { addsPerSec: Math.round(requests.length / secs), cpuMsPerAdd: +cpuMsPerAdd.toFixed(3) };
  } finally {
    child.kill();
    await bus.jsm.streams.delete('BARE');
  }
}

function pct(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

async function main(): Promise<void> {
  const dir = mkdtempSync(path.join(tmpdir(), 'memstream-bench-'));
  const log = createLogger('bench', { level: 'warn' });
  const nats = await startNatsServer({ storeDir: path.join(dir, 'nats'), ...LAUNCHER_NATS, monitor: true });
  const apiKey = 'ms_bench_' + 'x'.repeat(20);
  const env = { NATS_URL: nats.url, MEMSTREAM_DATA_DIR: dir, MEMSTREAM_API_KEY: apiKey, MEMSTREAM_PORT: '0', LOG_LEVEL: 'warn' };
  const procs: ServiceProcess[] = [];
  // The warm-up's documents come after the measured ones: distinct texts, the measured ones the same with or without it.
  const docs = Array.from({ length: Math.max(N, NM) + W }, (_, i) => makeDoc(i));
  try {
    // Ceiling: the same payloads published straight to a JetStream file stream on this broker.
    const bus = await connectBus({ url: nats.url, name: 'bench', log });
    await bus.jsm.streams.add({ name: 'BENCH', subjects: ['bench.>'], storage: StorageType.File });
    const body = docs.map((d) => new TextEncoder().encode(JSON.stringify({ content: d })));
    const p0 = performance.now();
    const window: Promise<unknown>[] = [];
    for (let i = 0; i < N; i++) {
      window.push(bus.js.publish(`bench.${i}`, body[i]!, { msgID: `b${i}` }));
      if (window.length >= 256) await Promise.all(window.splice(0));
    }
    await Promise.all(window);
    const publishRate = N / ((performance.now() - p0) / 1000);
    await bus.jsm.streams.delete('BENCH');
    // Bound: the least a durable add can do (bench/bare-front-door.ts), the same requests from the same clients.
    const bare = B === 1 ? await bareFrontDoor(nats.url, bus, docs.slice(0, N), apiKey) : null;

    // On a loaded machine services take longer to start: MEMSTREAM_TEST_READY_MS, as for the tests.
    const readyTimeoutMs = Number(process.env.MEMSTREAM_TEST_READY_MS ?? 30_000);
    // As ./memstream up starts them (spawnLauncherLayout): bundles, worker processes first at their nice value, then the
    // gateway, each detached in a session of its own (stack.ts, niceAutogroup) and gone when this process is.
    const bundleDir = process.env.MEMSTREAM_TSX === '1' ? undefined : await serviceBundles(REPO_ROOT, SERVICES);
    const asUp = { ...env, MEMSTREAM_EXIT_WITH_PARENT: String(process.pid) };
    procs.push(...(await spawnLauncherLayout({ env: asUp, readyTimeoutMs, bundleDir, workerNice: NICE, workerSemiSpaceMb: SEMI_SPACE, detached: true, layout: LAYOUT })));
    // A host's CPU is its services' together: the report names them (--layout per-service splits them).
    const label = (p: ServiceProcess) => (isHost(p) ? `${p.name} (${p.services.join(', ')})` : p.name);
    const gw = procs.find((p) => p.name === 'gateway')!;
    // One bare keep-alive connection per client (raw-http.ts: the lightest load generator the cores can share).
    const gwUrl = new URL(gw.url!);
    const conns = await Promise.all(Array.from({ length: C }, () => rawConnection(gwUrl.hostname, Number(gwUrl.port))));
    const addRequest = (body: string) => request({ method: 'POST', host: gwUrl.host, path: B > 1 ? '/v3/documents/batch' : '/v3/documents', headers: { authorization: `Bearer ${apiKey}` }, body });

    // Time-to-done per document: from the moment its add was sent to the moment its indexed
    // event (the event that makes it done) is published; time-to-memorized: to the moment the
    // memorizer's extraction commit for it is in the MEMORY stream.
    const sentAt = new Map<string, number>();
    const doneAt = new Map<string, number>();
    const memorizedAt = new Map<string, number>();
    const sub = bus.nc.subscribe('doc.*.indexed', {
      callback: (_err, msg) => {
        const id = msg.subject.split('.')[1]!;
        if (!doneAt.has(id)) doneAt.set(id, performance.now());
      },
    });
    const memSub = bus.nc.subscribe('mem.>', {
      callback: (_err, msg) => {
        const commit = JSON.parse(new TextDecoder().decode(msg.data)) as { cause?: { kind?: string; documentId?: string; documents?: { documentId: string }[] } };
        // One document's extraction, or a dynamic-dreaming group of them.
        const ids = commit.cause?.kind === 'extraction' && commit.cause.documentId ? [commit.cause.documentId] : commit.cause?.kind === 'extraction-group' ? (commit.cause.documents ?? []).map((d) => d.documentId) : [];
        for (const id of ids) if (!memorizedAt.has(id)) memorizedAt.set(id, performance.now());
      },
    });
    const views = SqliteDocumentViews.open(path.join(dir, 'views.sqlite'));
    // Messages the broker took in (publishes, acks, requests) and sent out (deliveries, replies):
    // the messaging work per document, steadier than CPU time on a shared machine.
    const varz = async () => {
      const v = (await (await fetch(`${nats.monitorUrl}/varz`)).json()) as { in_msgs: number; out_msgs: number };
      return { in: v.in_msgs, out: v.out_msgs };
    };
    /** The same per client connection (a service's name), summed over its connections. */
    const connz = async () => {
      const c = (await (await fetch(`${nats.monitorUrl}/connz?limit=1024`)).json()) as { connections: Array<{ name?: string; in_msgs: number; out_msgs: number }> };
      const by: Record<string, { in: number; out: number }> = {};
      for (const x of c.connections) {
        const k = x.name ?? '(unnamed)';
        by[k] = { in: (by[k]?.in ?? 0) + x.in_msgs, out: (by[k]?.out ?? 0) + x.out_msgs };
      }
      return by;
    };
    const cpuOf = () => ({ ...Object.fromEntries(procs.map((p) => [label(p), cpuMs(p.child.pid)])), 'nats-server': cpuMs(nats.pid()) }) as Record<string, number>;
    /** Socket writes are the clients' largest single cost after their own work: each is a system call, and a segment nats-server reads. */
    const writesOf = () => ({ ...Object.fromEntries(procs.map((p) => [label(p), writeSyscalls(p.child.pid)])), 'nats-server': writeSyscalls(nats.pid()) }) as Record<string, number>;

    /** One phase: n documents of one taskType (docs[first] on, in tag `tag`), started once the phase before has finished. */
    const phase = async (taskType: 'superrag' | 'memory', n: number, finishedBefore: number, first = 0, tag = `bench-${taskType}`) => {
      const ids: string[] = [];
      // Every request's bytes before the clock starts: the clients' time is then the sockets' alone.
      const requests =
        B > 1
          ? Array.from({ length: Math.ceil(n / B) }, (_, r) =>
              addRequest(JSON.stringify({ containerTag: tag, taskType, documents: docs.slice(first + r * B, first + Math.min(n, (r + 1) * B)).map((content) => ({ content })) })),
            )
          : Array.from({ length: n }, (_, i) => addRequest(JSON.stringify({ content: docs[first + i], containerTag: tag, taskType })));
      const cpu0 = cpuOf();
      const client0 = process.cpuUsage();
      const writes0 = writesOf();
      const msgs0 = await varz();
      const conns0 = await connz();
      const t0 = performance.now();
      await sendAll(conns, requests, (body, t) => {
        const answer = JSON.parse(body.toString('utf8')) as { id: string } | { results: Array<{ id: string; status: string; error?: string }>; failed: number };
        for (const r of 'results' in answer ? answer.results : [answer]) {
          if (!r.id) throw new Error(`a batch item was refused: ${JSON.stringify(r)}`);
          sentAt.set(r.id, t);
          ids.push(r.id);
        }
      });
      const addSecs = (performance.now() - t0) / 1000;
      // Ten minutes, or more for a large phase on a loaded machine (the memory phase of one tag is serial).
      const deadline = Date.now() + Math.max(10 * 60_000, n * 1_000);
      const timeline: Array<{ sec: number; done: number; idle: number }> = [];
      let nextTick = t0 + 1000;
      let idle0 = idleTicks();
      for (;;) {
        const c = await views.countByStatus();
        if (values.timeline && performance.now() >= nextTick) {
          const idle1 = idleTicks();
          timeline.push({ sec: Math.round((nextTick - t0) / 1000), done: c.done + c.failed - finishedBefore, idle: idle1 - idle0 });
          idle0 = idle1;
          nextTick += 1000;
        }
        if (c.done + c.failed >= finishedBefore + n) break;
        if (Date.now() > deadline) throw new Error(`not all documents finished: ${JSON.stringify(c)}`);
        await new Promise((r) => setTimeout(r, 50));
      }
      const e2eSecs = (performance.now() - t0) / 1000;
      let memorizedSecs: number | null = null;
      if (taskType === 'memory') {
        while (!ids.every((id) => memorizedAt.has(id))) {
          if (Date.now() > deadline) throw new Error(`not all documents memorized: ${ids.filter((id) => memorizedAt.has(id)).length} of ${n}`);
          await new Promise((r) => setTimeout(r, 50));
        }
        memorizedSecs = (performance.now() - t0) / 1000;
      }
      const cpu1 = cpuOf();
      const client1 = process.cpuUsage(client0);
      const writes1 = writesOf();
      const msgs1 = await varz();
      const conns1 = await connz();
      const cpuMsPerDoc = Object.fromEntries(Object.keys(cpu0).map((k) => [k, +((cpu1[k]! - cpu0[k]!) / n).toFixed(2)]));
      const since = (m: Map<string, number>) => ids.map((id) => (m.get(id) ?? NaN) - sentAt.get(id)!).filter((x) => !Number.isNaN(x)).sort((a, b) => a - b);
      const lat = since(doneAt);
      const mem = since(memorizedAt);
      return {
        taskType,
        docs: n,
        addRequestsPerSec: Math.round(requests.length / addSecs),
        addDocsPerSec: Math.round(n / addSecs),
        endToEndDocsPerSec: Math.round(n / e2eSecs),
        timeToDoneMs: { p50: Math.round(pct(lat, 50)), p99: Math.round(pct(lat, 99)) },
        ...(memorizedSecs !== null ? { memorizedDocsPerSec: Math.round(n / memorizedSecs), timeToMemorizedMs: { p50: Math.round(pct(mem, 50)), p99: Math.round(pct(mem, 99)) } } : {}),
        cpuMsPerDoc,
        cpuMsPerDocTotal: +Object.values(cpuMsPerDoc).reduce((a, b) => a + b, 0).toFixed(2),
        ...(values.timeline ? { timeline } : {}),
        // This process: the HTTP clients that send the adds and the watch for done, on the same cores as memstream.
        loadGeneratorCpuMsPerDoc: +((client1.user + client1.system) / 1000 / n).toFixed(2),
        writeSyscallsPerDoc: Object.fromEntries(Object.keys(writes0).map((k) => [k, +((writes1[k]! - writes0[k]!) / n).toFixed(1)])),
        natsMessagesPerDoc: { in: +((msgs1.in - msgs0.in) / n).toFixed(1), out: +((msgs1.out - msgs0.out) / n).toFixed(1) },
        natsMessagesPerDocByConnection: Object.fromEntries(
          Object.entries(conns1)
            .filter(([k]) => k !== 'bench')
            .map(([k, v]) => [k, { in: +((v.in - (conns0[k]?.in ?? 0)) / n).toFixed(1), out: +((v.out - (conns0[k]?.out ?? 0)) / n).toFixed(1) }]),
        ),
      };
    };
    // superrag first (no memorizer work), then memory: the difference is the memorizer's cost.
    const warmup = W > 0 ? await phase('superrag', W, 0, Math.max(N, NM), 'bench-warmup') : null;
    const withoutMemory = await phase('superrag', N, W);
    // `--memory-docs 0`: the pipeline alone, no memory phase.
    const withMemory = NM > 0 ? await phase('memory', NM, W + N) : null;
    const counts = await views.countByStatus();
    await views.close();
    sub.unsubscribe();
    memSub.unsubscribe();
    for (const c of conns) c.close();
    await bus.close();

    const result = {
      machine: `${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.versions.node}, nats-server ${nats.version}`,
      docs: N,
      warmup: warmup && { docs: W, endToEndDocsPerSec: warmup.endToEndDocsPerSec, cpuMsPerDocTotal: warmup.cpuMsPerDocTotal },
      concurrency: C,
      batch: B,
      layout: LAYOUT,
      workerNice: NICE,
      workerSemiSpaceMb: SEMI_SPACE,
      docBytes: 2048,
      // The pipeline's own figures, as before memories existed: the superrag phase.
      addRequestsPerSec: withoutMemory.addRequestsPerSec,
      addDocsPerSec: withoutMemory.addDocsPerSec,
      endToEndDocsPerSec: withoutMemory.endToEndDocsPerSec,
      timeToDoneMs: withoutMemory.timeToDoneMs,
      ceilingJetStreamPublishPerSec: Math.round(publishRate),
      addVsCeiling: +(withoutMemory.addDocsPerSec / publishRate).toFixed(3),
      // null with --batch: the bound is of one document a request.
      bareFrontDoor: bare && { ...bare, vsCeiling: +(bare.addsPerSec / publishRate).toFixed(3) },
      endToEndVsCeiling: +(withoutMemory.endToEndDocsPerSec / publishRate).toFixed(3),
      cpuMsPerDoc: withoutMemory.cpuMsPerDoc,
      cpuMsPerDocTotal: withoutMemory.cpuMsPerDocTotal,
      withoutMemory,
      withMemory,
      failed: counts.failed,
    };
    if (values.json) {
      process.stdout.write(JSON.stringify(result) + '\n');
    } else {
      process.stdout.write(
        [
          `memstream ingest bench — ${result.machine}`,
          `  documents                    ${N} (superrag) and ${NM} (memory) × 2 KB text, ${C} concurrent clients${B > 1 ? `, ${B} documents per request (POST /v3/documents/batch)` : ''}, layout ${LAYOUT}, workers at nice ${result.workerNice}${SEMI_SPACE ? ` with a ${SEMI_SPACE} MB semi-space` : " with V8's semi-space"}${process.env.MEMSTREAM_TSX === '1' ? ', through tsx' : ''}`,
          ...(warmup ? [`  warm-up, not measured        ${W} other documents first: ${warmup.endToEndDocsPerSec} documents/s end to end, ${warmup.cpuMsPerDocTotal} CPU-ms per document`] : []),
          ...[withoutMemory, ...(withMemory ? [withMemory] : [])].flatMap((ph) => [
            `  taskType ${ph.taskType}${ph.taskType === 'memory' ? ' (the memorizer runs too)' : ' (no memories)'}`,
            `    add throughput             ${B > 1 ? `${ph.addDocsPerSec} documents/s (${ph.addRequestsPerSec} requests/s)` : `${ph.addRequestsPerSec} requests/s`}`,
            `    end-to-end to done         ${ph.endToEndDocsPerSec} documents/s`,
            `    time to done               p50 ${ph.timeToDoneMs.p50} ms, p99 ${ph.timeToDoneMs.p99} ms`,
            ...(ph.timeToMemorizedMs
              ? [`    end-to-end to memorized    ${ph.memorizedDocsPerSec} documents/s`, `    time to memorized          p50 ${ph.timeToMemorizedMs.p50} ms, p99 ${ph.timeToMemorizedMs.p99} ms`]
              : []),
            `    CPU ms per document        ${ph.cpuMsPerDocTotal} in all: ${Object.entries(ph.cpuMsPerDoc)
              .sort((a, b) => b[1] - a[1])
              .map(([k, v]) => `${k} ${v}`)
              .join(', ')}; the load generator (this process) ${ph.loadGeneratorCpuMsPerDoc} beside them`,
            ...(ph.timeline
              ? [
                  `    timeline (second: done so far, machine idle %) ${ph.timeline
                    .map((x) => `${x.sec}: ${x.done} ${Math.round((100 * x.idle) / (cpus().length * CLK_PER_SEC))}%`)
                    .join(', ')}`,
                ]
              : []),
            `    write system calls per doc ${+Object.values(ph.writeSyscallsPerDoc).reduce((a, b) => a + b, 0).toFixed(1)} in all: ${Object.entries(ph.writeSyscallsPerDoc)
              .sort((a, b) => b[1] - a[1])
              .map(([k, v]) => `${k} ${v}`)
              .join(', ')}`,
            `    NATS messages per document ${ph.natsMessagesPerDoc.in} in, ${ph.natsMessagesPerDoc.out} out (publishes, acks, requests; deliveries, replies): ${Object.entries(ph.natsMessagesPerDocByConnection)
              .sort((a, b) => b[1].in + b[1].out - a[1].in - a[1].out)
              .map(([k, v]) => `${k.replace(/^memstream-/, '')} ${v.in}/${v.out}`)
              .join(', ')}`,
          ]),
          `  ceiling: raw JetStream pub   ${result.ceilingJetStreamPublishPerSec} messages/s (same payloads, same broker, this run)`,
          `  ratio to ceiling (superrag)  add ${result.addVsCeiling}, end-to-end ${result.endToEndVsCeiling}`,
          ...(result.bareFrontDoor
            ? [
                `  bound: bare front door       ${result.bareFrontDoor.addsPerSec} adds/s, ratio ${result.bareFrontDoor.vsCeiling} (node:http, publish, ack, answer; the same requests and clients, a fresh process, before memstream starts; ${result.bareFrontDoor.cpuMsPerAdd} CPU-ms per add)`,
              ]
            : []),
          `  failed                       ${result.failed}`,
          '',
        ].join('\n'),
      );
    }
  } finally {
    await Promise.all(procs.map((p) => stopProcess(p.child)));
    await nats.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err) => {
  process.stderr.write(`bench failed: ${(err as Error).stack ?? err}\n`);
  process.exit(1);
});
