import { STREAM_DOCS, type DocumentEvent } from '@memstream/contracts';
import { decodeEvent, type Bus } from '@memstream/bus';
import { canonical, type DocumentViews } from '@memstream/views';
import { applyEvent } from '@memstream/service-projection/handlers';

export interface Progress {
  (done: number, total: number): void;
}

/**
 * Read the whole DOCS stream in order, up to the last sequence at the moment we start, and
 * hand each event to `apply`. An ordered consumer: no durable state on the server, nothing acked.
 */
export async function readLog(bus: Bus, apply: (event: DocumentEvent, seq: number) => Promise<void>, progress?: Progress): Promise<{ events: number; lastSeq: number }> {
  const info = await bus.jsm.streams.info(STREAM_DOCS);
  const lastSeq = info.state.last_seq;
  const total = info.state.messages;
  if (total === 0) return { events: 0, lastSeq };
  const consumer = await bus.js.consumers.get(STREAM_DOCS);
  const messages = await consumer.consume({ max_messages: 512 });
  let n = 0;
  for await (const m of messages) {
    await apply(await decodeEvent(bus, m.data), m.seq);
    n++;
    if (n % 200 === 0) progress?.(n, total);
    // pending 0: nothing after this one (the last sequence itself may have been purged).
    if (m.seq >= lastSeq || m.info.pending === 0) break;
  }
  await messages.close();
  progress?.(n, total);
  return { events: n, lastSeq };
}

/** Rebuild a document view store from the log, through the same reducer the projection runs. */
export async function rebuildViews(bus: Bus, target: DocumentViews, progress?: Progress): Promise<{ events: number; documents: number }> {
  // In log order every submission precedes its stage events: no look-ups are needed.
  const { events } = await readLog(bus, async (e) => void (await applyEvent(target, e)), progress);
  let documents = 0;
  for await (const _ of target.all()) documents++;
  return { events, documents };
}

export interface ViewComparison {
  same: number;
  different: string[];
  onlyInA: string[];
  onlyInB: string[];
}

/** Compare two view stores document by document (the concurrency token aside). */
export async function compareViews(a: DocumentViews, b: DocumentViews): Promise<ViewComparison> {
  const strip = (v: object) => {
    const { version: _v, ...rest } = v as { version: number };
    return canonical(rest);
  };
  const left = new Map<string, string>();
  for await (const v of a.all()) left.set(v.id, strip(v));
  const out: ViewComparison = { same: 0, different: [], onlyInA: [], onlyInB: [] };
  for await (const v of b.all()) {
    const l = left.get(v.id);
    if (l === undefined) out.onlyInB.push(v.id);
    else if (l === strip(v)) out.same++;
    else out.different.push(v.id);
    left.delete(v.id);
  }
  out.onlyInA.push(...left.keys());
  return out;
}

/** A one-line progress bar on stderr when it is a terminal, a line every 10% otherwise. */
export function progressBar(label: string, unit = 'events'): Progress {
  let lastPct = -1;
  return (done, total) => {
    const pct = total ? Math.min(100, Math.floor((done / total) * 100)) : 100;
    if (process.stderr.isTTY) {
      const w = 30;
      const fill = Math.round((pct / 100) * w);
      process.stderr.write(`\r${label} [${'#'.repeat(fill)}${' '.repeat(w - fill)}] ${done}/${total} ${unit}${pct === 100 ? '\n' : ''}`);
    } else if (pct >= lastPct + 10 || pct === 100) {
      if (pct !== lastPct) process.stderr.write(`${label}: ${done}/${total} ${unit} (${pct}%)\n`);
    }
    lastPct = pct;
  };
}
