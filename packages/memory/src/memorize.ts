import { createHash } from 'node:crypto';
import type { DocumentSettings, MemoryCandidate, MemoryChange, MemoryCommit, MemoryRecord, Metadata } from '@memstream/contracts';
import { evolveMemories, isGone } from './evolve.js';
import type { MemoryExtractor } from './extract/port.js';
import type { MemoryLog } from './log.js';
import type { MemoryStore } from './store/port.js';
import { normalizeStatement, resolveExtraction } from './resolve.js';

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
  /** `instant`: memorized at once; `dynamic` (default): may wait a moment to be memorized with a burst of its tag's documents. */
  dreaming?: 'dynamic' | 'instant' | undefined;
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
  for (const tag of doc.containerTags) out.push(await memorizeGroup(ports, tag, [doc]));
  return out;
}

/** The memories a commit's changes leave, given the records they touch: what the next document of a group resolves against. */
function carry(state: Map<string, MemoryRecord>, tag: string, changes: MemoryChange[], at: string): Map<string, MemoryRecord> {
  return evolveMemories(state, { id: 'group', type: 'memory.committed.v1', containerTag: tag, occurredAt: at, correlationId: 'group', cause: { kind: 'forget' }, changes });
}

/**
 * Memorize documents of one tag in one pass (`dreaming: "dynamic"` groups a burst; a single
 * document is the same pass with one): under the tag's lock, the extractor's context is read
 * once; each document, in the order given, is extracted (shown what the documents before it in
 * the group taught) and resolved against the tag's related memories as the group has left them;
 * and one commit records every document's raw decision and all the changes. Documents the tag
 * already memorized (a redelivery) and older revisions of a document in the group are left out.
 * A single document makes exactly the commit it always did (cause `extraction`); two or more make
 * one with cause `extraction-group`.
 */
