import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { setPriority } from 'node:os';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import { SERVICE_NAMES } from '@memstream/contracts';
import { bundledEntry } from './bundle.js';

/** The repository root (this file is packages/cli/src/stack.ts). */
export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

/** The services in start order, from the pipeline table (packages/contracts/src/pipeline.ts). */
export const SERVICES = SERVICE_NAMES;
export type ServiceName = (typeof SERVICES)[number];

export interface ServiceProcess {
  name: ServiceName;
  child: ChildProcess;
  /** The gateway's URL once it is ready. */
  url?: string;
  /** Where a worker serves /healthz, /readyz and /metrics (the gateway serves them on `url`). */
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
}

/**
 * The nice value `./memstream up` starts the pipeline's workers at (the gateway and nats-server
 * stay at the launcher's): `MEMSTREAM_WORKER_NICE` (config.ts), 10 by default. A backlog then
 * uses only the CPU the front door leaves: measured with `bench load` at 1,000 adds/s, the adds
 * answered went from 69/s to 201/s and their p99 from 330 to 147 ms (docs/pipeline.md, "Load").
 * The price: on a machine shared with other busy processes the workers get little CPU (0: all equal).
 */
export const DEFAULT_WORKER_NICE = 10;

const NICE_BIN = ['/usr/bin/nice', '/bin/nice'].find((f) => existsSync(f));

/**
 * The launcher's process layout: every worker at once, each its own process at `nice`, then the
 * gateway (once the workers are ready) at the launcher's priority. `./memstream up` and the
 * benches that run "as up does" (bench/load.ts) start it through here.
 */
export async function spawnLauncherLayout(opts: SpawnOptions & { workerNice?: number }): Promise<ServiceProcess[]> {
  const { workerNice: nice = DEFAULT_WORKER_NICE, ...rest } = opts;
  const workers = await Promise.all(SERVICES.filter((s) => s !== 'gateway').map((s) => spawnService(s, { ...rest, nice })));
  const gateway = await spawnService('gateway', rest);
  return [...workers, gateway];
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
  const entry = opts.bundleDir ? bundledEntry(opts.bundleDir, name) : path.join(REPO_ROOT, 'services', name, 'src', 'main.ts');
  const env = { ...process.env, ...opts.env };
  // Several workers share this host: each takes a free ops port (it logs it in its ready line)
  // unless the caller chose one; the environment's own MEMSTREAM_OPS_PORT would make them collide.
  env.MEMSTREAM_OPS_PORT = opts.env.MEMSTREAM_OPS_PORT ?? '0';
  // Readiness is read from the `ready` log line, which is info: never start a service quieter than that.
  if (['warn', 'error', 'fatal', 'silent'].includes(env.LOG_LEVEL ?? '')) env.LOG_LEVEL = 'info';
  const argv = [process.execPath, ...(process.env.MEMSTREAM_CPU_PROF ? ['--cpu-prof', '--cpu-prof-dir=' + process.env.MEMSTREAM_CPU_PROF] : []), ...(opts.bundleDir ? ['--enable-source-maps'] : ['--import', 'tsx']), entry];
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
  return new Promise((resolve, reject) => {
    let tail = '';
    let ready = false;
    const timer = setTimeout(() => {
      if (!ready) {
        child.kill('SIGKILL');
        reject(new Error(`${name} was not ready within ${opts.readyTimeoutMs ?? 30_000} ms:\n${tail}`));
      }
    }, opts.readyTimeoutMs ?? 30_000);
    const onData = (d: Buffer) => {
      const s = d.toString('utf8');
      if (!ready) tail = (tail + s).slice(-4000);
      for (const line of s.split('\n')) {
        if (!line) continue;
        opts.onLog?.(name, line);
        if (!ready && line.includes('"msg":"ready"')) {
          ready = true;
          clearTimeout(timer);
          let url: string | undefined;
          let opsUrl: string | undefined;
          try {
            ({ url, opsUrl } = JSON.parse(line) as { url?: string; opsUrl?: string });
          } catch {
            // a pretty-printed line: the gateway URL is then known from the config
          }
          resolve({ name, child, ...(url ? { url } : {}), ...(opsUrl ? { opsUrl } : {}) });
        }
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code, signal) => {
      if (!ready) {
        clearTimeout(timer);
        reject(new Error(`${name} exited (${code ?? signal}) before it was ready:\n${tail}`));
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
