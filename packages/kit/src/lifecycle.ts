import type { Logger } from 'pino';
import { processWide } from './process-wide.js';

/** How long a service whose launcher died may take to stop: nobody waits for it, and `up`'s promise is that nothing outlives it by more than seconds. */
const ORPHAN_GRACE_MS = 5_000;

type Steps = Array<[string, () => Promise<unknown> | unknown]>;

/** One service of the process and the parts it stops, in order. */
interface Member {
  log: Logger;
  steps: Steps;
  graceMs: number;
  waitingFor: string;
}

/**
 * The process's shutdown: every service it hosts (one, or several under a worker host:
 * packages/cli/src/host.ts) registers here, and one signal stops them all (processWide).
 */
interface Shutdown {
  members: Member[];
  /** Set once a stop began: a service registering later is stopped at once. */
  stop: ((member: Member) => void) | null;
}

function processShutdown(): Shutdown {
  return processWide('kit.shutdown', installShutdown);
}

function installShutdown(): Shutdown {
  const s: Shutdown = { members: [], stop: null };
  const runs: Array<Promise<boolean>> = [];
  const run = async (m: Member): Promise<boolean> => {
    let ok = true;
    for (const [name, step] of m.steps) {
      m.waitingFor = name;
      try {
        await step();
      } catch (err) {
        ok = false;
        m.log.error({ err, step: name }, 'shutdown step failed');
      }
    }
    m.waitingFor = 'nothing';
    m.log.info('stopped');
    return ok;
  };
  const stop = async (signal: string, orphaned: boolean) => {
    if (s.stop) {
      for (const m of s.members) m.log.warn({ signal, waitingFor: m.waitingFor }, 'second signal: exiting now');
      process.exit(1);
    }
    const graceMs = Math.max(...s.members.map((m) => m.graceMs), 0);
    const deadlineMs = orphaned ? Math.min(graceMs, ORPHAN_GRACE_MS) : graceMs;
    // Armed before anything else: even the log lines below may block (a pipe nobody reads).
    const timer = setTimeout(() => {
      try {
        for (const m of s.members) if (m.waitingFor !== 'nothing') m.log.error({ deadlineMs, waitingFor: m.waitingFor }, `shutdown took too long: exiting while waiting for "${m.waitingFor}"`);
      } finally {
        process.exit(1);
      }
    }, deadlineMs);
    timer.unref();
    s.stop = (m) => {
      m.log.info({ signal, deadlineMs }, 'shutting down');
      runs.push(run(m));
    };
    // Every service at once, each in its own order: they share nothing but the process (each its
    // own broker connection and stores), so one's drain need not wait for another's.
    for (const m of s.members) s.stop(m);
    let code = 0;
    // `runs` may grow meanwhile (a service that finished starting after the signal).
    for (let i = 0; i < runs.length; i++) if (!(await runs[i])) code = 1;
    process.exit(code);
  };
  process.on('SIGINT', () => void stop('SIGINT', false));
  process.on('SIGTERM', () => void stop('SIGTERM', false));
  // Under the launcher, services run in their own process group; if the launcher itself dies
  // without stopping them (kill -9), they stop on their own rather than linger as orphans.
  // The launcher passes its own pid: a launcher that died while this process was still starting
  // is noticed too (process.ppid read now would already be the adoptive parent). '1' (older
  // launchers) means whoever the parent is now.
  const parent = Number(process.env.MEMSTREAM_EXIT_WITH_PARENT ?? 0);
  if (parent > 0) whenParentDies(() => void stop('parent exited', true), parent === 1 ? process.ppid : parent);
  return s;
}

/**
 * Run a service until SIGINT/SIGTERM, then stop its parts in the order they were registered
 * — the house order is: stop consuming → drain NATS → close stores → flush telemetry.
 * Several services in one process (a worker host) each register their own steps: a signal stops
 * them all at once, each in its order, and the process exits when the last has stopped (1 if a
 * step of any failed). A second signal, or a stop that takes longer than the longest `graceMs`,
 * exits at once, with a log line per service naming the step it was still waiting for (a drain
 * towards a broker that is gone never ends).
 */
export function onShutdown(log: Logger, steps: Steps, graceMs = 20_000): void {
  const s = processShutdown();
  const member: Member = { log, steps, graceMs, waitingFor: 'nothing' };
  s.members.push(member);
  s.stop?.(member);
}

/**
 * Call `then` once the process `parent` (default: the current parent) is no longer this
 * process's parent — it died and this one was adopted. Checked every second. For processes that
 * must not outlive whoever started them; pass the starter's pid when it may die before this runs.
 */
export function whenParentDies(then: () => void, parent = process.ppid): void {
  const t = setInterval(() => {
    if (process.ppid === parent) return;
    clearInterval(t);
    then();
  }, 1_000);
  t.unref();
}

/** Log and exit on a failure during start-up, so a broken service never half-runs. */
export function fatal(log: Logger, err: unknown, msg = 'failed to start'): never {
  log.fatal({ err }, msg);
  process.exit(1);
}
