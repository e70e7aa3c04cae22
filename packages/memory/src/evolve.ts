import type { MemoryChange, MemoryCommit, MemoryRecord } from '@memstream/contracts';

/** The records one commit touches, by id: what the store reads before it applies a commit. */
export function touchedIds(commit: MemoryCommit): string[] {
  const ids = new Set<string>();
  for (const c of commit.changes) {
    if (c.type === 'memory.created.v1' || c.type === 'memory.versioned.v1') {
      ids.add(c.memory.id);
      if (c.memory.parentMemoryId) ids.add(c.memory.parentMemoryId);
    } else ids.add(c.memoryId);
  }
  return [...ids];
}

function applyChange(byId: Map<string, MemoryRecord>, change: MemoryChange, at: string): void {
  switch (change.type) {
    case 'memory.created.v1': {
      // A redelivered commit re-creates nothing: the record already there wins.
      if (!byId.has(change.memory.id)) byId.set(change.memory.id, change.memory);
      return;
    }
    case 'memory.versioned.v1': {
      if (!byId.has(change.memory.id)) byId.set(change.memory.id, change.memory);
      const parent = change.memory.parentMemoryId ? byId.get(change.memory.parentMemoryId) : undefined;
      if (parent && parent.isLatest) byId.set(parent.id, { ...parent, isLatest: false, updatedAt: at });
      return;
    }
    case 'memory.linked.v1': {
      const m = byId.get(change.memoryId);
      if (!m || m.relations.some((r) => r.memoryId === change.to && r.relation === change.relation)) return;
      byId.set(m.id, { ...m, relations: [...m.relations, { memoryId: change.to, relation: change.relation }], updatedAt: at });
      return;
    }
    case 'memory.source-added.v1': {
      const m = byId.get(change.memoryId);
      if (!m || m.documentIds.includes(change.source.documentId)) return;
      byId.set(m.id, { ...m, documentIds: [...m.documentIds, change.source.documentId], sources: [...m.sources, change.source], updatedAt: at });
      return;
    }
    case 'memory.forgotten.v1': {
      const m = byId.get(change.memoryId);
      if (!m || m.isForgotten) return;
      byId.set(m.id, { ...m, isForgotten: true, forgetReason: change.reason ?? m.forgetReason, updatedAt: at });
      return;
    }
    case 'memory.expiry-set.v1': {
      const m = byId.get(change.memoryId);
      if (!m) return;
      byId.set(m.id, { ...m, forgetAfter: change.forgetAfter, forgetReason: change.forgetReason, updatedAt: at });
      return;
    }
  }
}

/**
 * The store's reducer: given the records a commit touches (by id), the records after it. Pure:
 * time comes from the commit, so replaying the MEMORY stream gives back exactly the same store.
 * Every change is an upsert that tolerates being applied twice.
 */
export function evolveMemories(before: ReadonlyMap<string, MemoryRecord>, commit: MemoryCommit): Map<string, MemoryRecord> {
  const byId = new Map(before);
  for (const change of commit.changes) applyChange(byId, change, commit.occurredAt);
  return byId;
}

/** The document revisions a commit memorized for its tag (an extraction, or a group of them). */
export function memorizedBy(commit: MemoryCommit): Array<{ documentId: string; revision: number }> {
  const c = commit.cause;
  if (c.kind === 'extraction') return [{ documentId: c.documentId, revision: c.revision }];
  if (c.kind === 'extraction-group') return c.documents.map((d) => ({ documentId: d.documentId, revision: d.revision }));
  return [];
}

/** Whether a memory counts as forgotten at `now`: forgotten, or past its forgetAfter. */
export function isGone(m: Pick<MemoryRecord, 'isForgotten' | 'forgetAfter'>, now: Date): boolean {
  return m.isForgotten || (m.forgetAfter !== null && Date.parse(m.forgetAfter) <= now.getTime());
}
