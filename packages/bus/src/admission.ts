import { BULK_ADMISSION, CONSUMERS, STREAM_DOCS } from '@memstream/contracts';
import { errorMessage, type Logger } from '@memstream/kit';
import type { Bus } from './connect.js';
import type { LaneBudget } from './pull-loop.js';

/** What the bulk lane's admission reads (BULK_ADMISSION). */
export interface AdmissionReading {
  /** The documents waiting or in work after the entrance: undelivered plus unacked messages of each later stage's durable. */
  backlog: number;
  /** Messages not yet delivered to the entrance's normal-lane durable. */
  normalAhead: number;
}

/** Read the later stages' durables and the entrance's normal one, in one round of consumer-info requests. */
export async function readAdmission(
  bus: Bus,
  normalDurable: string,
  downstream: readonly string[] = BULK_ADMISSION.downstream.map((s) => CONSUMERS[s].durable),
): Promise<AdmissionReading> {
  const [normal, ...later] = await Promise.all([normalDurable, ...downstream].map((d) => bus.jsm.consumers.info(STREAM_DOCS, d)));
  return { backlog: later.reduce((n, i) => n + i.num_pending + i.num_ack_pending, 0), normalAhead: normal!.num_pending };
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
