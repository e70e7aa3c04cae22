import { describe, expect, it } from 'vitest';
import { follow, recordingContext, submittedEvent } from '@memstream/bus';
import type { DocumentEvent } from '@memstream/contracts';
import { SqliteDocumentViews, evolve, sameView, type DocumentView } from '@memstream/views';
import { applyEvent, createProjectionHandler } from './index.js';

function fold(events: DocumentEvent[]): DocumentView | null {
  return events.reduce<DocumentView | null>((v, e) => evolve(v, e), null);
}

const sub1 = submittedEvent('hello world', { documentId: 'd1', revision: 1, occurredAt: '2026-01-01T00:00:00.000Z', data: { containerTags: ['t1'], metadata: { k: 'v' } } });
const at = (iso: string) => () => new Date(iso);
const started = (stage: 'extracting' | 'chunking' | 'embedding', e = sub1) => follow(e, 'document.stage-started.v1', { stage }, 0, at('2026-01-01T00:00:01.000Z'));
const extracted = follow(sub1, 'document.extracted.v1', { title: 'hello', type: 'text', text: 'hello world', url: null, format: 'plain' }, 0, at('2026-01-01T00:00:02.000Z'));
const chunked = follow(sub1, 'document.chunked.v1', { tokenizer: 't', chunks: [] }, 0, at('2026-01-01T00:00:03.000Z'));
const embedded = follow(sub1, 'document.embedded.v1', { model: 'm', dim: 8, chunks: [], computed: 0 }, 0, at('2026-01-01T00:00:04.000Z'));
const indexed = (e = sub1) => follow(e, 'document.indexed.v1', { model: 'm', dim: 8, chunkCount: 1, removed: 0 }, 0, at('2026-01-01T00:00:05.000Z'));

describe('projection: evolve', () => {
  it('walks queued → extracting → chunking → embedding → done', () => {
    const seen: string[] = [];
    let v: DocumentView | null = null;
    // The entrance announces extracting; extracted sets chunking and chunked embedding on arrival.
    for (const e of [sub1, started('extracting'), extracted, chunked, embedded, indexed()]) {
      v = evolve(v, e);
      seen.push(v!.status);
    }
    expect(seen).toEqual(['queued', 'extracting', 'chunking', 'embedding', 'embedding', 'done']);
    expect(v).toMatchObject({ id: 'd1', title: 'hello', chunkCount: 1, containerTags: ['t1'], metadata: { k: 'v' }, createdAt: sub1.occurredAt, updatedAt: '2026-01-01T00:00:05.000Z' });
  });

  it('never moves a status backwards within a revision (late redelivery)', () => {
    expect(fold([sub1, started('embedding'), started('extracting')])!.status).toBe('embedding');
    expect(fold([sub1, indexed(), started('chunking')])!.status).toBe('done');
    expect(fold([sub1, chunked, extracted])!.status).toBe('embedding');
    expect(fold([sub1, indexed(), chunked])!.status).toBe('done');
  });

  it('a log written when every stage announced its start walks the same statuses', () => {
    const seen = [sub1, started('extracting'), extracted, started('chunking'), chunked, started('embedding'), embedded, indexed()].map((_, i, all) => fold(all.slice(0, i + 1))!.status);
    expect(seen).toEqual(['queued', 'extracting', 'chunking', 'chunking', 'embedding', 'embedding', 'embedding', 'done']);
  });

  it('a stale revision never overwrites a newer one', () => {
    const sub2 = submittedEvent('hello again', { documentId: 'd1', revision: 2, occurredAt: '2026-01-01T00:01:00.000Z' });
    const v = fold([sub1, sub2, indexed(sub1), started('chunking', sub1)]);
    expect(v).toMatchObject({ revision: 2, status: 'queued', content: 'hello again', createdAt: sub1.occurredAt });
    expect(fold([sub2, sub1])!.revision).toBe(2);
  });

  it('failed carries the reason and is terminal for its revision', () => {
    const failed = follow(sub1, 'document.failed.v1', { stage: 'extracting', reason: 'no extractable text', class: 'permanent' });
    const v = fold([sub1, started('extracting'), failed, indexed(), started('chunking')]);
    expect(v).toMatchObject({ status: 'failed', error: { stage: 'extracting', reason: 'no extractable text', class: 'permanent' } });
  });

  it('applying the same event twice changes nothing', () => {
    const once = fold([sub1, started('extracting'), extracted]);
    const twice = fold([sub1, sub1, started('extracting'), started('extracting'), extracted, extracted]);
    expect(twice).toEqual(once);
  });

  it('deleted removes the document; a later revision of the same id starts afresh', () => {
    const del = { ...follow(sub1, 'document.deleted.v1', { reason: 'api' }), causationId: null };
    expect(fold([sub1, indexed(), del])).toBeNull();
    const sub2 = submittedEvent('back', { documentId: 'd1', revision: 2 });
    expect(fold([sub1, del, sub2])).toMatchObject({ revision: 2, status: 'queued', content: 'back' });
  });
});

