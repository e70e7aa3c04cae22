import { createHash } from 'node:crypto';
import type { MemoryCandidate, MemoryChange, MemoryRecord, Metadata, TemporalContext } from '@memstream/contracts';
import { SINGLE_VALUED } from './extract/rules.js';

/** A memory id derived from the commit that makes it, so a retried decision names the same memories. */
export function memoryIdFor(commitId: string, n: number): string {
  return `mem_${createHash('sha256').update(`${commitId}#${n}`).digest('base64url').slice(0, 22)}`;
}

/** A statement as compared for "the same fact stated again": case, spacing and closing punctuation do not count. */
export function normalizeStatement(s: string): string {
  return s.toLowerCase().replace(/\s+/g, ' ').replace(/[\s.!?;,]+$/, '').trim();
}

export function sameStatement(a: string, b: string): boolean {
  return normalizeStatement(a) === normalizeStatement(b);
}

function sameValue(a: string, b: string): boolean {
  return a.trim().toLowerCase() === b.trim().toLowerCase();
}

function latestDate(dates: readonly string[] | null | undefined): number | null {
  const ts = (dates ?? []).map(Date.parse).filter(Number.isFinite);
  return ts.length ? Math.max(...ts) : null;
}

function documentTime(m: { temporalContext: TemporalContext; createdAt: string }): number {
  const doc = m.temporalContext.documentDate ? Date.parse(m.temporalContext.documentDate) : NaN;
  return Number.isFinite(doc) ? doc : Date.parse(m.createdAt);
}

/**
 * Whether `a` states an older fact than `b`: by event dates when both name one ("in 2019 I lived
 * in Porto" against "since 2021 I live in Lisbon"), else by their documents' dates. A present-tense
 * statement holds as of its document, so "I moved to Berlin last month" in a newer document
 * replaces "I live in Lisbon" of an older one even if the move came before that document.
 */
export function isOlderFact(a: { temporalContext: TemporalContext; createdAt: string }, b: { temporalContext: TemporalContext; createdAt: string }): boolean {
  const ea = latestDate(a.temporalContext.eventDate);
  const eb = latestDate(b.temporalContext.eventDate);
  if (ea !== null && eb !== null) return ea < eb;
  return documentTime(a) < documentTime(b);
}

export interface NewMemoryFields {
  memory: string;
  isStatic: boolean;
  metadata: Metadata;
  forgetAfter?: string | null | undefined;
  forgetReason?: string | null | undefined;
  temporalContext?: TemporalContext | undefined;
  attribute?: MemoryRecord['attribute'];
  sources: MemoryRecord['sources'];
  extractor: string;
}

/** A first version. */
export function firstVersion(id: string, containerTag: string, f: NewMemoryFields, at: string): MemoryRecord {
  return {
    id,
    containerTag,
    memory: f.memory,
    version: 1,
    isLatest: true,
    parentMemoryId: null,
    rootMemoryId: null,
    relations: [],
    isForgotten: false,
    forgetAfter: f.forgetAfter ?? null,
    forgetReason: f.forgetReason ?? null,
    isStatic: f.isStatic,
    isInference: false,
    attribute: f.attribute ?? null,
    documentIds: [...new Set(f.sources.map((s) => s.documentId))],
    sources: f.sources,
    metadata: f.metadata,
    temporalContext: f.temporalContext ?? {},
    extractor: f.extractor,
    createdAt: at,
    updatedAt: at,
  };
}

/** The version after `parent`: it `updates` the parent, whose root it shares. */
export function nextVersion(id: string, parent: MemoryRecord, f: NewMemoryFields, at: string): MemoryRecord {
  return {
    ...firstVersion(id, parent.containerTag, f, at),
    version: parent.version + 1,
    parentMemoryId: parent.id,
    rootMemoryId: parent.rootMemoryId ?? parent.id,
    relations: [{ memoryId: parent.id, relation: 'updates' }],
  };
}

export interface ExtractionToResolve {
  commitId: string;
  containerTag: string;
  documentId: string;
  /** ISO; the document's date, against which "older than" is judged when a statement has no date of its own. */
  documentDate: string;
  metadata: Metadata;
  extractor: string;
  candidates: MemoryCandidate[];
  /** When the commit is made (ISO): createdAt of what it makes. */
  at: string;
}

