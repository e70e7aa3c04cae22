import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { REPO_ROOT, SERVICES, layoutFromEnv, layoutProcesses, serviceBundles, spawnProcess, startNatsServer, stopProcess, type Layout, type NatsServerHandle, type ServiceName, type ServiceProcess } from '@memstream/cli';
import { SqliteDocumentViews } from '@memstream/views';

export interface TestStack {
  nats: NatsServerHandle;
  dataDir: string;
  apiKey: string;
  baseUrl: string;
  env: Record<string, string>;
  /** How the workers run: `grouped` as under ./memstream up (default; MEMSTREAM_LAYOUT), or `per-service`. */
  layout: Layout;
  /** Each running service's process (a worker host's several services share one). */
  procs: Map<ServiceName, ServiceProcess>;
  /**
   * Start a service. Under `grouped`, the services of its worker host that this stack runs and
   * that are not running (those stopped with it, say) start with it, in one process, as `up`
   * restarts a host whole; a service already running gets a second replica. Per service: a process of its own.
   */
  start(name: ServiceName, extraEnv?: Record<string, string>): Promise<ServiceProcess>;
  /**
   * SIGKILL (crash) or SIGTERM (graceful) the process of one service and wait for it to exit:
   * under `grouped`, every service of its worker host with it.
   */
  stopService(name: ServiceName, signal?: NodeJS.Signals): Promise<void>;
  /** Every service's log lines, for post-mortems on failure. */
  logs: string[];
  /** Processes that exited on their own (not stopped by the stack): what, how, and their last lines. */
  crashes: string[];
  teardown(): Promise<void>;
}

/**
 * The services as ahead-of-time bundles (packages/cli/src/bundle.ts), built once per change of
 * the sources and shared by every test file: a stack of nine processes then starts on plain node
 * instead of paying tsx's loader in each. MEMSTREAM_TEST_TSX=1 runs them through tsx instead.
 */
let bundles: Promise<string> | undefined;
const testBundles = () => (process.env.MEMSTREAM_TEST_TSX === '1' ? Promise.resolve(undefined) : (bundles ??= serviceBundles(REPO_ROOT, SERVICES)));

/**
 * A private memstream: its own nats-server on a free loopback port with its own store, its own
 * data dir, and the chosen services as real processes, laid out as `./memstream up` lays them out
 * (`layout`, default MEMSTREAM_LAYOUT or grouped), so the fault tests kill what `up` runs. A test
 * whose case is one service alone (a stage missing while the others run, replicas of one service)
 * asks for `per-service`, as in Kubernetes. Nothing is shared with the machine's own nats-server
 * or with another test file.
 */
