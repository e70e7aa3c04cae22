import { BULK_ADMISSION, CONSUMERS, STREAM_DOCS } from '@memstream/contracts';
import { errorMessage, type Logger } from '@memstream/kit';
import type { Bus } from './connect.js';
import type { LaneBudget } from './pull-loop.js';

/** The documents waiting or in work after the entrance: undelivered plus unacked messages of each later stage's durable. */
export async function downstreamBacklog(bus: Bus, durables: readonly string[] = BULK_ADMISSION.downstream.map((s) => CONSUMERS[s].durable)): Promise<number> {
  const infos = await Promise.all(durables.map((d) => bus.jsm.consumers.info(STREAM_DOCS, d)));
  return infos.reduce((n, i) => n + i.num_pending + i.num_ack_pending, 0);
}

/**
 * Opens and closes the entrance's bulk lane (LaneBudget.admit) from the later stages' backlog,
 * read every `pollMs`: open while it is at most `maxBacklog`. When it cannot be read (the broker
 * is away) the last answer stands. Stops with the returned function.
 */
export function admitBulkByBacklog(
  bus: Bus,
  budget: LaneBudget,
  log: Logger,
  opts: { maxBacklog?: number; pollMs?: number; read?: () => Promise<number> } = {},
): () => void {
  const maxBacklog = opts.maxBacklog ?? BULK_ADMISSION.maxBacklog;
  const pollMs = opts.pollMs ?? BULK_ADMISSION.pollMs;
  const read = opts.read ?? (() => downstreamBacklog(bus));
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let warned = false;
  const tick = async () => {
    try {
      const backlog = await read();
      budget.admit(backlog <= maxBacklog);
      warned = false;
    } catch (err) {
      if (!warned) log.warn({ err: errorMessage(err) }, 'could not read the later stages\' backlog: the bulk lane keeps its last admission');
      warned = true;
    }
    if (!stopped) {
      timer = setTimeout(tick, pollMs);
      timer.unref();
    }
  };
  void tick();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}
