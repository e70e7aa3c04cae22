import type { KV, KvEntry } from '@nats-io/kv';
import { errorMessage, type Logger } from '@memstream/kit';

/**
 * A read-through copy of the entries of a NATS KV bucket that the gateway reads on every add but
 * that change rarely (a tag's entityContext, a scope's settings): one broker round trip each per
 * add was a measurable part of the add's CPU and latency.
 *
 * How stale a value can be:
 * - a write through this copy (`put`, `forget`) is seen by the next read here at once;
 * - a write by anyone else (another gateway process or replica) drops the entry as soon as the
 *   bucket's watch delivers it, milliseconds in practice;
 * - should the watch fall behind or be down, no value is served older than `ttlMs` (the bound
 *   that always holds), and a restarted watch drops everything.
 * An entry is stored with its revision, and a change the watch reported is never overwritten by
 * an older read still in flight.
 */
export interface KvReadCache<T> {
  get(key: string): Promise<T>;
  /** After a write of `key` through this process: the value it now has, at that revision. */
  put(key: string, value: T, revision: number): void;
  /** After a delete (or any write whose revision is not known): the next read goes to the bucket. */
  forget(key: string): void;
  close(): void;
}

interface Slot<T> {
  /** Absent: the key changed and must be read again. */
  value?: T;
  /**
   * The value's revision in the bucket (0: absent there), or the newest the watch reported: the
   * watch's echo of a write made here is not taken for a change, nor an older write for a newer.
   */
  revision: number;
  at: number;
  /** Bumped by every change: a read that started before one does not store what it got. */
  epoch: number;
}

/** How long a read in flight may be shared by later gets of the same key: about a broker round trip under load. */
const SHARE_READ_MS = 250;

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms).unref());

export function kvReadCache<T>(
  kv: KV,
  opts: {
    decode: (entry: KvEntry | null) => T;
    ttlMs?: number;
    maxEntries?: number;
    log?: Logger;
    now?: () => number;
    /** The connection was closed for good (shutdown, a test's end): the watch is not restarted. */
    closed?: () => boolean;
    /** Read only while connected, and fail at once when the connection is lost (Bus.whileConnected) rather than after a timeout. */
    whileConnected?: <R>(send: () => Promise<R>) => Promise<R>;
  },
): KvReadCache<T> {
  const ttlMs = opts.ttlMs ?? 1000;
  const maxEntries = opts.maxEntries ?? 10_000;
  const now = opts.now ?? (() => performance.now());
  const slots = new Map<string, Slot<T>>();
  const inflight = new Map<string, { p: Promise<T>; at: number }>();
  let epoch = 0;
  /** Reads sent before this epoch store nothing (the watch restarted after they were sent). */
  let floor = 0;

  const store = (key: string, slot: Slot<T>) => {
    slots.delete(key);
    slots.set(key, slot);
    // Bounded: the keys stored longest ago go first.
    if (slots.size > maxEntries) slots.delete(slots.keys().next().value!);
  };
  const invalidate = (key: string, revision: number) => {
    inflight.delete(key);
    store(key, { revision, at: 0, epoch: ++epoch });
  };

  let stopped = false;
  let iter: Awaited<ReturnType<KV['watch']>> | null = null;
  const ended = () => stopped || (opts.closed?.() ?? false);
  void (async () => {
    while (!ended()) {
      try {
        // Only changes from now on, and only their headers: values are read when asked for.
        iter = await kv.watch({ include: 'updates', headers_only: true });
        // Closed while the watch was being set up.
        if (ended()) {
          iter.stop();
          break;
        }
        // What changed while no watch ran is unknown: everything is read again.
        floor = ++epoch;
        slots.clear();
        inflight.clear();
        for await (const e of iter) {
          const s = slots.get(e.key);
          // The echo of a write made here (or of an older one) changes nothing.
          if (s && 'value' in s && s.revision >= e.revision) continue;
          invalidate(e.key, e.revision);
        }
      } catch (err) {
        if (!ended()) opts.log?.warn({ err: errorMessage(err) }, 'KV watch failed; restarting it');
      }
      if (!ended()) await sleep(1000);
    }
  })();

  const read = async (key: string): Promise<T> => {
    const before = epoch;
    const e = await (opts.whileConnected ? opts.whileConnected(() => kv.get(key)) : kv.get(key));
    const value = opts.decode(e);
    // Kept only if nothing changed since the read was sent (else the next get reads again).
    const s = slots.get(key);
    if (before >= floor && (!s || s.epoch <= before)) store(key, { value, revision: e?.revision ?? 0, at: now(), epoch: s?.epoch ?? 0 });
    return value;
  };

  return {
    get(key) {
      const s = slots.get(key);
      if (s && 'value' in s && now() - s.at < ttlMs) return Promise.resolve(s.value as T);
      // Concurrent adds for one key share one read, if it is young: a read sent just before the
      // broker went away is answered by nobody and waits out the request timeout (10 s), and
      // every add joining it would wait as long (seen: kill -9 of nats-server, adds accepted
      // again only 10.4 s after it instead of ~2 s).
      const shared = inflight.get(key);
      if (shared && now() - shared.at < SHARE_READ_MS) return shared.p;
      const mine = read(key).finally(() => {
        if (inflight.get(key)?.p === mine) inflight.delete(key);
      });
      inflight.set(key, { p: mine, at: now() });
      return mine;
    },
    put(key, value, revision) {
      // A newer revision is known already (another process wrote after this one): read it when asked.
      if ((slots.get(key)?.revision ?? 0) > revision) return invalidate(key, slots.get(key)!.revision);
      inflight.delete(key);
      store(key, { value, revision, at: now(), epoch: ++epoch });
    },
    forget(key) {
      invalidate(key, slots.get(key)?.revision ?? 0);
    },
    close() {
      stopped = true;
      iter?.stop();
    },
  };
}
