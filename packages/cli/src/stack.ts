import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { setPriority } from 'node:os';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import { SERVICE_NAMES, STOP_ORDER, WORKER_HOSTS } from '@memstream/contracts';
import { bundledEntry, bundledHost, HOST_ENTRY } from './bundle.js';

/** The repository root (this file is packages/cli/src/stack.ts). */
export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

/** The services in start order, from the pipeline table (packages/contracts/src/pipeline.ts). */
export const SERVICES = SERVICE_NAMES;
export type ServiceName = (typeof SERVICES)[number];

/** One process of a layout: a service on its own entry, or a worker host running several (./host.ts). */
export interface ProcessSpec {
  /** The service's name, or the host's (WORKER_HOSTS: `stages`, `stores`; `workers` for every worker at once). */
  name: string;
  /** What runs in it, in start order. */
  services: ServiceName[];
}

/** Whether a process of a layout is a worker host (./host.ts) rather than one service on its own entry. */
export function isHost(p: { name: string; services: readonly string[] }): boolean {
  return p.services.length > 1 || p.services[0] !== p.name;
}

/**
 * How the workers are laid out in processes (the gateway is always a process of its own):
 * - `grouped`, `./memstream up`'s default: the two worker hosts of WORKER_HOSTS;
 * - `per-service`: one process per service, as Kubernetes runs them (MEMSTREAM_LAYOUT=per-service);
 * - `one-process`: every worker in one host (`bench ingest --layout one-process`, for comparison).
 */
export const LAYOUTS = ['grouped', 'per-service', 'one-process'] as const;
export type Layout = (typeof LAYOUTS)[number];

/**
 * The processes of `layout` that run the services `wanted`, workers first (in SERVICES order),
 * then the gateway. A host left with one wanted worker runs it as its own process.
 */
export function layoutProcesses(layout: Layout, wanted: readonly ServiceName[] = SERVICES): ProcessSpec[] {
  const want = new Set(wanted);
  const workers = SERVICES.filter((s) => s !== 'gateway' && want.has(s));
  const groups: ProcessSpec[] =
    layout === 'per-service'
      ? workers.map((s) => ({ name: s, services: [s] }))
      : layout === 'one-process'
        ? [{ name: 'workers', services: workers }]
        : Object.entries(WORKER_HOSTS).map(([name, members]) => ({ name, services: workers.filter((w) => (members as readonly string[]).includes(w)) }));
  const processes = groups.filter((g) => g.services.length > 0).map((g) => (g.services.length === 1 ? { name: g.services[0]!, services: g.services } : g));
  return want.has('gateway') ? [...processes, { name: 'gateway', services: ['gateway'] }] : processes;
}

/**
 * The order `up` stops processes in: by STOP_ORDER of the last service each runs (the gateway
 * first, no new work; the view last, it records what the others finished: the host with the
 * projection stops after the one with the stages).
 */
export function processStopOrder<P extends { services: readonly ServiceName[] }>(procs: readonly P[]): P[] {
  const last = (p: P) => Math.max(...p.services.map((s) => STOP_ORDER.indexOf(s)));
  return [...procs].sort((a, b) => last(a) - last(b));
}

/** Where the launcher and the tests take the layout from: MEMSTREAM_LAYOUT, `grouped` unless set. */
export function layoutFromEnv(env: NodeJS.ProcessEnv = process.env): Layout {
  const v = env.MEMSTREAM_LAYOUT?.trim() || 'grouped';
  if (!(LAYOUTS as readonly string[]).includes(v)) throw new Error(`MEMSTREAM_LAYOUT must be one of ${LAYOUTS.join(', ')} (got "${v}")`);
  return v as Layout;
}

export interface ServiceProcess {
  /** The service's name, or the worker host's. */
  name: string;
  /** The services it runs (one, or a host's several). */
  services: ServiceName[];
  child: ChildProcess;
  /** The gateway's URL once it is ready. */
  url?: string;
  /** Where a worker process serves /healthz, /readyz and /metrics (a host: one port for all it runs; the gateway serves them on `url`). */
  opsUrl?: string;
}

export interface SpawnOptions {
  env: Record<string, string>;
  /** What to do with each log line (JSON from pino). Default: drop. */
  onLog?: (service: ServiceName, line: string) => void;
  readyTimeoutMs?: number;
  /**
   * Run in its own process group. The launcher wants this: a terminal's Ctrl-C then reaches only
   * the launcher, which stops the services in order, instead of every process at once.
   */
  detached?: boolean;
  /**
   * Run the service's ahead-of-time bundle from this folder (./bundle.ts: serviceBundles) on plain
   * node; absent: its TypeScript through tsx, with no build step.
   */
  bundleDir?: string | undefined;
  /**
   * Start the process at this nice value (0: as the caller; higher: a lower CPU priority). Given
   * at the exec, through `nice`, so every thread of the process has it, not only the main one.
   */
  nice?: number;
  /** V8's semi-space (half the young generation) at most this many MB (`--max-semi-space-size`); absent or 0: V8's own (16). */
  semiSpaceMb?: number;
}

