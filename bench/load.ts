/**
 * Load benchmark: adds at a FIXED arrival rate for a fixed time, from a real load generator.
 *
 *   ./memstream bench load [--rate 1000] [--seconds 30] [--generator paced|wrk|autocannon] [--connections N]
 *
 * Starts a private stack exactly as `./memstream up` runs it (spawnLauncherLayout: its processes
 * from the compiled bundles, the workers at the launcher's nice value; its own nats-server on a free loopback port,
 * its own data dir), then, in one run:
 *   1. ceiling A: raw JetStream publishes of the same payloads at the same rate (one publish sent
 *      every 1/rate s whatever the others are doing; latency from send to the server's ack);
 *   2. ceiling B: the gateway's answer to a trivial authenticated GET at the same rate;
 *   3. the adds: POST /v3/documents, 2 KB distinct text bodies over a few container tags, at the
 *      rate, while the pipeline works through them; then how long the
 *      backlog takes to drain. Beside the adds, a few small tenants (--probe-rate) each add one
 *      document under a tag of its own, as a tenant with no backlog would while a large import runs:
 *      their time to done against the load tags' is what the lanes are for (docs/pipeline.md, "Fairness").
 * Reports offered vs achieved rate, latency p50/p90/p99/max, non-2xx and errors, documents done
 * during the window and the drain time, and the CPU each process used; one JSON line at the end.
 * The HTTP legs come from --generator: paced (bench/paced.ts, open loop, each request timed from
 * when it was due, as wrk2 does), Debian's wrk held to the rate by a script (bench/wrk-paced.lua) or
 * autocannon's overallRate (per-second bursts: see paced.ts).
 * Figures, not assertions.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir, totalmem } from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import { StorageType } from '@nats-io/jetstream';
import { connectBus } from '@memstream/bus';
import { commandArgs, DEFAULT_WORKER_NICE, DEFAULT_WORKER_SEMI_SPACE_MB, REPO_ROOT, SERVICES, serviceBundles, spawnLauncherLayout, LAUNCHER_NATS, startNatsServer, stopProcess, type ServiceProcess } from '@memstream/cli';
import { createLogger } from '@memstream/kit';
import { SqliteDocumentViews } from '@memstream/views';
import { makeDoc } from './bench-docs.js';
import { intFlag } from './flags.js';
import { cpuMs } from './proc-cpu.js';
import { pacedRun } from './paced.js';

const USAGE = `usage: ./memstream bench load [--rate 1000] [--seconds 30] [--generator paced|wrk|autocannon] [--connections N] [--ceiling-seconds S] [--warmup-seconds 5] [--tags 4] [--probe-rate 4] [--task-type superrag|memory] [--worker-nice N] [--worker-semi-space MB] [--max-drain-seconds 900] [--json]

Adds (POST /v3/documents, 2 KB distinct text) at a fixed arrival rate for a fixed time, from a load generator, against a
private stack started as ./memstream up starts it. Beside them, in the same run, the same rate of raw JetStream
publishes of the same payloads and of a trivial authenticated GET. Prints offered and achieved rate, latency
p50/p90/p99/max, non-2xx and errors, the pipeline's progress during the window and its drain time, CPU per process.

  --rate             requests per second offered (default 1000)
  --seconds          how long the adds are offered (default 30)
  --generator        paced (default): open loop, request k due at k/rate s and timed from then (wrk2's way; bench/paced.ts);
                     wrk: Debian's wrk, one thread, each send held to its slot of the same schedule (bench/wrk-paced.lua),
                     timed from when sent, how late each send was printed beside;
                     autocannon: its overallRate, which sends each second's share per connection back to back, then waits
  --connections      HTTP connections, opened before the clock starts (default: paced and wrk rate/10, autocannon rate/100;
                     at least 1; docs/pipeline.md, "Load")
  --ceiling-seconds  how long each ceiling is offered (default min(seconds, 10))
  --warmup-seconds   first, unmeasured: adds at the rate for this long (other tags), then their drain (default 5; 0: none).
                     A fresh stack's first seconds are its JIT's: p99 672 and 520 ms in seconds 1 and 2, 8-46 ms after
  --tags             how many container tags the documents are spread over (default 4)
  --probe-rate       small tenants per second during the adds, each one document in a tag of its own (default 4; 0: none);
                     their time to done is printed beside the load tags' documents'
  --task-type        the documents' taskType (default superrag: no memorizer work after indexing)
  --worker-nice      the pipeline workers' nice value (default ${DEFAULT_WORKER_NICE}, as ./memstream up without MEMSTREAM_WORKER_NICE)
  --worker-semi-space the pipeline workers' V8 semi-space in MB (default ${DEFAULT_WORKER_SEMI_SPACE_MB}, as ./memstream up without MEMSTREAM_WORKER_SEMI_SPACE_MB; 0: V8's own)
  --max-drain-seconds how long to wait for the backlog after the window (default 900; then reported as not drained)
  --json             print only the JSON line`;

const { values } = commandArgs('bench load', USAGE, {
  options: {
    rate: { type: 'string', default: '1000' },
    seconds: { type: 'string', default: '30' },
    connections: { type: 'string' },
    generator: { type: 'string', default: 'paced' },
    'ceiling-seconds': { type: 'string' },
    'warmup-seconds': { type: 'string', default: '5' },
    tags: { type: 'string', default: '4' },
    'probe-rate': { type: 'string', default: '4' },
    'task-type': { type: 'string', default: 'superrag' },
    'worker-nice': { type: 'string', default: String(DEFAULT_WORKER_NICE) },
    'worker-semi-space': { type: 'string', default: String(DEFAULT_WORKER_SEMI_SPACE_MB) },
    'max-drain-seconds': { type: 'string', default: '900' },
    json: { type: 'boolean', default: false },
  },
});

const RATE = intFlag('load', 'rate', values.rate, 1, 100_000);
const SECONDS = intFlag('load', 'seconds', values.seconds, 1, 3600);
// Each paced connection carries rate/connections requests a second, one at a time: too few and a
// request waits for its connection's answer before it (at 1,000/s, 10 gave p90 469 ms against 22 ms
// with 200 on 2 cores, the pipeline working beside it). autocannon's are closed loops (paced.ts).
const CONNECTIONS = intFlag('load', 'connections', values.connections ?? String(Math.max(1, Math.ceil(RATE / (values.generator === 'autocannon' ? 100 : 10)))), 1, 10_000);
const CEILING_SECONDS = intFlag('load', 'ceiling-seconds', values['ceiling-seconds'] ?? String(Math.min(SECONDS, 10)), 1, 3600);
const WARMUP_SECONDS = intFlag('load', 'warmup-seconds', values['warmup-seconds'], 0, 3600);
const TAGS = intFlag('load', 'tags', values.tags, 1, 1000);
const PROBE_RATE = intFlag('load', 'probe-rate', values['probe-rate'], 0, 100);
const NICE = intFlag('load', 'worker-nice', values['worker-nice'], 0, 19);
const SEMI_SPACE = intFlag('load', 'worker-semi-space', values['worker-semi-space'], 0, 1024);
const MAX_DRAIN = intFlag('load', 'max-drain-seconds', values['max-drain-seconds'], 0, 86_400);
const GENERATOR = values.generator;
if (GENERATOR !== 'paced' && GENERATOR !== 'wrk' && GENERATOR !== 'autocannon') {
  process.stderr.write(`memstream bench load: --generator must be paced, wrk or autocannon (got ${JSON.stringify(GENERATOR)})\n`);
  process.exit(2);
}
const TASK_TYPE = values['task-type'];
if (TASK_TYPE !== 'superrag' && TASK_TYPE !== 'memory') {
  process.stderr.write(`memstream bench load: --task-type must be superrag or memory (got ${JSON.stringify(TASK_TYPE)})\n`);
  process.exit(2);
}

function pct(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

const ms = (x: number) => +x.toFixed(2);

/** p50, p90, p99 and max of values sorted in ascending order, to 0.01. */
function quantiles(sorted: number[]): Latency {
  return { p50: ms(pct(sorted, 50)), p90: ms(pct(sorted, 90)), p99: ms(pct(sorted, 99)), max: ms(sorted.at(-1) ?? NaN) };
}

