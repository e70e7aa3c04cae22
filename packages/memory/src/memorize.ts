import type { DocumentSettings, MemoryCandidate, MemoryCommit, MemoryRecord, Metadata } from '@memstream/contracts';
import type { MemoryExtractor } from './extract/port.js';
import type { MemoryLog } from './log.js';
import type { MemoryStore } from './store/port.js';
import { resolveExtraction } from './resolve.js';

/** What the memorizer needs to know about one indexed document revision (read from the log). */
export interface DocumentToMemorize {
  documentId: string;
  revision: number;
  taskType: 'memory' | 'superrag';
  containerTags: string[];
  metadata: Metadata;
  entityContext: string | null;
  filterByMetadata: Record<string, string | number | boolean | string[]> | null;
  text: string;
  format: 'plain' | 'markdown' | 'conversation';
  /** ISO: the document's own date (metadata `date` / `documentDate` when given), else when it was submitted. */
  documentDate: string;
  correlationId: string;
  /** The submitting key's settings (/v3/settings) carried on its submission: extraction filters. */
  settings?: DocumentSettings | undefined;
}

/** Memory metadata matches `filterByMetadata` when every key matches (an array: any of its values). */
export function matchesFilterByMetadata(metadata: Metadata, f: DocumentToMemorize['filterByMetadata']): boolean {
  if (!f) return true;
  return Object.entries(f).every(([k, want]) => {
    const have = metadata[k];
    if (have === undefined) return false;
    const haves = Array.isArray(have) ? have.map(String) : [String(have)];
    const wants = Array.isArray(want) ? want.map(String) : [String(want)];
    return wants.some((w) => haves.includes(w));
  });
}

/** The document date: an ISO `date` or `documentDate` in its metadata, else `fallback`. */
export function documentDateOf(metadata: Metadata, fallback: string): string {
  for (const k of ['documentDate', 'date', 'timestamp']) {
    const v = metadata[k];
    if (typeof v === 'string' && Number.isFinite(Date.parse(v))) return new Date(v).toISOString();
  }
  return fallback;
}

/** How many of the tag's newest static and other memories an extractor is shown. */
export const EXTRACTION_CONTEXT = 50;

/**
 * What an extractor is shown of a tag (memory-layer.md §4): its newest live static memories and
 * newest others (EXTRACTION_CONTEXT of each), plus the user's name wherever it is, so "I" resolves
 * to it however many statics the tag holds.
 */
export async function extractionContext(store: MemoryStore, tag: string, now: Date): Promise<MemoryRecord[]> {
  const [recent, name] = await Promise.all([store.recent(tag, { liveAt: now, limit: EXTRACTION_CONTEXT }), store.related(tag, { attributes: [{ subject: 'user', key: 'name' }], statements: [], ids: [], liveAt: now })]);
  return [...new Map([...name, ...recent].map((m) => [m.id, m])).values()];
}

/**
 * The settings' item filters, for every extractor: `excludeItems` drops a candidate whose
 * statement or source mentions one of them (case-insensitive); `includeItems`, when set, keeps
 * only candidates that mention one.
 */
export function applyItemFilters(candidates: MemoryCandidate[], settings: DocumentSettings | undefined): MemoryCandidate[] {
  const norm = (xs: string[] | undefined) => (xs ?? []).map((x) => x.toLowerCase()).filter((x) => x.trim() !== '');
  const include = norm(settings?.includeItems);
  const exclude = norm(settings?.excludeItems);
  if (include.length === 0 && exclude.length === 0) return candidates;
  const mentions = (c: MemoryCandidate, items: string[]) => {
    const text = `${c.memory}\n${c.sourceText ?? ''}`.toLowerCase();
    return items.some((i) => text.includes(i));
  };
  return candidates.filter((c) => !mentions(c, exclude) && (include.length === 0 || mentions(c, include)));
}

export interface MemorizeOutcome {
  containerTag: string;
  commit: MemoryCommit | null;
}

/**
 * Memorize one document revision: for each of its tags, serially within the tag (MemoryLog),
 * extract against the tag's live memories (restricted by filterByMetadata), resolve, and commit
 * the extractor's raw decision with the changes it leads to. A tag that already memorized this
 * revision is skipped, so a redelivery changes nothing. `superrag` documents make no memories.
 */