export async function memorizeGroup(
  ports: { log: MemoryLog; extractor: MemoryExtractor; now: () => Date },
  tag: string,
  docs: DocumentToMemorize[],
): Promise<MemorizeOutcome> {
  // The newest revision of each document, first-arrival order.
  const newest = new Map<string, DocumentToMemorize>();
  for (const d of docs) {
    if (d.taskType !== 'memory' || !d.containerTags.includes(tag)) continue;
    const had = newest.get(d.documentId);
    if (!had || had.revision < d.revision) newest.set(d.documentId, d);
  }
  if (newest.size === 0) return { containerTag: tag, commit: null };
  const made = await ports.log.commit(tag, async () => {
    const store = ports.log.store;
    const todo: DocumentToMemorize[] = [];
    for (const d of newest.values()) {
      const done = await store.memorized(d.documentId, tag);
      if (!done || done.revision < d.revision) todo.push(d);
    }
    if (todo.length === 0) return null;
    const now = ports.now();
    const at = now.toISOString();
    // Bounded reads only: the cost of memorizing a document must not grow with the tag's memories.
    const context = await extractionContext(store, tag, now);
    // What the group has changed so far, by id (the records its changes touched, as they are now).
    let state = new Map<string, MemoryRecord>();
    /** Memories the group made (what the next documents' extraction is shown beside the tag's context). */
    const taught = new Set<string>();
    const live = (m: MemoryRecord) => m.isLatest && !isGone(m, now);
    const parts: Array<{ doc: DocumentToMemorize; candidates: MemoryCandidate[]; tokens: number; ms: number; changes: number }> = [];
    const changes: MemoryChange[] = [];
    for (const doc of todo) {
      const inScope = (ms: MemoryRecord[]) => ms.filter((m) => live(m) && matchesFilterByMetadata(m.metadata, doc.filterByMetadata));
      // Records read from the store, as the group has left them, plus the group's own that `keep` accepts.
      const overlay = (ms: MemoryRecord[], keep: (m: MemoryRecord) => boolean) => {
        const byId = new Map(ms.map((m) => [m.id, state.get(m.id) ?? m]));
        for (const m of state.values()) if (!byId.has(m.id) && keep(m)) byId.set(m.id, m);
        return [...byId.values()];
      };
      const shownTaught = new Set([...taught].slice(-EXTRACTION_CONTEXT));
      const started = performance.now();
      const extracted = await ports.extractor.extract({
        text: doc.text,
        format: doc.format,
        documentDate: doc.documentDate,
        entityContext: doc.entityContext,
        // Shown what the burst taught so far too (its EXTRACTION_CONTEXT newest memories).
        existing: inScope(overlay(context, (m) => shownTaught.has(m.id))),
        ...(doc.settings?.shouldLLMFilter && doc.settings.filterPrompt ? { filterPrompt: doc.settings.filterPrompt } : {}),
      });
      const candidates = applyItemFilters(extracted.candidates, doc.settings);
      const ms = Math.round(performance.now() - started);
      // The resolver's rules compare a candidate only with memories of the same (subject, attribute),
      // the same statement, or an id the extractor named: those, looked up by index in the store and
      // picked by the same tests from what the group changed, are all it needs.
      const q = {
        attributes: candidates.flatMap((c) => (c.attribute ? [c.attribute] : [])),
        statements: candidates.map((c) => c.memory),
        ids: candidates.flatMap((c) => [...c.updates, ...c.extends]),
      };
      const attrs = new Set(q.attributes.map((a) => `${a.subject}\u001f${a.key}`));
      const norms = new Set(q.statements.map(normalizeStatement));
      const ids = new Set(q.ids);
      const concerns = (m: MemoryRecord) => ids.has(m.id) || norms.has(normalizeStatement(m.memory)) || (m.attribute !== null && attrs.has(`${m.attribute.subject}\u001f${m.attribute.key}`));
      const related = inScope(overlay(await store.related(tag, { ...q, liveAt: now }), concerns));
      const made = resolveExtraction(related, {
        commitId: todo.length === 1 ? commitIdOf(tag, todo) : `${commitIdOf(tag, todo)}:${parts.length}`,
        containerTag: tag,
        documentId: doc.documentId,
        documentDate: doc.documentDate,
        metadata: doc.metadata,
        extractor: ports.extractor.name,
        candidates,
        at,
      });
      state = carry(new Map([...related.map((m) => [m.id, m] as const), ...state]), tag, made, at);
      for (const c of made) if (c.type === 'memory.created.v1' || c.type === 'memory.versioned.v1') taught.add(c.memory.id);
      changes.push(...made);
      parts.push({ doc, candidates, tokens: extracted.tokens, ms, changes: made.length });
    }
    const first = parts[0]!;
    const cause: MemoryCommit['cause'] =
      parts.length === 1
        ? { kind: 'extraction', documentId: first.doc.documentId, revision: first.doc.revision, extractor: ports.extractor.name, candidates: first.candidates, tokens: first.tokens, ms: first.ms }
        : {
            kind: 'extraction-group',
            extractor: ports.extractor.name,
            documents: parts.map((p) => ({ documentId: p.doc.documentId, revision: p.doc.revision, candidates: p.candidates, tokens: p.tokens, ms: p.ms, changes: p.changes })),
          };
    return {
      id: commitIdOf(tag, todo),
      type: 'memory.committed.v1',
      containerTag: tag,
      occurredAt: at,
      correlationId: first.doc.correlationId,
      cause,
      changes,
    } satisfies MemoryCommit;
  });
  return { containerTag: tag, commit: made?.commit ?? null };
}

/**
 * A commit's id (the stream's deduplication key): `mem:<document>:<revision>:<tag>` for one
 * document, as before groups existed; for a group, a digest of its documents and revisions.
 */
function commitIdOf(tag: string, docs: DocumentToMemorize[]): string {
  if (docs.length === 1) return `mem:${docs[0]!.documentId}:${docs[0]!.revision}:${tag}`;
  const h = createHash('sha256');
  for (const d of docs) h.update(`${d.documentId}:${d.revision}\n`);
  return `mem:group:${h.digest('hex').slice(0, 32)}:${tag}`;
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
