import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { availableParallelism } from 'node:os';

export interface NatsServerHandle {
  /** The client URL, with the generated credentials in it (`nats://memstream:…@127.0.0.1:port`): secret. */
  url: string;
  /** The same without credentials, for logs. */
  address: string;
  port: number;
  version: string;
  /** Whether this server fsyncs every write (sync_interval: always, nats-server >= 2.10). */
  syncAlways: boolean;
  /** The GOMAXPROCS it runs with (natsServerEnv), or null: Go's default. */
  gomaxprocs: string | null;
  pid(): number | undefined;
  /** Graceful stop (SIGTERM), waiting for exit. */
  stop(): Promise<void>;
  /** SIGKILL, waiting for exit: the crash case. */
  kill(): Promise<void>;
  /** Start again on the same port and store after a stop or kill. */
  restart(): Promise<void>;
  /** The monitoring endpoint (`http://127.0.0.1:port`, /varz, /connz…) when started with `monitor`, else null. */
  monitorUrl: string | null;
  /** Called when the server exits after it was ready (a crash or a kill), not for stop()/kill()/restart(). */
  onExit(listener: (code: number | null, signal: NodeJS.Signals | null) => void): void;
}

/** The client credentials of an embedded server: generated once into its store, mode 600, reused. */
function credentials(file: string): { user: string; password: string } {
  if (existsSync(file)) {
    const c = JSON.parse(readFileSync(file, 'utf8')) as { user?: unknown; password?: unknown };
    if (typeof c.user === 'string' && typeof c.password === 'string' && c.user && c.password) return { user: c.user, password: c.password };
  }
  const c = { user: 'memstream', password: randomBytes(24).toString('base64url') };
  writeFileSync(file, JSON.stringify(c) + '\n', { mode: 0o600 });
  return c;
}

/** A port kept from an earlier start, or -1 (any free one). */
function keptPort(file: string | undefined): number {
  if (!file || !existsSync(file)) return -1;
  const n = Number(readFileSync(file, 'utf8').trim());
  return Number.isInteger(n) && n > 0 && n < 65536 ? n : -1;
}

let pdeathsig: boolean | undefined;
/** util-linux's setpriv can ask the kernel to SIGTERM a child when its parent dies (PR_SET_PDEATHSIG). */
function hasSetpriv(): boolean {
  if (pdeathsig === undefined) {
    try {
      execFileSync('setpriv', ['--help'], { stdio: 'ignore' });
      pdeathsig = process.platform === 'linux';
    } catch {
      pdeathsig = false;
    }
  }
  return pdeathsig;
}

export function natsServerVersion(bin = 'nats-server'): string {
  const out = execFileSync(bin, ['--version'], { encoding: 'utf8' });
  const m = /v?(\d+\.\d+\.\d+)/.exec(out);
  if (!m) throw new Error(`cannot read the nats-server version from: ${out.trim()}`);
  return m[1]!;
}

/**
 * A nats-server left running on this store by a launcher that died (kill -9) would hold the
 * same files as the one we are about to start: stop it first.
 */
async function stopStale(pidFile: string): Promise<void> {
  let pid: number;
  try {
    pid = Number(readFileSync(pidFile, 'utf8').trim());
  } catch {
    return;
  }
  if (!pid || !isNatsServer(pid)) return;
  process.kill(pid, 'SIGTERM');
  for (let i = 0; i < 100 && isNatsServer(pid); i++) await new Promise((r) => setTimeout(r, 100));
  if (isNatsServer(pid)) process.kill(pid, 'SIGKILL');
}

function isNatsServer(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('nats-server');
  } catch {
    return false;
  }
}

function atLeast(version: string, major: number, minor: number): boolean {
  const [a = 0, b = 0] = version.split('.').map(Number);
  return a > major || (a === major && b >= minor);
}

/**
 * The embedded server's environment: on a machine of at most two cores, Go's scheduler is given
 * one processor (GOMAXPROCS=1) unless the caller chose a number. With two, the server's idle
 * processor spins looking for work at every wake-up while the Node processes need the same cores:
 * measured with `bench ingest --docs 5000 --memory-docs 0` (2 cores, back to back, both orders)
 * nats-server took 1.78 and 2.04 CPU-ms per document with one against 2.53 and 2.51 with Go's
 * default, and the pipeline finished 227 and 205 documents/s against 197 and 192; the raw publish
 * ceiling did not fall (20,903 and 21,764 messages/s against 19,624 and 18,887). Larger machines
 * keep Go's default: not measured there. It is the same server with the same store and acks.
 */
export function natsServerEnv(env: NodeJS.ProcessEnv = process.env, cores = availableParallelism()): NodeJS.ProcessEnv {
  return env.GOMAXPROCS || cores > 2 ? env : { ...env, GOMAXPROCS: '1' };
}

/**
 * How `./memstream up` starts its nats-server, and so the benches that run "as up does": a session
 * (and so, where the kernel has them, an autogroup) of its own, stopped by the kernel with its parent.
 */
export const LAUNCHER_NATS = { detached: true, dieWithParent: true } as const;

/**
 * Start a private nats-server with JetStream on a free loopback port (the system may already run
 * one on 4222), storing under `storeDir`. It listens on port -1 and we read the chosen port from
 * its log, so there is no window in which another process can take it. Durability: nats-server
 * >= 2.10 gets `sync_interval: always` (fsync before every ack). Debian's 2.9.10 has no such
 * setting: it writes every message to the OS before acknowledging (safe across a kill -9 of the
 * server) but fsyncs every 2 minutes, so an OS crash can lose the last acknowledged writes.
 */