interface Latency {
  p50: number;
  p90: number;
  p99: number;
  max: number;
}

interface Leg {
  offeredPerSec: number;
  achievedPerSec: number;
  ok: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  /** paced: from when each request was due; autocannon: its histogram (corrected for coordinated omission); JetStream: as measured. */
  latencyMs: Latency;
  /** HTTP legs: each 2xx answer's latency from when it was sent, without corrections. */
  rawLatencyMs?: Latency;
  /** paced: the p99 from when due of the requests due in each second, ms. */
  p99BySecond?: number[];
  /** wrk: how late each send was against its slot of the schedule, ms (what its from-send latency leaves out). */
  sendLateMs?: Latency;
  /** wrk: the share of one core the wrk process used, % (it is not this process, so not in the CPU lines). */
  generatorCpuPercent?: number;
}

/** One HTTP leg at the fixed rate, from --generator. */
function httpLeg(opts: { url: string; method: 'GET' | 'POST'; apiKey: string; seconds: number; body?: (i: number) => string }): Promise<Leg> {
  return GENERATOR === 'paced' ? paced(opts) : GENERATOR === 'wrk' ? wrkLeg(opts) : cannon(opts);
}

const WRK_SCRIPT = path.join(import.meta.dirname, 'wrk-paced.lua');
/** The bodies file of each body function, written before any clock starts (wrkBodies). */
const wrkFiles = new Map<(i: number) => string, string>();

