import { lastEventPart, lastRevisionOf, type Bus } from '@memstream/bus';
import { Metadata } from '@memstream/contracts';
import { z } from 'zod';

export interface DocumentScope {
  containerTags: string[];
  metadata: Metadata;
}

/** What the indexer needs of the log before it writes a document: one read per kind, all at once. */
export interface DocumentState {
  /** The newest submitted revision; 0 when there is none (the document was deleted and its history purged). */
  revision: number;
  scope: DocumentScope;
  /** The newest revision that failed; 0 when none did. */
  failedRevision: number;
}

// Only the fields read here are validated: the submission's content, whatever its size, is not.
const SubmittedScope = z.object({ containerTags: z.array(z.string()), metadata: Metadata, metadataVersion: z.number().int().nonnegative() });
const UpdatedScope = z.object({ containerTags: z.array(z.string()), metadata: Metadata, version: z.number().int().nonnegative() });

/**
 * A document's state as the log has it: its newest submission's revision, its tags and metadata
 * (the submission's, or a metadata update's when that is newer) and the newest failed revision.
 * Read from the stream rather than the view store, so the indexer does not depend on the
 * projection being up to date; three direct reads in parallel, decoding only what is used.
 */
export function stateFromLog(bus: Bus) {
  return async (documentId: string): Promise<DocumentState> => {
    const [sub, upd, failed] = await Promise.all([
      lastEventPart(bus, documentId, 'submitted', SubmittedScope),
      lastEventPart(bus, documentId, 'metadata-updated', UpdatedScope),
      lastRevisionOf(bus, documentId, 'failed'),
    ]);
    return { revision: sub?.revision ?? 0, scope: scopeOf(sub?.data, upd?.data), failedRevision: failed?.revision ?? 0 };
  };
}

/** A document's tags and metadata by the indexer's rule (for `memstream replay index`, so a rebuilt index agrees with the live one). */
export function scopeFromLog(bus: Bus) {
  return async (documentId: string): Promise<DocumentScope> => {
    const [sub, upd] = await Promise.all([lastEventPart(bus, documentId, 'submitted', SubmittedScope), lastEventPart(bus, documentId, 'metadata-updated', UpdatedScope)]);
    return scopeOf(sub?.data, upd?.data);
  };
}

function scopeOf(sub: z.infer<typeof SubmittedScope> | undefined, upd: z.infer<typeof UpdatedScope> | undefined): DocumentScope {
  // The higher metadata version wins, whichever event carries it.
  if (upd && upd.version > (sub?.metadataVersion ?? 0)) return { containerTags: upd.containerTags, metadata: upd.metadata };
  return sub ? { containerTags: sub.containerTags, metadata: sub.metadata } : { containerTags: [], metadata: {} };
}

/**
 * Whether, since the indexer read the document's state, it was deleted or this revision failed:
 * the gateway (or the failure) removed its chunks before the indexer's write landed. A deletion's
 * tombstone carries the revision it deleted, so one read per kind answers it.
 */
export function endedSinceFromLog(bus: Bus) {
  return async (documentId: string, revision: number): Promise<boolean> => {
    const [deleted, failed] = await Promise.all([lastRevisionOf(bus, documentId, 'deleted'), lastRevisionOf(bus, documentId, 'failed')]);
    return (deleted?.revision ?? 0) >= revision || (failed?.revision ?? 0) >= revision;
  };
}
