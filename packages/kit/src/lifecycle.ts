import type { Logger } from 'pino';

/** How long a service whose launcher died may take to stop: nobody waits for it, and `up`'s promise is that nothing outlives it by more than seconds. */
const ORPHAN_GRACE_MS = 5_000;

/**
 * Run a service until SIGINT/SIGTERM, then stop its parts in the order they were registered
 * — the house order is: stop consuming → drain NATS → close stores → flush telemetry.
 * A second signal, or a stop that takes longer than `graceMs`, exits at once, with a log line
 * naming the step it was still waiting for (a drain towards a broker that is gone never ends).
 */
export function onShutdown(log: Logger, steps: Array<[string, () => Promise<unknown> | unknown]>, graceMs = 20_000): void {
  let stopping = false;
  let waitingFor = 'nothing';
  const stop = async (signal: string, deadlineMs = graceMs) => {
    if (stopping) {
      log.warn({ signal, waitingFor }, 'second signal: exiting now');
      process.exit(1);
    }
    stopping = true;
    // Armed before anything else: even the log line below may block (a pipe nobody reads).
    const timer = setTimeout(() => {
      try {
        log.error({ deadlineMs, waitingFor }, `shutdown took too long: exiting while waiting for "${waitingFor}"`);
      } finally {
        process.exit(1);
      }
    }, deadlineMs);
    timer.unref();
    log.info({ signal, deadlineMs }, 'shutting down');
    let code = 0;
    for (const [name, step] of steps) {
      waitingFor = name;
      try {
        await step();
      } catch (err) {
        code = 1;
        log.error({ err, step: name }, 'shutdown step failed');
      }
    }
    waitingFor = 'nothing';
    log.info('stopped');
    process.exit(code);
  };
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('SIGTERM', () => void stop('SIGTERM'));
  // Under the launcher, services run in their own process group; if the launcher itself dies
  // without stopping them (kill -9), they stop on their own rather than linger as orphans.
  // The launcher passes its own pid: a launcher that died while this process was still starting
  // is noticed too (process.ppid read now would already be the adoptive parent). '1' (older
  // launchers) means whoever the parent is now.
  const parent = Number(process.env.MEMSTREAM_EXIT_WITH_PARENT ?? 0);
  if (parent > 0) whenParentDies(() => void stop('parent exited', Math.min(graceMs, ORPHAN_GRACE_MS)), parent === 1 ? process.ppid : parent);
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
