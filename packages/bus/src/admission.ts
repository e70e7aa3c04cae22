import { BULK_ADMISSION, CONSUMERS, STREAM_DOCS } from '@memstream/contracts';
import { errorMessage, type Logger } from '@memstream/kit';
import type { Bus } from './connect.js';
import type { LaneBudget } from './pull-loop.js';
import { backlogReports, type Backlog, type BacklogReports } from './backlog.js';

/** What the bulk lane's admission reads (BULK_ADMISSION). */
export interface AdmissionReading {
  /** The documents waiting or in work after the entrance: undelivered plus unacked messages of each later stage's durable. */
  backlog: number;
  /** Messages not yet delivered to the entrance's normal-lane durable. */
  normalAhead: number;
}

/** One listener to the stages' backlog announcements per connection (backlog.ts). */
const reportsOf = new WeakMap<Bus, BacklogReports>();

/**
 * Read the later stages' durables and the entrance's normal one: from what their processes
 * announce (backlog.ts), and with consumer info for a durable none of whose processes was heard
 * from lately, all at once.
 */
export async function readAdmission(
  bus: Bus,
  normalDurable: string,
  downstream: readonly string[] = BULK_ADMISSION.downstream.map((s) => CONSUMERS[s].durable),
): Promise<AdmissionReading> {
  let reports = reportsOf.get(bus);
  if (!reports) reportsOf.set(bus, (reports = backlogReports(bus)));
  const [normal, ...later] = await Promise.all(
    [normalDurable, ...downstream].map(async (d): Promise<Backlog> => {
      const heard = reports.of(d);
      if (heard) return heard;
      const i = await bus.jsm.consumers.info(STREAM_DOCS, d);
      return { pending: i.num_pending, held: i.num_ack_pending };
    }),
  );
  return { backlog: later.reduce((n, b) => n + b.pending + b.held, 0), normalAhead: normal!.pending };
}

/**
 * Opens and closes the entrance's bulk lane (LaneBudget.admit), read every `pollMs`: open while
 * the later stages' backlog is at most `maxBacklog` and the normal lane has at most
 * `maxNormalAhead` messages waiting for it. When they cannot be read (the broker is away) the last
 * answer stands. Stops with the returned function.
 */
export function admitBulkByBacklog(
  bus: Bus,
  budget: LaneBudget,
  log: Logger,
  opts: { normalDurable: string; maxBacklog?: number; maxNormalAhead?: number; pollMs?: number; read?: () => Promise<AdmissionReading> },
): () => void {
  const maxBacklog = opts.maxBacklog ?? BULK_ADMISSION.maxBacklog;
  const maxNormalAhead = opts.maxNormalAhead ?? BULK_ADMISSION.maxNormalAhead;
  const pollMs = opts.pollMs ?? BULK_ADMISSION.pollMs;
  const read = opts.read ?? (() => readAdmission(bus, opts.normalDurable));
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let warned = false;
  const tick = async () => {
    try {
      const r = await read();
      budget.admit(r.backlog <= maxBacklog && r.normalAhead <= maxNormalAhead);
      warned = false;
    } catch (err) {
      if (!warned) log.warn({ err: errorMessage(err) }, 'could not read the consumers that admit bulk work: the bulk lane keeps its last admission');
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