describe('projection: applyEvent, deliveries out of order', () => {
  const sub2 = submittedEvent('hello again', { documentId: 'd1', revision: 2, occurredAt: '2026-01-01T00:01:00.000Z' });
  const ports = (tombstone = 0) => ({ lastSubmitted: async () => sub2, tombstoneRevision: async () => tombstone });

  it('a first submission delivered after the second one still sets createdAt, as log order does', async () => {
    const views = SqliteDocumentViews.open(':memory:');
    for (const e of [indexed(sub2), sub1, indexed(sub1)]) await applyEvent(views, e, ports());
    const v = await views.get('d1');
    expect(v).toMatchObject({ revision: 2, status: 'done', content: 'hello again', createdAt: sub1.occurredAt });
    // The same as the log's order gives.
    const inOrder = SqliteDocumentViews.open(':memory:');
    for (const e of [sub1, indexed(sub1), sub2, indexed(sub2)]) await applyEvent(inOrder, e);
    expect(sameView(v, await inOrder.get('d1'))).toBe(true);
  });

  it('but not a submission from before a deletion: the document was created anew', async () => {
    const views = SqliteDocumentViews.open(':memory:');
    for (const e of [sub2, sub1]) await applyEvent(views, e, ports(1));
    expect((await views.get('d1'))!.createdAt).toBe(sub2.occurredAt);
  });
});

describe('projection: a batch', () => {
  it('applies a batch in one write per document: the same views as one event at a time, and a lost race applied again', async () => {
    const sub2 = submittedEvent('second', { documentId: 'd2', revision: 1, occurredAt: '2026-01-01T00:00:00.000Z' });
    const events = [sub1, started('extracting'), sub2, extracted, started('chunking'), indexed(), started('extracting', sub2), indexed(sub2)];
    const oneByOne = SqliteDocumentViews.open(':memory:');
    for (const e of events) await applyEvent(oneByOne, e);
    const batched = SqliteDocumentViews.open(':memory:');
    // Another writer (a replica) gets to d2 first: the batch's compare-and-set on d2 loses and is applied again.
    let raced = false;
    const racing = Object.assign(Object.create(batched) as SqliteDocumentViews, {
      writeMany: async (writes: Parameters<SqliteDocumentViews['writeMany']>[0]) => {
        if (!raced) {
          raced = true;
          await applyEvent(batched, sub2);
        }
        return batched.writeMany(writes);
      },
    });
    const results = await createProjectionHandler(racing)(events.map((event) => ({ event, ctx: recordingContext() })));
    expect(results.every((r) => r.status === 'fulfilled')).toBe(true);
    for (const id of ['d1', 'd2']) {
      const a = (await oneByOne.get(id))!;
      const b = (await batched.get(id))!;
      expect(sameView(a, b), id).toBe(true);
      expect(b.status).toBe('done');
    }
    // d1 in one write (version 1); d2 by the racing writer, then its events again one by one.
    expect((await batched.get('d1'))!.version).toBe(1);
    expect((await batched.get('d2'))!.version).toBeGreaterThan(1);
  });
});
