import type { Logger } from 'pino';

/**
 * Run a service until SIGINT/SIGTERM, then stop its parts in the order they were registered
 * — the house order is: stop consuming → drain NATS → close stores → flush telemetry.
 * A second signal, or a stop that takes longer than `graceMs`, exits at once.
 */
export function onShutdown(log: Logger, steps: Array<[string, () => Promise<unknown> | unknown]>, graceMs = 20_000): void {
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) {
      log.warn({ signal }, 'second signal: exiting now');
      process.exit(1);
    }
    stopping = true;
    log.info({ signal }, 'shutting down');
    const timer = setTimeout(() => {
      log.error({ graceMs }, 'shutdown took too long: exiting');
      process.exit(1);
    }, graceMs);
    timer.unref();
    let code = 0;
    for (const [name, step] of steps) {
      try {
        await step();
      } catch (err) {
        code = 1;
        log.error({ err, step: name }, 'shutdown step failed');
      }
    }
    log.info('stopped');
    process.exit(code);
  };
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('SIGTERM', () => void stop('SIGTERM'));
  // Under the launcher, services run in their own process group; if the launcher itself dies
  // without stopping them (kill -9), they stop on their own rather than linger as orphans.
  if (process.env.MEMSTREAM_EXIT_WITH_PARENT === '1') {
    const parent = process.ppid;
    setInterval(() => {
      if (process.ppid !== parent) void stop('parent exited');
    }, 1_000).unref();
  }
}

/** Log and exit on a failure during start-up, so a broken service never half-runs. */
export function fatal(log: Logger, err: unknown, msg = 'failed to start'): never {
  log.fatal({ err }, msg);
  process.exit(1);
}