/**
 * The resolver: what an extraction changes, given the tag's live latest memories it may concern
 * (those sharing an attribute or a statement with a candidate, or named by id; MemoryStore.related). Pure,
 * like the views' evolve: the same memories and candidates always give the same changes, which
 * the memorizer records in one commit.
 *
 * Rules, per candidate, in order:
 * - `forget`: each live memory with the same (subject, attribute) — and value, when one is
 *   named — is forgotten (cause `statement`);
 * - the same statement already live → `source-added` (a new document strengthens it);
 * - a single-valued attribute (lives in, works at, name…) with a live memory of another value →
 *   a new version that `updates` it, unless the candidate's fact is older than the memory's (an
 *   old statement must not replace a newer one): then it is kept as history, not latest;
 * - the same attribute value already live → `source-added`;
 * - ids a model named in `updates` / `extends` → a new version / a link;
 * - otherwise a new memory. Never superseded by text similarity alone.
 */
export function resolveExtraction(existing: readonly MemoryRecord[], x: ExtractionToResolve): MemoryChange[] {
  const changes: MemoryChange[] = [];
  // What is live and latest as the candidates are taken one by one (this document's own
  // statements included: "I lived in Lisbon… now I live in Berlin" versions within one document).
  const live = new Map(existing.filter((m) => m.isLatest && !m.isForgotten).map((m) => [m.id, m]));
  let n = 0;
  const source = (c: MemoryCandidate) => ({ documentId: x.documentId, text: c.sourceText });
  const fields = (c: MemoryCandidate): NewMemoryFields => ({
    memory: c.memory,
    isStatic: c.isStatic,
    metadata: x.metadata,
    forgetAfter: c.forgetAfter,
    temporalContext: { documentDate: x.documentDate, ...(c.eventDates.length ? { eventDate: c.eventDates } : {}) },
    attribute: c.attribute,
    sources: [source(c)],
    extractor: x.extractor,
  });
  const strengthen = (m: MemoryRecord, c: MemoryCandidate) => {
    if (!m.documentIds.includes(x.documentId)) {
      changes.push({ type: 'memory.source-added.v1', memoryId: m.id, source: source(c) });
      live.set(m.id, { ...m, documentIds: [...m.documentIds, x.documentId] });
    }
  };

  for (const c of x.candidates) {
    const attr = c.attribute;
    if (c.action === 'forget') {
      if (!attr) continue;
      for (const m of [...live.values()]) {
        if (!m.attribute || m.attribute.subject !== attr.subject || m.attribute.key !== attr.key) continue;
        if (attr.value && !sameValue(attr.value, m.attribute.value)) continue;
        changes.push({ type: 'memory.forgotten.v1', memoryId: m.id, reason: c.sourceText ?? c.memory, cause: 'statement' });
        live.delete(m.id);
      }
      continue;
    }
    const same = [...live.values()].find((m) => sameStatement(m.memory, c.memory));
    if (same) {
      strengthen(same, c);
      continue;
    }
    const modelUpdates = c.updates.map((id) => live.get(id)).filter((m): m is MemoryRecord => m !== undefined);
    const attrPeer =
      attr && SINGLE_VALUED.has(attr.key)
        ? [...live.values()].find((m) => m.attribute && m.attribute.subject === attr.subject && m.attribute.key === attr.key)
        : undefined;
    if (attr && attrPeer && sameValue(attrPeer.attribute!.value, attr.value)) {
      strengthen(attrPeer, c);
      continue;
    }
    const replaces = attrPeer ?? modelUpdates[0];
    const id = memoryIdFor(x.commitId, n++);
    if (replaces) {
      const candidate = nextVersion(id, replaces, fields(c), x.at);
      if (isOlderFact(candidate, replaces)) {
        // Older than what it contradicts: history, never the latest.
        changes.push({ type: 'memory.created.v1', memory: { ...firstVersion(id, x.containerTag, fields(c), x.at), isLatest: false } });
        continue;
      }
      changes.push({ type: 'memory.versioned.v1', memory: candidate });
      live.delete(replaces.id);
      live.set(id, candidate);
      continue;
    }
    const made = firstVersion(id, x.containerTag, fields(c), x.at);
    const extendsIds = c.extends.filter((e) => live.has(e));
    const withLinks = { ...made, relations: extendsIds.map((e) => ({ memoryId: e, relation: 'extends' as const })) };
    changes.push({ type: 'memory.created.v1', memory: withLinks });
    live.set(id, withLinks);
  }
  return changes;
}
