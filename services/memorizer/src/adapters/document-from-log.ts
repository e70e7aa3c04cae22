import { dataOfRevision, lastEvent, type Bus } from '@memstream/bus';
import { documentDateOf, type DocumentToMemorize } from '@memstream/memory';

/**
 * One document revision as the memorizer needs it, read from the log (not the view store, so it
 * does not wait on the projection): the submission's settings, the newest tags and metadata, and
 * the extracted text of that revision. Null when a newer revision was submitted or the text is gone.
 */
export function documentFromLog(bus: Bus) {
  return async (documentId: string, revision: number, correlationId: string): Promise<DocumentToMemorize | null> => {
    const [sub, upd, extracted] = await Promise.all([
      lastEvent(bus, documentId, 'submitted'),
      lastEvent(bus, documentId, 'metadata-updated'),
      dataOfRevision(bus, documentId, 'extracted', revision),
    ]);
    if (!sub || sub.event.type !== 'document.submitted.v1' || sub.event.revision !== revision || !extracted) return null;
    const d = sub.event.data;
    let { containerTags, metadata } = d;
    // The higher metadata version wins, as in the indexer.
    if (upd?.event.type === 'document.metadata-updated.v1' && upd.event.data.version > d.metadataVersion) {
      containerTags = upd.event.data.containerTags;
      metadata = upd.event.data.metadata;
    }
    return {
      documentId,
      revision,
      taskType: d.taskType,
      containerTags,
      metadata,
      entityContext: d.entityContext,
      filterByMetadata: d.filterByMetadata,
      text: extracted.text,
      format: extracted.format,
      documentDate: documentDateOf(metadata, sub.event.occurredAt),
      correlationId,
      settings: d.settings,
      dreaming: d.dreaming,
    };
  };
}
