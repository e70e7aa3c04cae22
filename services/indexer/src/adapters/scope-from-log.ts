import { lastEvent, type Bus } from '@memstream/bus';
import type { Metadata } from '@memstream/contracts';

/**
 * A document's tags and metadata as the log has them: the latest submission's, or a metadata
 * update's when that is newer. Read from the stream rather than the view store, so the indexer does
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
    // The higher metadata version wins, whichever event carries it.
    const subVersion = sub?.event.type === 'document.submitted.v1' ? sub.event.data.metadataVersion : 0;
    if (upd?.event.type === 'document.metadata-updated.v1' && upd.event.data.version > subVersion) {
      containerTags = upd.event.data.containerTags;
      metadata = upd.event.data.metadata;
    }
    return { containerTags, metadata };
  };
}
