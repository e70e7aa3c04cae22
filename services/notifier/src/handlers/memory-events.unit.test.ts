import { describe, expect, it } from 'vitest';
import type { MemoryCommit, MemoryLifecycleEvent, MemoryRecord, Webhook, WebhookDeliveryJob } from '@memstream/contracts';
import { createLogger } from '@memstream/kit';
import { createMemoryAnnouncer, memoryEventsOf, type MemoryCounts } from './memory-events.js';

const log = createLogger('test', { level: 'silent' });

/** LIFECYCLE deduplicated by id as the stream is, the queue deduplicated by `${event.id}:${webhookId}`, delivery records as a Set. */
function world(hooks: Webhook[]) {
  const lifecycle: MemoryLifecycleEvent[] = [];
  const queue: WebhookDeliveryJob[] = [];
  const queuedIds = new Set<string>();
  const attempted = new Set<string>();
  const counted: Array<[string, MemoryCounts]> = [];
  const announce = createMemoryAnnouncer({
    webhooks: () => hooks,
    publishLifecycle: async (event) => {
      const at = lifecycle.findIndex((e) => e.id === event.id);
      if (at >= 0) return { seq: at + 1, duplicate: true };
      lifecycle.push(event);
      return { seq: lifecycle.length, duplicate: false };
    },
    attempted: async (webhookId, eventId) => attempted.has(`${webhookId}.${eventId}`),
    enqueue: async (job) => {
      const id = `${job.event.id}:${job.webhookId}`;
      if (queuedIds.has(id)) return;
      queuedIds.add(id);
      queue.push(job);
    },
    count: (tag, c) => void counted.push([tag, c]),
    now: () => new Date('2026-01-01T00:00:10Z'),
  });
  return { lifecycle, queue, attempted, counted, announce: (c: MemoryCommit) => announce(c, log), queuedIds };
}

const hook = (over: Partial<Webhook> = {}): Webhook => ({
  id: 'wh_1',
  url: 'https://example.com/hook',
  containerTags: [],
  events: ['memory.created', 'memory.updated', 'memory.forgotten'],
  secret: 'whsec_x',
  description: null,
  createdAt: '2025-12-31T00:00:00.000Z',
  createdBy: null,
  ...over,
});

const record = (id: string, over: Partial<MemoryRecord> = {}): MemoryRecord => ({
  id,
  containerTag: 'team',
  memory: 'Ana lives in Lisbon.',
  version: 1,
  isLatest: true,
  parentMemoryId: null,
  rootMemoryId: null,
  relations: [],
  isForgotten: false,
  forgetAfter: null,
  forgetReason: null,
  isStatic: true,
  isInference: false,
  attribute: null,
  documentIds: ['doc1'],
  sources: [],
  metadata: {},
  temporalContext: {},
  extractor: 'offline-rules@1',
  createdAt: '2026-01-01T00:00:00.000Z',
  updatedAt: '2026-01-01T00:00:00.000Z',
  ...over,
});

const commit = (id: string, changes: MemoryCommit['changes'], over: Partial<MemoryCommit> = {}): MemoryCommit => ({
  id,
  type: 'memory.committed.v1',
  containerTag: 'team',
  occurredAt: '2026-01-01T00:00:05.000Z',
  correlationId: id,
  cause: { kind: 'extraction', documentId: 'doc1', revision: 1, extractor: 'offline-rules@1', candidates: [], tokens: 0, ms: 1 },
  changes,
  ...over,
});

