import { describe, expect, it } from 'vitest';
import { sampleEvents, submittedEvent } from '@memstream/bus';
import { EVENT_KIND_OF, type DocumentEvent, type EventKind } from '@memstream/contracts';
import { evolve, type DocumentView, type DocumentViews } from '@memstream/views';
import { createStallDetector } from './stalls.js';

// What a stalled document waits on comes from the pipeline table (waitingOn): the detector
// publishes again the most advanced event of the document's revision that is in the log.
function world(status: DocumentView['status'], inLog: EventKind[]) {
  const sub = submittedEvent('x', { occurredAt: '2026-01-01T00:00:00.000Z' });
  const samples = sampleEvents(sub);
  const log = new Map<EventKind, DocumentEvent>((Object.values(samples) as DocumentEvent[]).map((e) => [EVENT_KIND_OF[e.type], e]));
  const view: DocumentView = { ...evolve(null, sub)!, status, updatedAt: '2026-01-01T00:00:00.000Z' };
  const published: DocumentEvent[] = [];
  let now = Date.parse('2026-01-01T01:00:00.000Z');
  const detector = createStallDetector(
    {
      views: { list: async () => ({ items: [view], total: 1 }) } as unknown as DocumentViews,
      lastEvent: async (_id, kind) => (inLog.includes(kind) ? (log.get(kind) ?? null) : null),
      publish: async (e) => void published.push(e),
      now: () => new Date(now),
    },
    { leaseMs: 60_000, maxRedrives: 1 },
  );
  return { detector, published, later: () => (now += 120_000), sub };
}

describe('stalled documents', () => {
  it('an embedding document is re-driven from its indexer input when it is in the log, else from its embedder input', async () => {
    const a = world('embedding', ['submitted', 'extracted', 'chunked', 'embedded']);
    await a.detector.scan();
    expect(a.published.map((e) => e.type)).toEqual(['document.embedded.v1']);
    const b = world('embedding', ['submitted', 'extracted', 'chunked']);
    await b.detector.scan();
    expect(b.published.map((e) => e.type)).toEqual(['document.chunked.v1']);
  });

  it('a queued document is re-driven from its submission, and past the re-drives it fails at the first stage', async () => {
    const w = world('queued', ['submitted']);
    await w.detector.scan();
    expect(w.published.map((e) => e.type)).toEqual(['document.submitted.v1']);
    w.later();
    await w.detector.scan();
    expect(w.published[1]).toMatchObject({ type: 'document.failed.v1', data: { stage: 'extracting', class: 'exhausted' } });
  });

  it('a chunking document past its re-drives fails at chunking', async () => {
    const w = world('chunking', ['submitted', 'extracted']);
    await w.detector.scan();
    w.later();
    await w.detector.scan();
    expect(w.published.map((e) => e.type)).toEqual(['document.extracted.v1', 'document.failed.v1']);
    expect(w.published[1]).toMatchObject({ data: { stage: 'chunking' } });
  });
});