/**
 * The nice value `./memstream up` starts the pipeline's workers at (the gateway and nats-server
 * stay at the launcher's): `MEMSTREAM_WORKER_NICE` (config.ts), 10 by default. A backlog then
 * uses only the CPU the front door leaves: measured with `bench load` at 1,000 adds/s, the adds
 * answered went from 69/s to 201/s and their p99 from 330 to 147 ms (docs/pipeline.md, "Load").
 * The price: on a machine shared with other busy processes the workers get little CPU (0: all equal).
 */
export const DEFAULT_WORKER_NICE = 10;

/**
 * The young generation of `./memstream up`'s workers: V8's semi-space at most this many MB
 * (`--max-semi-space-size`), where V8's own is 16: `MEMSTREAM_WORKER_SEMI_SPACE_MB` (config.ts), 0 for
 * V8's. More of a batch's decoded events, chunks and vectors then die young instead of being
 * promoted and marked in the old generation: the share of the worker hosts' main threads spent
 * in GC fell by a third (docs/pipeline.md, "The workers' young generation"), for up to 96 MB more
 * memory a process. The gateway keeps V8's: a larger young generation there made each scavenge
 * longer and the adds' p99 worse (docs/pipeline.md, "The gateway's garbage").
 */
export const DEFAULT_WORKER_SEMI_SPACE_MB = 64;

const NICE_BIN = ['/usr/bin/nice', '/bin/nice'].find((f) => existsSync(f));

/**
 * The launcher's processes: every worker process of `layout` at once (default: up's, grouped),
 * as `launcherTuning` sets them up, then the gateway (once the workers are ready) at the launcher's priority.
 * `./memstream up` and the benches that run "as up does" (bench/load.ts, bench/ingest.ts) start
 * it through here.
 */
export async function spawnLauncherLayout(opts: SpawnOptions & WorkerTuning & { layout?: Layout }): Promise<ServiceProcess[]> {
  const { workerNice, workerSemiSpaceMb, layout = 'grouped', ...rest } = opts;
  const tuning = { workerNice, workerSemiSpaceMb };
  const specs = layoutProcesses(layout);
  const workers = await Promise.all(specs.filter((p) => p.name !== 'gateway').map((p) => spawnProcess(p, { ...rest, ...launcherTuning(p.name, tuning) })));
  const gateway = await spawnService('gateway', { ...rest, ...launcherTuning('gateway', tuning) });
  return [...workers, gateway];
}

/** The launcher's settings for its workers (MEMSTREAM_WORKER_NICE, MEMSTREAM_WORKER_SEMI_SPACE_MB); absent: the defaults above. */
export interface WorkerTuning {
  workerNice?: number | undefined;
  workerSemiSpaceMb?: number | undefined;
}

/** What the launcher starts a process of its layout with, at first and when it restarts one: a worker at its nice value with its young generation, the gateway as the launcher is. */
export function launcherTuning(name: string, t: WorkerTuning): Pick<SpawnOptions, 'nice' | 'semiSpaceMb'> {
  return name === 'gateway' ? {} : { nice: t.workerNice ?? DEFAULT_WORKER_NICE, semiSpaceMb: t.workerSemiSpaceMb ?? DEFAULT_WORKER_SEMI_SPACE_MB };
}

/**
 * A detached process leads a session of its own, and where the kernel groups tasks by session
 * (CONFIG_SCHED_AUTOGROUP, on by default in Debian's kernels: /proc/sys/kernel/sched_autogroup_enabled)
 * the scheduler first shares the CPU equally between sessions and only then by nice value inside
 * each one. A nice worker alone in its session would then weigh as much as the gateway: under
 * `./memstream up`, seven workers at nice 10 took 55 % of the two cores and the gateway 24 %, and
 * adds at 1,000/s were answered at 360–480/s, p50 12–17 ms (against 967/s, p50 5 ms, in the
 * same stack undetached). The session's own nice value (/proc/<pid>/autogroup) restores the
 * intended weights. Nothing to do where there are no autogroups (the file is absent).
 */
function niceAutogroup(pid: number, nice: number): void {
  try {
    writeFileSync(`/proc/${pid}/autogroup`, String(nice));
  } catch {
    // no autogroups here (or not Linux): nice alone decides
  }
}

/**
 * Start one service as its own process and resolve when it logs `ready`. Rejects with its last
 * output if it exits or stays silent too long.
 */
export function spawnService(name: ServiceName, opts: SpawnOptions): Promise<ServiceProcess> {
  return spawnProcess({ name, services: [name] }, opts);
}

const SERVICE_OF_LINE = /"service":"([a-z-]+)"/;

/**
 * Start one process of a layout — a service alone, or a worker host with several (./host.ts) —
 * and resolve when every service in it has logged `ready`. Rejects with its last output if it
 * exits or stays silent too long. A host's log lines reach `onLog` under the service that wrote
 * them (their `service` field).
 */
