import { describe, expect, it } from 'vitest';
import { follow, recordingContext, sampleEvents, submittedEvent } from '@memstream/bus';
import { EVENT_KIND_OF, READERS, eventNameOf, type DocumentEvent, type LifecycleEvent, type Webhook, type WebhookDeliveryJob } from '@memstream/contracts';
import { createTransitionHandler, mergeNote, webhookMatches, type DocNote, type DocNotes } from './transitions.js';

/** The notifier's ports in memory: notes in a Map, the log as a Map, LIFECYCLE and the queue as arrays. */
function world(hooks: Webhook[] = []) {
  const notes = new Map<string, DocNote>();
  const log = new Map<string, DocNote>();
  const lifecycle: Array<{ seq: number; event: LifecycleEvent }> = [];
  const queue: WebhookDeliveryJob[] = [];
  const purged: Array<[string, number]> = [];
  const docNotes: DocNotes = {
    get: async (id) => notes.get(id) ?? null,
    note: async (id, patch) => {
      const n = mergeNote(notes.get(id) ?? null, patch);
      notes.set(id, n);
      return n;
    },
    forget: async (id) => void notes.delete(id),
  };
  const handle = createTransitionHandler({
    notes: docNotes,
    fromLog: async (id) => log.get(id) ?? null,
    webhooks: () => hooks,
    publishLifecycle: async (event) => {
      lifecycle.push({ seq: lifecycle.length + 1, event });
      return lifecycle.length;
    },
    purgeLifecycle: async (id, seq) => void purged.push([id, seq]),
    enqueue: async (job) => void queue.push(job),
    now: () => new Date('2026-01-01T00:00:10Z'),
  });
  const run = async (...events: DocumentEvent[]) => {
    for (const e of events) expect(await handle(e, recordingContext())).toEqual([]);
  };
  return { notes, log, lifecycle, queue, purged, run, handle };
}

const hook = (over: Partial<Webhook> = {}): Webhook => ({
  id: 'wh_1',
  url: 'https://example.com/hook',
  containerTags: [],
  events: ['queued', 'extracting', 'chunking', 'embedding', 'done', 'failed', 'deleted'],
  secret: 'whsec_x',
  description: null,
  createdAt: '2025-12-31T00:00:00.000Z',
  createdBy: null,
  ...over,
});

function journey(tags: string[] = ['team'], customId: string | null = 'note-1') {
  const sub = submittedEvent('hello', { data: { containerTags: tags, customId } });
  return {
    sub,
    extracting: follow(sub, 'document.stage-started.v1', { stage: 'extracting' }),
    extracted: follow(sub, 'document.extracted.v1', { title: null, type: 'text', text: 'hello', url: null, format: 'plain' }),
    // Later stages announce nothing: their input's arrival is the transition (chunking, embedding).
    chunked: follow(sub, 'document.chunked.v1', { tokenizer: 't', chunks: [{ index: 0, hash: 'h', text: 'hello', tokens: 1 }] }),
    embedded: follow(sub, 'document.embedded.v1', { model: 'm', dim: 1, chunks: [{ index: 0, hash: 'h', text: 'hello', tokens: 1, vector: 'AACAPw==' }], computed: 1 }),
    indexed: follow(sub, 'document.indexed.v1', { model: 'm', dim: 4, chunkCount: 1, removed: 0 }),
    failed: follow(sub, 'document.failed.v1', { stage: 'chunking', reason: 'no text', class: 'permanent' }),
    deleted: follow(sub, 'document.deleted.v1', { reason: 'api' }, 9),
  };
}

