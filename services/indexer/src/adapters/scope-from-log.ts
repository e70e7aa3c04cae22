import { lastEvent, type Bus } from '@memstream/bus';
import type { Metadata } from '@memstream/contracts';

/**
 * A document's tags and metadata as the log has them: the latest submission, overlaid by a
 * later metadata update. Read from the stream rather than the view store, so the indexer does
 * not depend on the projection being up to date.
 */
export function scopeFromLog(bus: Bus) {
  return async (documentId: string): Promise<{ containerTags: string[]; metadata: Metadata }> => {
    const [sub, upd] = await Promise.all([lastEvent(bus, documentId, 'submitted'), lastEvent(bus, documentId, 'metadata-updated')]);
    let containerTags: string[] = [];
    let metadata: Metadata = {};
    if (sub?.event.type === 'document.submitted.v1') {
      containerTags = sub.event.data.containerTags;
      metadata = sub.event.data.metadata;
    }
    if (upd && sub && upd.seq > sub.seq && upd.event.type === 'document.metadata-updated.v1') {
      containerTags = upd.event.data.containerTags ?? containerTags;
      metadata = upd.event.data.metadata ?? metadata;
    }
    return { containerTags, metadata };
  };
}