describe('memory commits → memory events', () => {
  const made = commit('c1', [
    { type: 'memory.created.v1', memory: record('mem_aaaaaaaa') },
    { type: 'memory.source-added.v1', memoryId: 'mem_zzzzzzzz', source: { documentId: 'doc1', text: null } },
  ]);
  const updated = commit('c2', [{ type: 'memory.versioned.v1', memory: record('mem_bbbbbbbb', { memory: 'Ana lives in Berlin.', version: 2, parentMemoryId: 'mem_aaaaaaaa', rootMemoryId: 'mem_aaaaaaaa' }) }], {
    cause: { kind: 'update' },
  });
  const forgotten = commit('c3', [{ type: 'memory.forgotten.v1', memoryId: 'mem_bbbbbbbb', reason: 'moved away', cause: 'user' }], { cause: { kind: 'forget' } });

  it('announces created, updated and forgotten (not links or added sources), with the tag, version and source document', () => {
    const events = [made, updated, forgotten].flatMap(memoryEventsOf);
    expect(events.map((e) => [e.type, e.memoryId, e.version])).toEqual([
      ['memory.created', 'mem_aaaaaaaa', 1],
      ['memory.updated', 'mem_bbbbbbbb', 2],
      ['memory.forgotten', 'mem_bbbbbbbb', null],
    ]);
    expect(events[0]).toMatchObject({ containerTag: 'team', containerTags: ['team'], documentId: 'doc1', cause: 'extraction', memory: 'Ana lives in Lisbon.', occurredAt: made.occurredAt });
    expect(events[1]).toMatchObject({ parentMemoryId: 'mem_aaaaaaaa', rootMemoryId: 'mem_aaaaaaaa', documentId: null, cause: 'update' });
    expect(events[2]).toMatchObject({ forgotten: { cause: 'user', reason: 'moved away' }, memory: null });
    // The ids come from the commit: the same commit read again gives the same ids.
    expect(memoryEventsOf(made)[0]!.id).toBe(events[0]!.id);
    expect(new Set(events.map((e) => e.id)).size).toBe(3);
  });

  it('a dynamic-dreaming group is announced as its extractions: each change with the document it came from', () => {
    const part = (documentId: string, changes: number) => ({ documentId, revision: 1, candidates: [], tokens: 0, ms: 1, changes });
    const group = commit(
      'g1',
      [
        { type: 'memory.created.v1', memory: record('mem_cccccccc', { documentIds: ['docA'] }) },
        { type: 'memory.forgotten.v1', memoryId: 'mem_cccccccc', reason: 'I no longer live there', cause: 'statement' },
        { type: 'memory.created.v1', memory: record('mem_dddddddd', { documentIds: ['docB'] }) },
      ],
      { cause: { kind: 'extraction-group', extractor: 'offline-rules@1', documents: [part('docA', 1), part('docB', 2)] } },
    );
    expect(memoryEventsOf(group).map((e) => [e.type, e.documentId, e.cause])).toEqual([
      ['memory.created', 'docA', 'extraction'],
      ['memory.forgotten', 'docB', 'extraction'],
      ['memory.created', 'docB', 'extraction'],
    ]);
  });

  it('queues each event once per webhook that names it and whose tags match; counts each change once, redelivery or not', async () => {
    const w = world([
      hook(),
      hook({ id: 'wh_team', containerTags: ['team'], events: ['memory.forgotten'] }),
      hook({ id: 'wh_other', containerTags: ['other'] }),
      hook({ id: 'wh_docs', events: ['queued', 'done'] }),
    ]);
    await w.announce(made);
    await w.announce(updated);
    await w.announce(forgotten);
    expect(w.queue.map((q) => `${q.webhookId}:${q.event.type}`)).toEqual(['wh_1:memory.created', 'wh_1:memory.updated', 'wh_1:memory.forgotten', 'wh_team:memory.forgotten']);
    expect(w.counted).toEqual([
      ['team', { created: 1, updated: 0, forgotten: 0 }],
      ['team', { created: 0, updated: 1, forgotten: 0 }],
      ['team', { created: 0, updated: 0, forgotten: 1 }],
    ]);
    // The same commit again (a redelivery): nothing new on LIFECYCLE, in the queue or in the counts.
    await w.announce(updated);
    expect(w.lifecycle).toHaveLength(3);
    expect(w.queue).toHaveLength(4);
    expect(w.counted).toHaveLength(3);
  });

  it('a delivery already attempted is not queued again, past the queue deduplication window', async () => {
    const w = world([hook()]);
    const [event] = memoryEventsOf(made);
    w.attempted.add(`wh_1.${event!.id}`);
    await w.announce(made);
    expect(w.queue).toEqual([]);
  });

  it('a webhook registered after the commit gets nothing of it', async () => {
    const w = world([hook({ createdAt: '2026-01-01T00:00:06.000Z' })]);
    await w.announce(made);
    expect(w.queue).toEqual([]);
    expect(w.lifecycle).toHaveLength(1);
  });
});