export async function startTestStack(opts: { services?: readonly ServiceName[]; env?: Record<string, string>; layout?: Layout } = {}): Promise<TestStack> {
  const layout = opts.layout ?? layoutFromEnv();
  const dataDir = mkdtempSync(path.join(tmpdir(), 'memstream-e2e-'));
  // Neither the broker nor the services outlive this test process: when vitest gives up on a
  // beforeAll that ran past its timeout, no teardown runs, and a stack left running after the
  // file (seen once: a broker and seven services for two hours) slows every file after it.
  const nats = await startNatsServer({ storeDir: path.join(dataDir, 'nats'), dieWithParent: true });
  const apiKey = 'ms_test_' + Math.random().toString(36).slice(2).padEnd(16, 'x');
  const logs: string[] = [];
  const crashes: string[] = [];
  const env: Record<string, string> = {
    NATS_URL: nats.url,
    MEMSTREAM_DATA_DIR: dataDir,
    MEMSTREAM_API_KEY: apiKey,
    MEMSTREAM_PORT: '0',
    LOG_LEVEL: process.env.MEMSTREAM_TEST_LOG_LEVEL ?? 'info',
    // A crashed worker's messages come back after this long (production: 5 s, DEFAULT_POLICIES).
    MEMSTREAM_ACK_WAIT_MS: '4000',
    // Each service stops on its own once this process is gone (kit/lifecycle.ts), as under ./memstream up.
    MEMSTREAM_EXIT_WITH_PARENT: String(process.pid),
    ...opts.env,
  };
  const procs = new Map<ServiceName, ServiceProcess>();
  /** Starts under way, by service: a concurrent start of a host's other service waits for it rather than start it twice. */
  const starting = new Map<ServiceName, Promise<ServiceProcess>>();
  /** The last stop of each service's process, for a concurrent stop of a host's other service. */
  const stopping = new Map<ServiceName, Promise<void>>();
  let baseUrl = '';
  // What this stack runs: the services asked for, and every one started since.
  const wanted = new Set<ServiceName>(opts.services ?? SERVICES);
  const spawn = async (spec: { name: string; services: ServiceName[] }, extraEnv: Record<string, string>) => {
    // MEMSTREAM_TEST_READY_MS: a longer start-up allowance on a loaded machine (default 30 s).
    const readyTimeoutMs = Number(process.env.MEMSTREAM_TEST_READY_MS ?? 30_000);
    const mine: string[] = [];
    const p = await spawnProcess(spec, {
      env: { ...env, ...extraEnv },
      readyTimeoutMs,
      bundleDir: await testBundles(),
      onLog: (s, line) => {
        logs.push(`${s} ${line}`);
        mine.push(line);
        if (mine.length > 40) mine.shift();
      },
    });
    for (const s of p.services) procs.set(s, p);
    p.child.once('exit', (code, signal) => {
      // Still the process of its services: nobody asked it to stop.
      if (p.services.some((s) => procs.get(s) === p)) crashes.push(`${p.name} (${p.services.join(', ')}) exited ${code ?? signal}; its last lines:\n${mine.join('\n')}`);
    });
    if (p.services.includes('gateway') && p.url) baseUrl = p.url;
    return p;
  };
  const start = async (name: ServiceName, extraEnv: Record<string, string> = {}): Promise<ServiceProcess> => {
    const pending = starting.get(name);
    if (pending) return pending;
    wanted.add(name);
    // The process `name` belongs to in this layout, less what runs already or is starting.
    const home = layoutProcesses(layout, [...wanted]).find((p) => p.services.includes(name))!;
    const services = [name, ...home.services.filter((s) => s !== name && !procs.has(s) && !starting.has(s))];
    const spec = services.length === 1 ? { name, services } : { name: home.name, services };
    const p = spawn(spec, extraEnv);
    for (const s of services) starting.set(s, p);
    try {
      return await p;
    } finally {
      for (const s of services) starting.delete(s);
    }
  };
  const running = () => [...new Set(procs.values())];
  try {
    const specs = layoutProcesses(layout, [...wanted]);
    const started = await Promise.allSettled(specs.filter((p) => p.name !== 'gateway').map((p) => spawn(p, {})));
    const failed = started.find((r) => r.status === 'rejected');
    if (failed) throw failed.reason;
    if (wanted.has('gateway')) await start('gateway');
  } catch (err) {
    // The caller gets no stack to tear down: without this, the services that did start and the
    // broker ran on after the test (a service slow to start on a loaded machine left them behind).
    await Promise.all(running().map((p) => stopProcess(p.child, 'SIGTERM', 10_000)));
    await nats.stop();
    if (!process.env.MEMSTREAM_KEEP_TEST_DATA) rmSync(dataDir, { recursive: true, force: true });
    throw err;
  }
  return {
    nats,
    dataDir,
    apiKey,
    get baseUrl() {
      return baseUrl;
    },
    env,
    layout,
    procs,
    start,
    logs,
    crashes,
    async stopService(name, signal = 'SIGKILL') {
      const p = procs.get(name);
      // Stopped already, or going with another service of its host a moment ago: wait for that.
      if (!p) return stopping.get(name);
      const stopped = stopProcess(p.child, signal);
      // Every service of the process goes with it (a worker host's several).
      for (const [s, q] of procs) {
        if (q !== p) continue;
        procs.delete(s);
        stopping.set(s, stopped);
      }
      await stopped;
    },
    async teardown() {
      const all = running();
      procs.clear();
      await Promise.all(all.map((p) => stopProcess(p.child, 'SIGTERM', 10_000)));
      await nats.stop();
      if (!process.env.MEMSTREAM_KEEP_TEST_DATA) rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** A tiny JSON client for the raw HTTP cases (the SDK suite covers the official client). */
export function api(stack: { baseUrl: string; apiKey: string }) {
  const call = async (method: string, p: string, body?: unknown, headers: Record<string, string> = {}) => {
    const res = await fetch(stack.baseUrl + p, {
      method,
      headers: { authorization: `Bearer ${stack.apiKey}`, 'content-type': 'application/json', ...headers },
      ...(body !== undefined ? { body: typeof body === 'string' ? body : JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    let json: any = null;
    try {
      json = text ? JSON.parse(text) : null;
    } catch {
      json = { raw: text };
    }
    return { status: res.status, body: json, headers: res.headers };
  };
  return {
    call,
    add: (content: string, extra: Record<string, unknown> = {}) => call('POST', '/v3/documents', { content, ...extra }),
    get: (id: string) => call('GET', `/v3/documents/${id}`),
  };
}

/** Poll until `check` returns a value (not undefined), or fail with the last observation. */
export async function waitFor<T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 20_000, everyMs = 25): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v !== undefined) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? `: ${String(last)}` : ''}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/**
 * Poll the stack's view store until `n` documents of container tag `tag` are done. On a timeout
 * the error says where the others are: the tag's documents by status, and (with `stack.logs`) the
 * last warnings and errors the services logged.
 */
export async function waitTagDone(stack: { dataDir: string; logs?: string[]; crashes?: string[] }, tag: string, n: number, timeoutMs: number, everyMs: number): Promise<void> {
  const views = SqliteDocumentViews.open(path.join(stack.dataDir, 'views.sqlite'));
  try {
    await waitFor(
      `${n} documents of ${tag} done`,
      async () => {
        const { total } = await views.list({ containerTags: [tag], statuses: ['done'], sort: 'createdAt', order: 'asc', limit: 1, offset: 0 });
        return total === n ? true : undefined;
      },
      timeoutMs,
      everyMs,
    );
  } catch (err) {
    const { items } = await views.list({ containerTags: [tag], sort: 'createdAt', order: 'asc', limit: 10_000, offset: 0 });
    const by: Record<string, number> = {};
    for (const v of items) by[v.status] = (by[v.status] ?? 0) + 1;
    const troubles = (stack.logs ?? []).filter((l) => /"level":(40|50|60)/.test(l)).slice(-30);
    const crashed = stack.crashes?.length ? `\nprocesses that exited on their own:\n${stack.crashes.join('\n')}` : '';
    throw new Error(`${(err as Error).message}\n${tag}: ${items.length} documents in the view, by status ${JSON.stringify(by)}${crashed}${troubles.length ? `\nthe services' last warnings:\n${troubles.join('\n')}` : ''}`);
  } finally {
    await views.close();
  }
}
