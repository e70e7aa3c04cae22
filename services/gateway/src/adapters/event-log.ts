import { lastEvent, latestRevision, publishEvent, type Bus } from '@memstream/bus';
import type { DocumentSubmitted } from '@memstream/contracts';
import type { EventLog } from '../handlers/documents.js';

/** The gateway's EventLog over JetStream: direct reads of a document's last events, and validated publishes. */
export function jetstreamEventLog(bus: Bus): EventLog {
  return {
    async head(documentId) {
      const [latest, sub] = await Promise.all([latestRevision(bus, documentId), lastEvent(bus, documentId, 'submitted')]);
      return {
        submitted: (sub?.event as DocumentSubmitted | undefined) ?? null,
        submittedSeq: sub?.seq ?? 0,
        revision: latest.revision,
        deleted: latest.deleted,
      };
    },
    async publish(event, opts = {}) {
      await publishEvent(bus, event, {
        ...(opts.expectLastSubmittedSeq !== undefined ? { expectLastSubjectSequence: opts.expectLastSubmittedSeq } : {}),
        ...(opts.headers ? { headers: opts.headers } : {}),
      });
    },
  };
}
