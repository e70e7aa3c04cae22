import { CONSUMERS, STREAM_DOCS, type ConsumerName } from '@memstream/contracts';
import type { Bus } from '@memstream/bus';

/** Per pipeline consumer: deliveries made so far and messages its filter matches in the log. */
export type DeliverySnapshot = Record<string, { deliveries: number; messages: number }>;

const PIPELINE: ConsumerName[] = ['extractor', 'chunker', 'embedder', 'indexer', 'projection'];

/**
 * How often the broker has delivered, against how many messages there are to deliver: the
 * difference between two snapshots, once everything is acked, is the redeliveries in between
 * (a crashed worker's held messages, naks, messages handed back at shutdown).
 */
export async function deliverySnapshot(bus: Bus): Promise<DeliverySnapshot> {
  const out: DeliverySnapshot = {};
  for (const name of PIPELINE) {
    const { durable, bulkDurable, filter } = CONSUMERS[name];
    const stream = await bus.jsm.streams.info(STREAM_DOCS, { subjects_filter: filter });
    const messages = filter === 'doc.>' ? stream.state.messages : Object.values(stream.state.subjects ?? {}).reduce((a, b) => a + b, 0);
    // A stage's bulk lane reads the same messages (docs/pipeline.md, "Fairness").
    for (const d of bulkDurable ? [durable, bulkDurable] : [durable]) {
      const info = await bus.jsm.consumers.info(STREAM_DOCS, d);
      out[d === durable ? name : d] = { deliveries: info.delivered.consumer_seq, messages };
    }
  }
  return out;
}

/** Redeliveries per consumer between two snapshots, as "extractor 12, chunker 0, …", and their sum. */
export function redeliveries(before: DeliverySnapshot, after: DeliverySnapshot): { total: number; text: string } {
  let total = 0;
  const parts: string[] = [];
  for (const [name, a] of Object.entries(after)) {
    const b = before[name] ?? { deliveries: 0, messages: 0 };
    const n = Math.max(0, a.deliveries - b.deliveries - (a.messages - b.messages));
    total += n;
    parts.push(`${name} ${n}`);
  }
  return { total, text: parts.join(', ') };
}

/** Wait until no pipeline consumer has anything pending or unacked (the snapshot is then final). */
export async function waitIdle(bus: Bus, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    let busy = 0;
    for (const name of PIPELINE) {
      // A stage's bulk lane too (docs/pipeline.md, "Fairness").
      for (const durable of [CONSUMERS[name].durable, ...(CONSUMERS[name].bulkDurable ? [CONSUMERS[name].bulkDurable] : [])]) {
        const info = await bus.jsm.consumers.info(STREAM_DOCS, durable);
        busy += info.num_pending + info.num_ack_pending;
      }
    }
    if (busy === 0) return;
    if (Date.now() > deadline) throw new Error(`consumers still busy after ${timeoutMs} ms: ${busy} messages pending or unacked`);
    await new Promise((r) => setTimeout(r, 200));
  }
}
