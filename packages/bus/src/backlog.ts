import { randomUUID } from 'node:crypto';
import type { Bus } from './connect.js';

/**
 * A stage's backlog as its own processes see it, announced on core NATS (not kept anywhere) for
 * the readers of BULK_ADMISSION: the entrance, ten times a second, and each gateway's lane read.
 *
 * Why not consumer info alone: before 2.9.15 (nats-io/nats-server#3877; Debian has 2.9.10) every
 * `$JS.API.CONSUMER.INFO` recounts the consumer's pending messages from the store, which for a
 * wildcard filter over a stream with a subject per document is slow, on the one processor the
 * embedded server runs with, and publishes wait behind it. Four of them ten times a second (the
 * entrance's poll) cost the adds' p99 about 8 ms under a steady 1,000 adds/s (paced, 20 s against
 * `./memstream up`, two runs each, 2026-12-01: 22.0 and 22.6 ms with the poll at 100 ms, 14.2 and
 * 14.2 ms at 1 s, 16.2 and 18.5 ms with these announcements at 100 ms; throughput the same). A
 * delivered message carries its consumer's pending count in its reply subject (JsMsg.info.pending)
 * for nothing, and a process knows what it holds. So each process of a stage announces
 * {pending, held} for its durable, at most every `intervalMs` while they change and every
 * `heartbeatMs` while they do not; a reader adds up, per durable, the newest pending and the held
 * messages of every process heard from within `freshMs`.
 * A durable with no fresh announcement (its processes are down, stopped, or of an older version)
 * is read with consumer info, as before, so the gate still closes on a stage that stopped.
 *
 * The pending count is the server's at the process's last pull: what arrived since is not in it
 * until the next one, at most a batch's work later. Admission is a fairness rule, not a guarantee
 * about data: a reading a few dozen documents low admits a few dozen more bulk documents.
 */
export const BACKLOG_SUBJECT_PREFIX = 'memstream.backlog.';

export interface Backlog {
  /** Messages not yet delivered (the server's count at the last pull). */
  pending: number;
  /** Messages delivered to this process and not yet settled. */
  held: number;
}

export interface BacklogAnnouncer {
  /** Called on every message a stage's loop takes or settles: two numbers, nothing allocated unless they changed. */
  update(pending: number, held: number): void;
  stop(): void;
}

/** Announce one durable's backlog from this process. `update` is cheap: it is called on every message. */
export function backlogAnnouncer(bus: Pick<Bus, 'nc'>, durable: string, opts: { intervalMs?: number; heartbeatMs?: number } = {}): BacklogAnnouncer {
  const intervalMs = opts.intervalMs ?? 50;
  const heartbeatMs = opts.heartbeatMs ?? 250;
  const subject = BACKLOG_SUBJECT_PREFIX + durable;
  const instance = randomUUID();
  const enc = new TextEncoder();
  let pending = 0;
  let held = 0;
  /** What the last announcement said (-1: none yet). */
  let sentPending = -1;
  let sentHeld = -1;
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  const send = () => {
    timer = undefined;
    if (stopped) return;
    sentPending = pending;
    sentHeld = held;
    try {
      bus.nc.publish(subject, enc.encode(JSON.stringify({ instance, pending, held })));
    } catch {
      // The connection is closing or reconnecting: readers fall back to consumer info meanwhile.
    }
  };
  const heartbeat = setInterval(send, heartbeatMs);
  heartbeat.unref();
  return {
    update(p, h) {
      pending = p;
      held = h;
      if (timer || stopped || (p === sentPending && h === sentHeld)) return;
      timer = setTimeout(send, intervalMs);
      timer.unref();
    },
    stop() {
      stopped = true;
      clearInterval(heartbeat);
      clearTimeout(timer);
    },
  };
}

export interface BacklogReports {
  /** A durable's pending (the newest heard) and held (summed over its processes heard within freshMs); null when none was heard within it. */
  of(durable: string): Backlog | null;
  stop(): void;
}

/** Listen to every durable's announcements (see backlogAnnouncer). */
export function backlogReports(bus: Pick<Bus, 'nc'>, opts: { freshMs?: number; now?: () => number } = {}): BacklogReports {
  const freshMs = opts.freshMs ?? 1_000;
  const now = opts.now ?? (() => performance.now());
  const dec = new TextDecoder();
  const byDurable = new Map<string, { pending: number; at: number; held: Map<string, { held: number; at: number }> }>();
  const sub = bus.nc.subscribe(BACKLOG_SUBJECT_PREFIX + '*', {
    callback: (err, msg) => {
      if (err) return;
      let r: { instance?: unknown; pending?: unknown; held?: unknown };
      try {
        r = JSON.parse(dec.decode(msg.data)) as typeof r;
      } catch {
        return;
      }
      if (typeof r.instance !== 'string' || !isCount(r.pending) || !isCount(r.held)) return;
      const durable = msg.subject.slice(BACKLOG_SUBJECT_PREFIX.length);
      const at = now();
      let d = byDurable.get(durable);
      if (!d) byDurable.set(durable, (d = { pending: 0, at: 0, held: new Map() }));
      d.pending = r.pending;
      d.at = at;
      d.held.set(r.instance, { held: r.held, at });
    },
  });
  return {
    of(durable) {
      const d = byDurable.get(durable);
      const t = now();
      if (!d || t - d.at > freshMs) return null;
      let held = 0;
      for (const [instance, h] of d.held) {
        if (t - h.at > freshMs) d.held.delete(instance);
        else held += h.held;
      }
      return { pending: d.pending, held };
    },
    stop: () => sub.unsubscribe(),
  };
}

function isCount(x: unknown): x is number {
  return typeof x === 'number' && Number.isInteger(x) && x >= 0;
}
