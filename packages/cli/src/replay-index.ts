import { STREAM_DOCS, decodeVector, encodeVector, type EmbeddedData } from '@memstream/contracts';
import { decodeEvent, lastEvent, latestRevision, type Bus } from '@memstream/bus';
import { canonical } from '@memstream/views';
import type { ChunkIndex, StoredChunk } from '@memstream/chunk-index';
import type { Embedder } from '@memstream/embedder';
// The indexer's own rule for a document's tags and metadata, so a rebuilt index agrees with the live one.
import { scopeFromLog } from '@memstream/service-indexer/scope-from-log';
import type { Progress } from './replay.js';

/**
 * The documents that have ever been indexed and are still in the log, from the stream's subject
 * index (`doc.<id>.indexed`): a deleted document's history is purged down to its tombstone, so it
 * is not among them.
 */
export async function indexedDocumentIds(bus: Bus): Promise<string[]> {
  const info = await bus.jsm.streams.info(STREAM_DOCS, { subjects_filter: 'doc.*.indexed' });
  const subjects = info.state.subjects ?? {};
  return Object.keys(subjects)
    .map((s) => s.split('.')[1]!)
    .sort();
}

/** The embedded event of one revision: usually the document's last one; otherwise found by reading its embedded events. */
async function embeddedOfRevision(bus: Bus, documentId: string, revision: number): Promise<EmbeddedData | null> {
  const last = await lastEvent(bus, documentId, 'embedded');
  if (!last) return null;
  if (last.event.type === 'document.embedded.v1' && last.event.revision === revision) return last.event.data;
  // A newer revision was embedded and not indexed yet: the index still holds the older one.
  const c = await bus.js.consumers.get(STREAM_DOCS, { filter_subjects: `doc.${documentId}.embedded` });
  const info = await c.info(true);
  let found: EmbeddedData | null = null;
  if (info.num_pending === 0) return null;
  const messages = await c.fetch({ max_messages: info.num_pending, expires: 5000 });
  for await (const m of messages) {
    const e = await decodeEvent(bus, m.data);
    if (e.type === 'document.embedded.v1' && e.revision === revision) found = e.data;
    if (m.info.pending === 0) break;
  }
  return found;
}

export interface IndexRebuildResult {
  documents: number;
  chunks: number;
  /** Documents whose logged vectors are of another model than the index's, embedded again. */
  reembedded: number;
  /** Documents in the log with no indexed revision left to rebuild (deleted meanwhile, or their vectors are gone). */
  skipped: number;
}

/**
 * Rebuild a chunk index from the log, as the indexer built it: for each document that is not
 * deleted, the chunks and vectors of its last indexed revision (the embedded event of that
 * revision), with its current tags and metadata. `model`: the index's embedding model after a
 * model switch (`replay embed` wrote the switched index's vectors outside the log): documents
 * whose logged vectors are another model's are embedded again with it. `dryRun` writes nothing.
 */
export async function rebuildIndex(
  bus: Bus,
  target: ChunkIndex | null,
  opts: { model?: Embedder | undefined; batch?: number; progress?: Progress } = {},
): Promise<IndexRebuildResult> {
  const ids = await indexedDocumentIds(bus);
  const scopeOf = scopeFromLog(bus);
  const out: IndexRebuildResult = { documents: 0, chunks: 0, reembedded: 0, skipped: 0 };
  const batch = opts.batch ?? 64;
  let n = 0;
  for (const documentId of ids) {
    n++;
    if (n % 20 === 0) opts.progress?.(n, ids.length);
    const head = await latestRevision(bus, documentId);
    const indexed = head.deleted ? null : await lastEvent(bus, documentId, 'indexed');
    const embedded = indexed ? await embeddedOfRevision(bus, documentId, indexed.event.revision) : null;
    if (!indexed || !embedded) {
      out.skipped++;
      continue;
    }
    let { model, dim, chunks } = embedded;
    const other = opts.model && (opts.model.model !== model || opts.model.dim !== dim);
    if (other && opts.model) {
      if (target) {
        const vectors: Float32Array[] = [];
        for (let i = 0; i < chunks.length; i += batch) vectors.push(...(await opts.model.embed(chunks.slice(i, i + batch).map((c) => c.text))));
        chunks = chunks.map((c, i) => ({ ...c, vector: encodeVector(vectors[i]!) }));
      }
      model = opts.model.model;
      dim = opts.model.dim;
      out.reembedded++;
    }
    out.documents++;
    out.chunks += chunks.length;
    if (!target) continue;
    const scope = await scopeOf(documentId);
    await target.replaceDocument({
      documentId,
      revision: indexed.event.revision,
      model,
      dim,
      containerTags: scope.containerTags,
      metadata: scope.metadata,
      chunks: chunks.map((c) => ({ index: c.index, hash: c.hash, text: c.text, vector: decodeVector(c.vector) })),
    });
  }
  opts.progress?.(ids.length, ids.length);
  return out;
}

export interface IndexComparison {
  same: number;
  different: string[];
  onlyInA: string[];
  onlyInB: string[];
  statsA: { documents: number; chunks: number };
  statsB: { documents: number; chunks: number };
}

/** A document's chunks as comparable text (vectors are compared by searching, not here). */
function chunksKey(chunks: StoredChunk[]): string {
  return canonical(chunks.map((c) => ({ ...c, containerTags: [...c.containerTags].sort() })));
}

/**
 * Compare two chunk indexes over the given documents (chunks, revisions, models, tags, metadata),
 * and their totals, which also count documents neither list names.
 */
export async function compareIndexes(a: ChunkIndex, b: ChunkIndex, documentIds: Iterable<string>): Promise<IndexComparison> {
  const out: IndexComparison = { same: 0, different: [], onlyInA: [], onlyInB: [], statsA: await a.stats(), statsB: await b.stats() };
  for (const id of new Set(documentIds)) {
    const [ca, cb] = await Promise.all([a.getDocumentChunks(id), b.getDocumentChunks(id)]);
    if (ca.length === 0 && cb.length === 0) continue;
    if (cb.length === 0) out.onlyInA.push(id);
    else if (ca.length === 0) out.onlyInB.push(id);
    else if (chunksKey(ca) === chunksKey(cb)) out.same++;
    else out.different.push(id);
  }
  return out;
}