/** A file of `seconds` worth of distinct bodies for wrk, one a line, plus each connection's first: built before it is timed. */
function wrkBodies(dir: string, body: (i: number) => string, seconds: number): string {
  let file = wrkFiles.get(body);
  if (!file) {
    file = path.join(dir, `wrk-bodies-${wrkFiles.size}`);
    writeFileSync(file, Array.from({ length: Math.ceil(RATE * seconds * 1.05) + CONNECTIONS }, (_, i) => body(i)).join('\n') + '\n');
    wrkFiles.set(body, file);
  }
  return file;
}

/** One run of Debian's wrk held to RATE by bench/wrk-paced.lua; `body(i)` gives request i's body (none for a GET). */
async function wrkLeg(opts: { url: string; method: 'GET' | 'POST'; apiKey: string; seconds: number; body?: (i: number) => string }): Promise<Leg> {
  // Every body distinct, as with the other generators: main writes the files before the first leg.
  const bodies = opts.body ? wrkFiles.get(opts.body) : '';
  if (bodies === undefined) throw new Error('wrkLeg: no bodies file written for this leg (wrkBodies in main)');
  const u = new URL(opts.url);
  const child = spawn('wrk', ['-t1', `-c${CONNECTIONS}`, `-d${opts.seconds}s`, '--timeout', '10s', '-s', WRK_SCRIPT, opts.url], {
    env: { ...process.env, MEMSTREAM_RATE: String(RATE), MEMSTREAM_METHOD: opts.method, MEMSTREAM_PATH: u.pathname + u.search, MEMSTREAM_AUTH: `Bearer ${opts.apiKey}`, MEMSTREAM_BODIES: bodies },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString('utf8')));
  child.stderr.on('data', (d: Buffer) => (err += d.toString('utf8')));
  // Its CPU time, read while it runs (once it has exited, /proc no longer has it).
  let cpu = 0;
  const t0 = performance.now();
  const poll = setInterval(() => {
    const c = cpuMs(child.pid);
    if (!Number.isNaN(c)) cpu = c;
  }, 100);
  const code = await new Promise<number | null>((resolve, reject) => {
    child.on('error', (e) => reject(new Error(`could not run wrk (${e.message}): ./memstream bench installs Debian's wrk when run as root; otherwise apt-get install wrk`)));
    child.on('exit', resolve);
  }).finally(() => clearInterval(poll));
  const line = out.split('\n').find((l) => l.startsWith('MEMSTREAM-WRK '));
  if (code !== 0 || !line) throw new Error(`wrk exited with ${code}: ${(err || out).trim().slice(0, 2000)}`);
  const r = JSON.parse(line.slice('MEMSTREAM-WRK '.length)) as {
    requests: number;
    durationUs: number;
    status: number;
    connect: number;
    read: number;
    write: number;
    timeout: number;
    latencyUs: { p50: number; p90: number; p99: number; max: number };
    lateMs: Latency;
  };
  const ok = r.requests - r.status;
  const us = (x: number) => ms(x / 1000);
  return {
    offeredPerSec: RATE,
    achievedPerSec: Math.round(ok / (r.durationUs / 1e6)),
    ok,
    non2xx: r.status,
    errors: r.connect + r.read + r.write,
    timeouts: r.timeout,
    latencyMs: { p50: us(r.latencyUs.p50), p90: us(r.latencyUs.p90), p99: us(r.latencyUs.p99), max: us(r.latencyUs.max) },
    sendLateMs: { p50: r.lateMs.p50, p90: r.lateMs.p90, p99: r.lateMs.p99, max: r.lateMs.max },
    generatorCpuPercent: Math.round((cpu / (performance.now() - t0)) * 100),
  };
}

