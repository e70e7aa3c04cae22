import { decodeEvent, lastEvent, publishEvent, type Bus } from '@memstream/bus';
import { STREAM_DOCS, type DocumentEvent, type DocumentSubmitted } from '@memstream/contracts';
import type { DocumentHead, EventLog } from '../handlers/documents.js';

/** The gateway's EventLog over JetStream: direct reads of a document's last events, validated publishes, purges. */
export function jetstreamEventLog(bus: Bus): EventLog {
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
    async purgeBefore(documentId, seq) {
      // Everything of the document below its tombstone; the tombstone stays so every consumer sees it.
      const r = await bus.jsm.streams.purge(STREAM_DOCS, { filter: `doc.${documentId}.>`, seq });
      return r.purged;
    },
  };
}