export async function startNatsServer(opts: {
  storeDir: string;
  bin?: string;
  port?: number;
  log?: (line: string) => void;
  /** Own process group, so a terminal's Ctrl-C reaches only the launcher, which stops it last. */
  detached?: boolean;
  /**
   * A file keeping the port: the first start takes a free one and writes it there, later starts
   * (and restarts) use it again, so clients that reconnect find the server where it was. When
   * that port is taken by then, a free one is chosen and written.
   */
  portFile?: string;
  /**
   * The kernel stops the server (SIGTERM) when the process that started it dies, even by
   * SIGKILL (setpriv --pdeathsig; Linux with util-linux). Only from a main thread: the signal
   * follows the thread that spawned it, and a worker thread ends before its process does.
   */
  dieWithParent?: boolean;
  /** Serve the monitoring endpoint on a free loopback port (the benches read message counts from /varz). */
  monitor?: boolean;
}): Promise<NatsServerHandle> {
  const bin = opts.bin ?? 'nats-server';
  const version = natsServerVersion(bin);
  const syncAlways = atLeast(version, 2, 10);
  const env = natsServerEnv();
  mkdirSync(opts.storeDir, { recursive: true });
  const pidFile = path.join(opts.storeDir, 'nats.pid');
  await stopStale(pidFile);
  let port = opts.port ?? keptPort(opts.portFile);
  const auth = credentials(path.join(opts.storeDir, 'credentials.json'));
  const conf = path.join(opts.storeDir, 'nats.conf');
  const write = () =>
    writeFileSync(
      conf,
      [
        `listen: "127.0.0.1:${port}"`,
        ...(opts.monitor ? ['http: "127.0.0.1:-1"'] : []),
        `max_payload: 1MB`,
        `pid_file: ${JSON.stringify(path.resolve(pidFile))}`,
        `authorization {`,
        `  user: ${JSON.stringify(auth.user)}`,
        `  password: ${JSON.stringify(auth.password)}`,
        `}`,
        `jetstream {`,
        `  store_dir: ${JSON.stringify(path.resolve(opts.storeDir))}`,
        `  max_file_store: 64GB`,
        ...(syncAlways ? ['  sync_interval: always'] : []),
        `}`,
        '',
      ].join('\n'),
      { mode: 0o600 },
    );
  let child: ChildProcess | null = null;
  let monitorUrl: string | null = null;
  const exitListeners: Array<(code: number | null, signal: NodeJS.Signals | null) => void> = [];

  const launch = () =>
    new Promise<void>((resolve, reject) => {
      write();
      const [cmd, args] = opts.dieWithParent && hasSetpriv() ? ['setpriv', ['--pdeathsig', 'SIGTERM', bin, '-c', conf]] : [bin, ['-c', conf]];
      const c = spawn(cmd, args, { stdio: ['ignore', 'ignore', 'pipe'], detached: opts.detached ?? false, env });
      child = c;
      let buf = '';
      let ready = false;
      const timer = setTimeout(() => {
        if (!ready) {
          c.kill('SIGKILL');
          reject(new Error(`nats-server did not become ready in 15 s:\n${buf.slice(-2000)}`));
        }
      }, 15_000);
      c.stderr!.setEncoding('utf8');
      c.stderr!.on('data', (d: string) => {
        for (const line of d.split('\n')) if (line) opts.log?.(line);
        if (ready) return;
        buf += d;
        const m = /Listening for client connections on [\d.]+:(\d+)/.exec(buf);
        if (m) port = Number(m[1]);
        const mon = /Starting http monitor on ([\d.]+:\d+)/.exec(buf);
        if (mon) monitorUrl = `http://${mon[1]}`;
        if (/Server is ready/.test(buf) && port > 0) {
          ready = true;
          clearTimeout(timer);
          resolve();
        }
      });
      c.once('exit', (code, signal) => {
        if (!ready) {
          clearTimeout(timer);
          reject(new Error(`nats-server exited with ${code} before it was ready:\n${buf.slice(-2000)}`));
        } else if (child === c && !expected.has(c)) {
          for (const l of exitListeners) l(code, signal);
        }
      });
    });

  // Exits we caused (stop, kill, restart) are not reported to onExit listeners.
  const expected = new WeakSet<ChildProcess>();
  const start = async () => {
    try {
      await launch();
    } catch (err) {
      // The kept port is taken by another process now: take any free one (and keep that).
      if (port <= 0 || !/address already in use/i.test(String(err))) throw err;
      port = -1;
      await launch();
    }
    if (opts.portFile) writeFileSync(opts.portFile, `${port}\n`);
  };

  const waitExit = (c: ChildProcess | null, signal: NodeJS.Signals) =>
    new Promise<void>((resolve) => {
      if (!c || c.exitCode !== null || c.signalCode !== null) return resolve();
      expected.add(c);
      c.once('exit', () => resolve());
      c.kill(signal);
    });

  await start();
  return {
    get url() {
      return `nats://${encodeURIComponent(auth.user)}:${encodeURIComponent(auth.password)}@127.0.0.1:${port}`;
    },
    get address() {
      return `nats://127.0.0.1:${port}`;
    },
    get port() {
      return port;
    },
    version,
    syncAlways,
    gomaxprocs: env.GOMAXPROCS ?? null,
    get monitorUrl() {
      return monitorUrl;
    },
    pid: () => child?.pid,
    stop: () => waitExit(child, 'SIGTERM'),
    kill: () => waitExit(child, 'SIGKILL'),
    restart: async () => {
      await waitExit(child, 'SIGTERM');
      await start();
    },
    onExit: (listener) => {
      exitListeners.push(listener);
    },
  };
}