export async function memorizeDocument(
  ports: { log: MemoryLog; extractor: MemoryExtractor; now: () => Date },
  doc: DocumentToMemorize,
): Promise<MemorizeOutcome[]> {
  if (doc.taskType !== 'memory') return [];
  const out: MemorizeOutcome[] = [];
  for (const tag of doc.containerTags) {
    const made = await ports.log.commit(tag, async () => {
      const done = await ports.log.store.memorized(doc.documentId, tag);
      if (done && done.revision >= doc.revision) return null;
      const now = ports.now();
      const inScope = (ms: MemoryRecord[]) => ms.filter((m) => matchesFilterByMetadata(m.metadata, doc.filterByMetadata));
      // Bounded reads only: the cost of memorizing a document must not grow with the tag's memories.
      const shown = inScope(await extractionContext(ports.log.store, tag, now));
      const started = performance.now();
      const extracted = await ports.extractor.extract({
        text: doc.text,
        format: doc.format,
        documentDate: doc.documentDate,
        entityContext: doc.entityContext,
        existing: shown,
        ...(doc.settings?.shouldLLMFilter && doc.settings.filterPrompt ? { filterPrompt: doc.settings.filterPrompt } : {}),
      });
      const { candidates, tokens } = { ...extracted, candidates: applyItemFilters(extracted.candidates, doc.settings) };
      const ms = Math.round(performance.now() - started);
      const id = `mem:${doc.documentId}:${doc.revision}:${tag}`;
      const at = now.toISOString();
      // The resolver's rules compare a candidate only with memories of the same (subject, attribute),
      // the same statement, or an id the extractor named: those, looked up by index, are all it needs.
      const related = inScope(
        await ports.log.store.related(tag, {
          attributes: candidates.flatMap((c) => (c.attribute ? [c.attribute] : [])),
          statements: candidates.map((c) => c.memory),
          ids: candidates.flatMap((c) => [...c.updates, ...c.extends]),
          liveAt: now,
        }),
      );
      const changes = resolveExtraction(related, {
        commitId: id,
        containerTag: tag,
        documentId: doc.documentId,
        documentDate: doc.documentDate,
        metadata: doc.metadata,
        extractor: ports.extractor.name,
        candidates,
        at,
      });
      return {
        id,
        type: 'memory.committed.v1',
        containerTag: tag,
        occurredAt: at,
        correlationId: doc.correlationId,
        cause: { kind: 'extraction', documentId: doc.documentId, revision: doc.revision, extractor: ports.extractor.name, candidates, tokens, ms },
        changes,
      } satisfies MemoryCommit;
    });
    out.push({ containerTag: tag, commit: made?.commit ?? null });
  }
  return out;
}

/**
 * A deleted document's memories: what it alone taught is forgotten (cause `source-deleted`);
 * what other documents also taught stays.
 */
export async function forgetDocument(ports: { log: MemoryLog; now: () => Date }, documentId: string, correlationId: string): Promise<number> {
  const byTag = new Map<string, MemoryRecord[]>();
  for (const m of await ports.log.store.documentMemories(documentId)) {
    const list = byTag.get(m.containerTag) ?? [];
    list.push(m);
    byTag.set(m.containerTag, list);
  }
  let forgotten = 0;
  for (const tag of byTag.keys()) {
    await ports.log.commit(tag, async () => {
      const current = (await ports.log.store.documentMemories(documentId)).filter((m) => m.containerTag === tag && !m.isForgotten && m.documentIds.every((d) => d === documentId));
      if (current.length === 0) return null;
      forgotten += current.length;
      return {
        id: `mem:deleted:${documentId}:${tag}`,
        type: 'memory.committed.v1',
        containerTag: tag,
        occurredAt: ports.now().toISOString(),
        correlationId,
        cause: { kind: 'document-deleted', documentId },
        changes: current.map((m) => ({ type: 'memory.forgotten.v1' as const, memoryId: m.id, reason: 'its source document was deleted', cause: 'source-deleted' as const })),
      };
    });
  }
  return forgotten;
}