describe('document events → lifecycle transitions', () => {
  it('announces queued … done with the tags and customId of the submission, once per matching webhook', async () => {
    const w = world([hook(), hook({ id: 'wh_tag', containerTags: ['team'], events: ['done'] }), hook({ id: 'wh_other', containerTags: ['other'] })]);
    const j = journey();
    await w.run(j.sub, j.extracting, j.extracted, j.chunked, j.embedded, j.indexed);
    expect(w.lifecycle.map((l) => l.event.status)).toEqual(['queued', 'extracting', 'chunking', 'embedding', 'done']);
    expect(w.lifecycle[4]!.event).toEqual({
      id: j.indexed.id,
      type: 'document.done',
      documentId: j.sub.documentId,
      customId: 'note-1',
      containerTags: ['team'],
      status: 'done',
      revision: 1,
      occurredAt: j.indexed.occurredAt,
    });
    expect(w.queue.map((q) => `${q.webhookId}:${eventNameOf(q.event)}`)).toEqual([
      'wh_1:queued',
      'wh_1:extracting',
      'wh_1:chunking',
      'wh_1:embedding',
      'wh_1:done',
      'wh_tag:done',
    ]);
  });

  it('carries the failure, and a deletion reaches the webhooks of tags the tombstone no longer names', async () => {
    const w = world([hook({ containerTags: ['team'] })]);
    const j = journey();
    await w.run(j.sub, j.failed);
    expect(w.lifecycle[1]!.event).toMatchObject({ status: 'failed', error: { stage: 'chunking', reason: 'no text', class: 'permanent' } });
    await w.run(j.deleted);
    expect(w.queue.map((q) => eventNameOf(q.event))).toEqual(['queued', 'failed', 'deleted']);
    expect(w.queue[2]!.event.containerTags).toEqual(['team']);
    // Deletion is permanent: earlier transitions leave LIFECYCLE, and the note goes.
    expect(w.purged).toEqual([[j.sub.documentId, 3]]);
    expect(w.notes.has(j.sub.documentId)).toBe(false);
    // Work still in flight for the deleted document announces nothing.
    await w.run(j.chunked);
    expect(w.lifecycle).toHaveLength(3);
  });

  it('follows tag changes: metadata-updated is no transition, but later ones go to the new tags', async () => {
    const w = world([hook({ id: 'wh_new', containerTags: ['new'] })]);
    const j = journey(['old']);
    await w.run(j.sub, j.extracting);
    await w.run(follow(j.sub, 'document.metadata-updated.v1', { metadata: {}, containerTags: ['new'], version: 1 }));
    await w.run(j.indexed);
    expect(w.lifecycle.map((l) => l.event.status)).toEqual(['queued', 'extracting', 'done']);
    expect(w.queue.map((q) => eventNameOf(q.event))).toEqual(['done']);
    // An older submission's tags do not win over a newer update, whatever the order.
    expect(mergeNote({ customId: null, containerTags: ['new'], tagsVersion: 2, revision: 1 }, { containerTags: ['old'], tagsVersion: 1, revision: 2 })).toEqual({
      customId: null,
      containerTags: ['new'],
      tagsVersion: 2,
      revision: 2,
    });
  });

  it('drops transitions of a superseded revision, and reads the log when it has no note', async () => {
    const w = world([hook()]);
    const j = journey();
    w.log.set(j.sub.documentId, { customId: 'from-log', containerTags: ['t'], tagsVersion: 0, revision: 2 });
    await w.run(j.extracting);
    expect(w.lifecycle).toHaveLength(0);
    const rev2 = { ...j.extracted, id: 'rev2-extracted', revision: 2 };
    await w.run(rev2);
    expect(w.lifecycle.map((l) => [l.event.status, l.event.customId, l.event.containerTags])).toEqual([['chunking', 'from-log', ['t']]]);
  });

  it('a webhook announces only what happens after it was registered', () => {
    const event: LifecycleEvent = {
      id: 'e',
      type: 'document.done',
      documentId: 'd',
      customId: null,
      containerTags: ['a', 'b'],
      status: 'done',
      revision: 1,
      occurredAt: '2026-01-01T00:00:00.000Z',
    };
    expect(webhookMatches(hook(), event)).toBe(true);
    expect(webhookMatches(hook({ createdAt: '2026-01-01T00:00:01.000Z' }), event)).toBe(false);
    expect(webhookMatches(hook({ containerTags: ['b', 'z'] }), event)).toBe(true);
    expect(webhookMatches(hook({ containerTags: ['z'] }), event)).toBe(false);
    expect(webhookMatches(hook({ events: ['failed'] }), event)).toBe(false);
  });

  it('keeps one document in log order even when a later event is quicker to handle', async () => {
    const w = world();
    const j = journey();
    // The submission's note write is slow; the next event must still come out after it.
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const slow = createTransitionHandler({
      notes: {
        get: async () => ({ customId: null, containerTags: [], tagsVersion: 0, revision: 1 }),
        note: async (_id, p) => {
          await gate;
          return mergeNote(null, p);
        },
        forget: async () => {},
      },
      fromLog: async () => null,
      webhooks: () => [],
      publishLifecycle: async (e) => w.lifecycle.push({ seq: w.lifecycle.length + 1, event: e }),
      purgeLifecycle: async () => {},
      enqueue: async () => {},
      now: () => new Date(),
    });
    const a = slow(j.sub, recordingContext());
    const b = slow(j.extracting, recordingContext());
    setTimeout(release, 20);
    await Promise.all([a, b]);
    expect(w.lifecycle.map((l) => l.event.status)).toEqual(['queued', 'extracting']);
  });
});

// The notifier decodes only READERS.notifier.reads; a kind it skips must be one it would have
// done nothing with: no transition, no note, nothing queued.
describe('the kinds the notifier reads', () => {
  it('does nothing with a kind it skips, and something with every kind it reads', async () => {
    const sub = submittedEvent('hello', { data: { containerTags: ['team'], customId: 'c1' } });
    for (const event of Object.values(sampleEvents(sub)) as DocumentEvent[]) {
      const w = world([hook()]);
      w.log.set(sub.documentId, mergeNote(null, { customId: 'c1', containerTags: ['team'], tagsVersion: 0, revision: sub.revision }));
      await w.run(event);
      const acted = w.lifecycle.length > 0 || w.queue.length > 0 || w.notes.size > 0;
      expect(acted, `${event.type}: acted ${acted}, read ${READERS.notifier.reads[EVENT_KIND_OF[event.type]]}`).toBe(READERS.notifier.reads[EVENT_KIND_OF[event.type]]);
    }
  });
});
