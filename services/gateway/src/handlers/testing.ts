import type { DocumentHead, GatewayPorts } from './documents.js';

/** The head of a document the log has never seen. */
export const UNSEEN: DocumentHead = { submitted: null, submittedSeq: 0, revision: 0, deleted: false, metadataUpdate: null, metadataSeq: 0 };

/**
 * Gateway ports for tests that add documents over HTTP: the given event log (`head`, `publish`;
 * `purgeBefore` answers 0 unless given), inert views, index, blobs and tag contexts, and a fixed clock.
 */
export function portsForAdds(events: { head: GatewayPorts['events']['head']; publish: (...args: never[]) => Promise<number> }, now: string): GatewayPorts {
  return {
    events: { purgeBefore: async () => 0, ...events },
    views: { get: async () => null, delete: async () => {} },
    index: { deleteDocument: async () => 0 },
    blobs: { deleteDocument: async () => 0 },
    tagContexts: { get: async () => null, set: async () => {} },
    now: () => new Date(now),
  } as unknown as GatewayPorts;
}
