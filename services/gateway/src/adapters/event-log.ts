import { DeliverPolicy, addsSignal, decodeEvent, lastEvent, publishEvent, type Bus } from '@memstream/bus';
import { CONSUMERS, STREAM_DOCS, type DocumentEvent, type DocumentSubmitted } from '@memstream/contracts';
import type { DocumentHead, EventLog } from '../handlers/documents.js';

/** The gateway's EventLog over JetStream: direct reads of a document's last events, validated publishes, purges. */
export function jetstreamEventLog(bus: Bus): EventLog {
  // The workers yield the broker to the gateway's publishes while it says adds arrive (@memstream/bus, yield-to-adds.ts).
  const adds = addsSignal(bus.nc);
  return {
    async head(documentId): Promise<DocumentHead> {
      const [sub, del, meta] = await Promise.all([
        lastEvent(bus, documentId, 'submitted'),
        lastEvent(bus, documentId, 'deleted'),
        lastEvent(bus, documentId, 'metadata-updated'),
      ]);
      const subRev = sub?.event.revision ?? 0;
      const delRev = del?.event.revision ?? 0;
      const deleted = del !== null && delRev >= subRev;
      return {
        submitted: (sub?.event as DocumentSubmitted | undefined) ?? null,
        submittedSeq: sub?.seq ?? 0,
        revision: Math.max(subRev, delRev),
        deleted,
        metadataUpdate: !deleted && meta?.event.type === 'document.metadata-updated.v1' ? meta.event.data : null,
        metadataSeq: meta?.seq ?? 0,
      };
    },
    async publish(event, opts = {}) {
      adds.arriving();
      const ack = await publishEvent(bus, event, {
        ...(opts.expectLastSeq !== undefined ? { expectLastSubjectSequence: opts.expectLastSeq } : {}),
        ...(opts.headers ? { headers: opts.headers } : {}),
      });
      return ack.seq;
    },
    async history(documentId, limit = 1000) {
      // An ordered consumer on this document's subject tree alone: one filter subject, fine on 2.9.
      // A string, not an array: an array is sent as filter_subjects, which nats-server 2.9 does not have.
      const c = await bus.js.consumers.get(STREAM_DOCS, { filter_subjects: `doc.${documentId}.>` });
      const out: Array<{ event: DocumentEvent; seq: number }> = [];
      const info = await c.info(true);
      if (info.num_pending === 0) return out;
      const messages = await c.fetch({ max_messages: Math.min(limit, info.num_pending), expires: 2000 });
      for await (const m of messages) {
        out.push({ event: await decodeEvent(bus, m.data), seq: m.seq });
        if (m.info.pending === 0 || out.length >= limit) break;
      }
      return out;
    },
    async unprojected() {
      // Read the projection's floor before the stream's end: every event at or below the floor
      // is in the view store, every one above it up to the end is read here.
      let floor = 0;
      try {
        floor = (await bus.jsm.consumers.info(STREAM_DOCS, CONSUMERS.projection.durable)).ack_floor.stream_seq;
      } catch {
        // No projection consumer yet (a gateway started alone): nothing is projected, read it all.
      }
      const last = (await bus.jsm.streams.info(STREAM_DOCS)).state.last_seq;
      const ids = new Set<string>();
      if (last <= floor) return [];
      // Headers only: the subject names the document and the event kind; bodies are not needed.
      const c = await bus.js.consumers.get(STREAM_DOCS, { filter_subjects: 'doc.>', deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: floor + 1, headers_only: true });
      for (let done = false; !done; ) {
        const batch = await c.fetch({ max_messages: 1000, expires: 2000 });
        let got = 0;
        for await (const m of batch) {
          got++;
          const [, documentId, kind] = m.subject.split('.');
          if (documentId && (kind === 'submitted' || kind === 'metadata-updated')) ids.add(documentId);
          if (m.seq >= last || m.info.pending === 0) {
            done = true;
            break;
          }
        }
        if (got === 0) done = true;
      }
      return [...ids];
    },
    async purgeBefore(documentId, seq) {
      // Everything of the document below its tombstone; the tombstone stays so every consumer sees it.
      const r = await bus.jsm.streams.purge(STREAM_DOCS, { filter: `doc.${documentId}.>`, seq });
      return r.purged;
    },
  };
}