async function paced(opts: { url: string; method: 'GET' | 'POST'; apiKey: string; seconds: number; body?: (i: number) => string }): Promise<Leg> {
  const r = await pacedRun({ url: opts.url, method: opts.method, headers: { authorization: `Bearer ${opts.apiKey}` }, rate: RATE, seconds: opts.seconds, connections: CONNECTIONS, body: opts.body });
  return {
    offeredPerSec: RATE,
    achievedPerSec: Math.round(r.ok / r.secs),
    ok: r.ok,
    non2xx: r.non2xx,
    errors: r.errors,
    timeouts: r.timeouts,
    latencyMs: quantiles(r.fromDue),
    rawLatencyMs: quantiles(r.fromSent),
    p99BySecond: r.p99BySecond,
  };
}

/** One autocannon run at a fixed overall rate; `body(i)` gives request i's body (none for a GET). */
async function cannon(opts: { url: string; method: 'GET' | 'POST'; apiKey: string; seconds: number; body?: (i: number) => string }): Promise<Leg> {
  let i = 0;
  const t0 = performance.now();
  // Each answered request's own latency, as measured (autocannon's histogram adds coordinated-omission corrections).
  const raw: number[] = [];
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    const instance = autocannon(
      {
        url: opts.url,
        method: opts.method,
        connections: CONNECTIONS,
        overallRate: RATE,
        duration: opts.seconds,
        timeout: 10,
        headers: { authorization: `Bearer ${opts.apiKey}`, 'content-type': 'application/json' },
        requests: [
          {
            method: opts.method,
            setupRequest: (req) => (opts.body ? { ...req, body: opts.body(i++) } : req),
          },
        ],
      },
      (err, res) => (err ? reject(err) : resolve(res)),
    );
    instance.on('response', (_client, statusCode, _bytes, responseTime) => {
      if (statusCode >= 200 && statusCode < 300) raw.push(responseTime);
    });
  });
  raw.sort((a, b) => a - b);
  const secs = (performance.now() - t0) / 1000;
  const ok = result['2xx'];
  return {
    offeredPerSec: RATE,
    achievedPerSec: Math.round(ok / Math.min(secs, result.duration || secs)),
    ok,
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    latencyMs: { p50: result.latency.p50, p90: result.latency.p90, p99: result.latency.p99, max: result.latency.max },
    rawLatencyMs: quantiles(raw),
  };
}

/**
 * Small tenants while the adds run: every 1/PROBE_RATE s one document under a tag no other
 * document has (a tenant with no backlog, so the normal lane), each add on its own connection
 * rather than autocannon's. The ids of those accepted, and the refusals.
 */
