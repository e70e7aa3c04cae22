import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

export interface NatsServerHandle {
  url: string;
  port: number;
  version: string;
  /** Whether this server fsyncs every write (sync_interval: always, nats-server >= 2.10). */
  syncAlways: boolean;
  pid(): number | undefined;
  /** Graceful stop (SIGTERM), waiting for exit. */
  stop(): Promise<void>;
  /** SIGKILL, waiting for exit: the crash case. */
  kill(): Promise<void>;
  /** Start again on the same port and store after a stop or kill. */
  restart(): Promise<void>;
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
}): Promise<NatsServerHandle> {
  const bin = opts.bin ?? 'nats-server';
  const version = natsServerVersion(bin);
  const syncAlways = atLeast(version, 2, 10);
  mkdirSync(opts.storeDir, { recursive: true });
  const pidFile = path.join(opts.storeDir, 'nats.pid');
  await stopStale(pidFile);
  let port = opts.port ?? -1;
  const conf = path.join(opts.storeDir, 'nats.conf');
  const write = () =>
    writeFileSync(
      conf,
      [
        `listen: "127.0.0.1:${port}"`,
        `max_payload: 1MB`,
        `pid_file: ${JSON.stringify(path.resolve(pidFile))}`,
        `jetstream {`,
        `  store_dir: ${JSON.stringify(path.resolve(opts.storeDir))}`,
        `  max_file_store: 64GB`,
        ...(syncAlways ? ['  sync_interval: always'] : []),
        `}`,
        '',
      ].join('\n'),
    );
  let child: ChildProcess | null = null;

  const launch = () =>
    new Promise<void>((resolve, reject) => {
      write();
      const c = spawn(bin, ['-c', conf], { stdio: ['ignore', 'ignore', 'pipe'], detached: opts.detached ?? false });
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
        if (/Server is ready/.test(buf) && port > 0) {
          ready = true;
          clearTimeout(timer);
          resolve();
        }
      });
      c.once('exit', (code) => {
        if (!ready) {
          clearTimeout(timer);
          reject(new Error(`nats-server exited with ${code} before it was ready:\n${buf.slice(-2000)}`));
        }
      });
    });

  const waitExit = (c: ChildProcess | null, signal: NodeJS.Signals) =>
    new Promise<void>((resolve) => {
      if (!c || c.exitCode !== null || c.signalCode !== null) return resolve();
      c.once('exit', () => resolve());
      c.kill(signal);
    });

  await launch();
  return {
    get url() {
      return `nats://127.0.0.1:${port}`;
    },
    get port() {
      return port;
    },
    version,
    syncAlways,
    pid: () => child?.pid,
    stop: () => waitExit(child, 'SIGTERM'),
    kill: () => waitExit(child, 'SIGKILL'),
    restart: async () => {
      await waitExit(child, 'SIGTERM');
      await launch();
    },
  };
}