export function spawnProcess(spec: ProcessSpec, opts: SpawnOptions): Promise<ServiceProcess> {
  const { name } = spec;
  const hosted = isHost(spec);
  const entry = hosted
    ? opts.bundleDir
      ? bundledHost(opts.bundleDir)
      : path.join(REPO_ROOT, HOST_ENTRY)
    : opts.bundleDir
      ? bundledEntry(opts.bundleDir, name)
      : path.join(REPO_ROOT, 'services', name, 'src', 'main.ts');
  const env: NodeJS.ProcessEnv = { ...process.env, ...opts.env };
  if (hosted) {
    env.MEMSTREAM_WORKERS = spec.services.join(',');
    env.MEMSTREAM_PROCESS = name;
  } else {
    delete env.MEMSTREAM_WORKERS;
    delete env.MEMSTREAM_PROCESS;
  }
  // Several workers share this host: each process takes a free ops port (it logs it in its ready line)
  // unless the caller chose one; the environment's own MEMSTREAM_OPS_PORT would make them collide.
  env.MEMSTREAM_OPS_PORT = opts.env.MEMSTREAM_OPS_PORT ?? '0';
  // Readiness is read from the `ready` log line, which is info: never start a service quieter than that.
  if (['warn', 'error', 'fatal', 'silent'].includes(env.LOG_LEVEL ?? '')) env.LOG_LEVEL = 'info';
  // A host tells its services' ready lines apart by their `service` field: JSON lines, never pretty ones.
  if (hosted) env.MEMSTREAM_LOG_PRETTY = '0';
  const argv = [process.execPath, ...(process.env.MEMSTREAM_CPU_PROF ? ['--cpu-prof', '--cpu-prof-dir=' + process.env.MEMSTREAM_CPU_PROF] : []), ...(opts.semiSpaceMb ? [`--max-semi-space-size=${opts.semiSpaceMb}`] : []), ...(opts.bundleDir ? ['--enable-source-maps'] : ['--import', 'tsx']), entry];
  // `nice` execs node in place: the pid is node's, signals reach it as before.
  const viaNice = opts.nice && NICE_BIN ? [NICE_BIN, '-n', String(opts.nice)] : [];
  const [bin, ...args] = [...viaNice, ...argv];
  const child = spawn(bin!, args, {
    cwd: REPO_ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: opts.detached ?? false,
  });
  // Without a `nice` binary: the main thread (the event loop, nearly all of a worker's CPU) at least.
  if (opts.nice && !NICE_BIN && child.pid) {
    try {
      setPriority(child.pid, opts.nice);
    } catch {
      // not permitted here: the process runs at the caller's priority
    }
  }
  if (opts.nice && opts.detached && child.pid) niceAutogroup(child.pid, opts.nice);
  const readyTimeoutMs = opts.readyTimeoutMs ?? 30_000;
  return new Promise((resolve, reject) => {
    let tail = '';
    const waiting = new Set<string>(spec.services);
    let url: string | undefined;
    let opsUrl: string | undefined;
    const timer = setTimeout(() => {
      if (waiting.size > 0) {
        child.kill('SIGKILL');
        reject(new Error(`${name} was not ready within ${readyTimeoutMs} ms${hosted ? ` (still starting: ${[...waiting].join(', ')})` : ''}:\n${tail}`));
      }
    }, readyTimeoutMs);
    const onData = (d: Buffer) => {
      const s = d.toString('utf8');
      if (waiting.size > 0) tail = (tail + s).slice(-4000);
      for (const line of s.split('\n')) {
        if (!line) continue;
        const of = hosted ? ((SERVICE_OF_LINE.exec(line)?.[1] as ServiceName | undefined) ?? name) : name;
        opts.onLog?.(of as ServiceName, line);
        if (waiting.size > 0 && line.includes('"msg":"ready"') && waiting.has(of)) {
          try {
            const parsed = JSON.parse(line) as { url?: string; opsUrl?: string };
            url ??= parsed.url;
            opsUrl ??= parsed.opsUrl;
          } catch {
            // a pretty-printed line (a service alone): the gateway URL is then known from the config
          }
          waiting.delete(of);
          if (waiting.size === 0) {
            clearTimeout(timer);
            resolve({ name, services: [...spec.services], child, ...(url ? { url } : {}), ...(opsUrl ? { opsUrl } : {}) });
          }
        }
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code, signal) => {
      if (waiting.size > 0) {
        clearTimeout(timer);
        reject(new Error(`${name} exited (${code ?? signal}) before it was ready${hosted ? ` (still starting: ${[...waiting].join(', ')})` : ''}:\n${tail}`));
      }
    });
  });
}

/** Stop a service process: SIGTERM (graceful) or SIGKILL (crash), waiting until it has exited. */
export function stopProcess(child: ChildProcess, signal: NodeJS.Signals = 'SIGTERM', timeoutMs = 25_000): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    const t = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('exit', () => {
      clearTimeout(t);
      resolve();
    });
    child.kill(signal);
  });
}