async function probe(url: string, apiKey: string, seconds: number): Promise<{ ids: string[]; refused: number }> {
  const ids: string[] = [];
  let refused = 0;
  const sends: Promise<void>[] = [];
  const t0 = performance.now();
  for (let k = 0; k < PROBE_RATE * seconds; k++) {
    const wait = t0 + (k * 1000) / PROBE_RATE - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    const body = JSON.stringify({ content: makeDoc(20_000_000 + k), containerTag: `probe-${k}`, taskType: TASK_TYPE });
    sends.push(
      fetch(`${url}/v3/documents`, { method: 'POST', headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' }, body }).then(
        async (r) => {
          if (r.ok) ids.push(((await r.json()) as { id: string }).id);
          else refused++;
        },
        () => void refused++,
      ),
    );
  }
  await Promise.all(sends);
  return { ids, refused };
}

/** Seconds from submission to done (the view's createdAt: the submission's time; a done view's updatedAt: its indexed event's). */
const secondsToDone = (v: { createdAt: string; updatedAt: string }) => (Date.parse(v.updatedAt) - Date.parse(v.createdAt)) / 1000;

function spread(xs: number[]): Latency & { n: number } {
  return { n: xs.length, ...quantiles([...xs].sort((a, b) => a - b)) };
}

async function main(): Promise<void> {
  const dir = mkdtempSync(path.join(tmpdir(), 'memstream-load-'));
  const log = createLogger('bench', { level: 'warn' });
  const nats = await startNatsServer({ storeDir: path.join(dir, 'nats'), ...LAUNCHER_NATS });
  const apiKey = 'ms_bench_' + 'x'.repeat(20);
  // The environment `./memstream up` gives its services (packages/cli/src/main.ts), on a free port.
  const env: Record<string, string> = {
    NATS_URL: nats.url,
    MEMSTREAM_DATA_DIR: dir,
    MEMSTREAM_API_KEY: apiKey,
    MEMSTREAM_PORT: '0',
    MEMSTREAM_HOST: '127.0.0.1',
    LOG_LEVEL: 'info',
    MEMSTREAM_LOG_PRETTY: '0',
    MEMSTREAM_EXIT_WITH_PARENT: String(process.pid),
  };
  const procs: ServiceProcess[] = [];
  const tags = Array.from({ length: TAGS }, (_, t) => `load-${t}`);
  const addBody = (i: number) => JSON.stringify({ content: makeDoc(i), containerTag: tags[i % TAGS], taskType: TASK_TYPE });
  // The warm-up's documents: texts and tags of their own, left out of every figure after it.
  const warmTags = new Set(tags.map((t) => `warmup-${t}`));
  const warmBody = (i: number) => JSON.stringify({ content: makeDoc(30_000_000 + i), containerTag: `warmup-${tags[i % TAGS]}`, taskType: TASK_TYPE });
  try {
    const readyTimeoutMs = Number(process.env.MEMSTREAM_TEST_READY_MS ?? 60_000);
    // As `up`: the services' ahead-of-time bundles on plain node (MEMSTREAM_TSX=1: through tsx).
    const bundleDir = process.env.MEMSTREAM_TSX === '1' ? undefined : await serviceBundles(REPO_ROOT, SERVICES);
    // Detached as `up` starts them: each service leads its own session (stack.ts, niceAutogroup).
    procs.push(...(await spawnLauncherLayout({ env, readyTimeoutMs, bundleDir, workerNice: NICE, workerSemiSpaceMb: SEMI_SPACE, detached: true })));
    const url = procs.find((p) => p.name === 'gateway')!.url!;
    if (GENERATOR === 'wrk') {
      if (WARMUP_SECONDS > 0) wrkBodies(dir, warmBody, WARMUP_SECONDS);
      wrkBodies(dir, addBody, SECONDS);
    }
    const cpuOf = (): Record<string, number> => ({
      ...Object.fromEntries(procs.map((p) => [p.name, cpuMs(p.child.pid)])),
      'nats-server': cpuMs(nats.pid()),
      'load generator (this process)': (process.cpuUsage().user + process.cpuUsage().system) / 1000,
    });
    const cpuSince = (a: Record<string, number>, secs: number) => {
      const b = cpuOf();
      // Per process: CPU ms used per second of the leg, i.e. the share of one core in ‰ / 10 → %.
      return Object.fromEntries(Object.keys(a).map((k) => [k, Math.round(((b[k]! - a[k]!) / (secs * 1000)) * 100)]));
    };
    const views = SqliteDocumentViews.open(path.join(dir, 'views.sqlite'));
    const tally = (c: Record<string, number>) => ({ all: Object.values(c).reduce((a, b) => a + b, 0), finished: (c.done ?? 0) + (c.failed ?? 0) });
    /**
     * Wait, for at most MAX_DRAIN s, until the view holds at least `atLeast` documents and every
     * one is done or failed: the last counts read, whether that came, and how long it took.
     */
    const drain = async (atLeast: number) => {
      const t0 = performance.now();
      const deadline = Date.now() + MAX_DRAIN * 1000;
      let counts = await views.countByStatus();
      const finished = () => tally(counts).finished >= Math.max(atLeast, tally(counts).all);
      while (!finished() && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 100));
        counts = await views.countByStatus();
      }
      return { counts, drained: finished(), secs: (performance.now() - t0) / 1000 };
    };

    // Warm-up, unmeasured: the same adds at the same rate under tags of their own, then their drain, so
    // what follows measures the running system rather than its JIT's first seconds.
    let warmup: { leg: Leg; drainSecs: number } | null = null;
    if (WARMUP_SECONDS > 0) {
      const leg = await httpLeg({ url: `${url}/v3/documents`, method: 'POST', apiKey, seconds: WARMUP_SECONDS, body: warmBody });
      const w = await drain(leg.ok);
      if (!w.drained) throw new Error(`the warm-up's ${leg.ok} documents were not done within ${MAX_DRAIN} s`);
      warmup = { leg, drainSecs: +w.secs.toFixed(1) };
    }
    /** The views of the warm-up, all finished: the counts below start from these. */
    const base = await views.countByStatus();
    const before = tally(base).all;

    // Ceiling A: raw JetStream publishes of the same payloads (bodies of other indices, so the
    // adds' stay distinct), at the rate, on this broker, into a file stream of its own.
    const bus = await connectBus({ url: nats.url, name: 'bench-load', log });
    await bus.jsm.streams.add({ name: 'BENCHLOAD', subjects: ['benchload.>'], storage: StorageType.File });
    const enc = new TextEncoder();
    const pubLat: number[] = [];
    let pubErrors = 0;
    const pubCpu = cpuOf();
    const p0 = performance.now();
    const total = RATE * CEILING_SECONDS;
    const inflight: Promise<void>[] = [];
    for (let k = 0; k < total; ) {
      const due = Math.min(total, Math.floor(((performance.now() - p0) / 1000) * RATE) + 1);
      for (; k < due; k++) {
        const data = enc.encode(addBody(10_000_000 + k));
        const t = performance.now();
        inflight.push(
          bus.js.publish(`benchload.${k % TAGS}`, data, { msgID: `l${k}` }).then(
            () => void pubLat.push(performance.now() - t),
            () => void pubErrors++,
          ),
        );
      }
      await new Promise((r) => setTimeout(r, 1));
    }
    await Promise.all(inflight);
    const pubSecs = (performance.now() - p0) / 1000;
    const pubCpuPct = cpuSince(pubCpu, pubSecs);
    await bus.jsm.streams.delete('BENCHLOAD');
    pubLat.sort((a, b) => a - b);
    const jetstream: Leg = {
      offeredPerSec: RATE,
      achievedPerSec: Math.round(pubLat.length / pubSecs),
      ok: pubLat.length,
      non2xx: 0,
      errors: pubErrors,
      timeouts: 0,
      latencyMs: quantiles(pubLat),
    };

    // Ceiling B: a trivial authenticated GET (the documents in flight: none yet) at the rate.
    const getCpu = cpuOf();
    const get = await httpLeg({ url: `${url}/v3/documents/processing`, method: 'GET', apiKey, seconds: CEILING_SECONDS });
    const getCpuPct = cpuSince(getCpu, CEILING_SECONDS);

    // The adds, while the pipeline works; each add's document done = its indexed event.
    const addCpu = cpuOf();
    const a0 = performance.now();
    const [add, probed] = await Promise.all([
      httpLeg({ url: `${url}/v3/documents`, method: 'POST', apiKey, seconds: SECONDS, body: addBody }),
      probe(url, apiKey, SECONDS),
    ]);
    const addSecs = (performance.now() - a0) / 1000;
    const addCpuPct = cpuSince(addCpu, addSecs);
    const atEnd = await views.countByStatus();
    const doneInWindow = atEnd.done + atEnd.failed - before;

    // The backlog: until every document the gateway accepted is done or failed. Accepted counts
    // the adds autocannon saw answered and any still in flight when it stopped (the views hold them).
    const drainCpu = cpuOf();
    const { counts, drained, secs: drainSecs } = await drain(before + add.ok + probed.ids.length);
    // Shares of a core over a drain of a moment are noise (the load generator's own threads read 289 %): none below a second.
    const drainCpuPct = drainSecs >= 1 ? cpuSince(drainCpu, drainSecs) : null;
    const accepted = Math.max(add.ok + probed.ids.length, tally(counts).all - before);
    // Time to done: the small tenants' documents against the load tags'.
    const probeIds = new Set(probed.ids);
    const probeTimes: number[] = [];
    const loadTimes: number[] = [];
    for await (const v of views.all()) {
      if (v.status !== 'done' || v.containerTags.some((t) => warmTags.has(t))) continue;
      if (probeIds.has(v.id)) probeTimes.push(secondsToDone(v));
      else loadTimes.push(secondsToDone(v));
    }
    await views.close();
    await bus.close();

    const load = loadavg().map((x) => +x.toFixed(2));
    const result = {
      bench: 'load',
      machine: `${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.versions.node}, nats-server ${nats.version}`,
      loadAverage: load,
      rate: RATE,
      seconds: SECONDS,
      connections: CONNECTIONS,
      generator: GENERATOR,
      ceilingSeconds: CEILING_SECONDS,
      tags: TAGS,
      taskType: TASK_TYPE,
      workerNice: NICE,
      workerSemiSpaceMb: SEMI_SPACE,
      docBytes: 2048,
      warmup: warmup && { seconds: WARMUP_SECONDS, ...warmup.leg, drainSecs: warmup.drainSecs, failed: base.failed },
      add,
      pipeline: {
        accepted,
        doneDuringWindow: doneInWindow,
        drainSecs: drained ? +drainSecs.toFixed(1) : null,
        done: counts.done - base.done,
        failed: counts.failed - base.failed,
        endToEndDocsPerSec: drained ? Math.round(accepted / (addSecs + drainSecs)) : null,
      },
      // Seconds from submission to done; probes: one document per new tag, PROBE_RATE per second during the adds.
      timeToDoneSecs: { probes: { rate: PROBE_RATE, accepted: probed.ids.length, refused: probed.refused, ...spread(probeTimes) }, loadTags: spread(loadTimes) },
      ceilingJetStreamPublish: jetstream,
      ceilingAuthenticatedGet: get,
      addP99VsJetStreamP99: +(add.latencyMs.p99 / jetstream.latencyMs.p99).toFixed(2),
      addP99VsGetP99: +(add.latencyMs.p99 / get.latencyMs.p99).toFixed(2),
      // Share of one core each process used, in %, during each leg.
      cpuPercent: { jetstreamCeiling: pubCpuPct, getCeiling: getCpuPct, adds: addCpuPct, drain: drainCpuPct },
    };
    if (!values.json) {
      const leg = (name: string, l: Leg) =>
        `  ${name.padEnd(28)} offered ${l.offeredPerSec}/s, achieved ${l.achievedPerSec}/s; p50 ${l.latencyMs.p50} ms, p90 ${l.latencyMs.p90} ms, p99 ${l.latencyMs.p99} ms, max ${l.latencyMs.max} ms${l.rawLatencyMs ? ` (${GENERATOR === 'paced' ? 'from when sent' : 'uncorrected'}: p50 ${l.rawLatencyMs.p50}, p90 ${l.rawLatencyMs.p90}, p99 ${l.rawLatencyMs.p99} ms)` : ''}${l.sendLateMs ? ` (from when sent; the sends late against the schedule by p50 ${l.sendLateMs.p50}, p99 ${l.sendLateMs.p99}, max ${l.sendLateMs.max} ms; wrk used ${l.generatorCpuPercent} % of a core)` : ''}; ${l.ok} ok, non-2xx ${l.non2xx}, errors ${l.errors}, timeouts ${l.timeouts}`;
      const secs = (t: { p50: number; p90: number; p99: number; max: number }) => `p50 ${t.p50} s, p90 ${t.p90} s, p99 ${t.p99} s, max ${t.max} s`;
      const cpu = (c: Record<string, number>) =>
        Object.entries(c)
          .sort((a, b) => b[1] - a[1])
          .map(([k, v]) => `${k} ${v}`)
          .join(', ');
      process.stdout.write(
        [
          `memstream load bench — ${result.machine}; load average ${load.join(' ')} at the end`,
          `  POST /v3/documents, 2 KB distinct text over ${TAGS} tags (taskType ${TASK_TYPE}), ${RATE}/s for ${SECONDS} s, ${CONNECTIONS} connections (${GENERATOR === 'paced' ? 'paced: open loop, latency from when each request was due' : GENERATOR === 'wrk' ? 'wrk, each send held to its slot of a fixed schedule, latency from when sent' : 'autocannon overallRate: each second\'s share per connection back to back'}); workers at nice ${NICE}${SEMI_SPACE ? `, semi-space ${SEMI_SPACE} MB` : ", V8's semi-space"}`,
          ...(warmup
            ? [
                `  warm-up, not measured        ${warmup.leg.ok} adds at ${RATE}/s for ${WARMUP_SECONDS} s in tags of their own, then drained in ${warmup.drainSecs} s (failed ${base.failed}); p99 ${warmup.leg.latencyMs.p99} ms${warmup.leg.p99BySecond ? `, by second ${warmup.leg.p99BySecond.join(', ')} ms` : ''}`,
              ]
            : []),
          leg('adds', add),
          ...(add.p99BySecond ? [`  adds' p99 by second          ${add.p99BySecond.join(', ')} ms`] : []),
          leg(`ceiling: JetStream publish`, jetstream),
          leg(`ceiling: authenticated GET`, get),
          `  pipeline                     ${doneInWindow} of ${accepted} accepted documents done during the window; ${drained ? `the backlog drained ${drainSecs.toFixed(1)} s after it` : `not drained after ${MAX_DRAIN} s (${counts.done - base.done} done, ${counts.failed - base.failed} failed)`}; failed ${counts.failed - base.failed}`,
          ...(PROBE_RATE > 0
            ? [
                `  time to done                 small tenants (${probed.ids.length} documents, each in a tag of its own, ${PROBE_RATE}/s during the adds${probed.refused ? `, ${probed.refused} refused` : ''}): ${secs(result.timeToDoneSecs.probes)}`,
                `                               the ${TAGS} load tags' documents: ${secs(result.timeToDoneSecs.loadTags)}`,
              ]
            : []),
          `  CPU, % of one core, adds     ${cpu(addCpuPct)}`,
          `  CPU, % of one core, drain    ${drainCpuPct ? cpu(drainCpuPct) : `not measured (the drain took ${drainSecs.toFixed(1)} s)`}`,
          `  CPU, % of one core, ceilings JetStream: ${cpu(pubCpuPct)}; GET: ${cpu(getCpuPct)}`,
          '',
        ].join('\n'),
      );
    }
    process.stdout.write(JSON.stringify(result) + '\n');
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
