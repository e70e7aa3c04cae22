import { describe, expect, it } from 'vitest';
import { sampleEvents, submittedEvent } from '@memstream/bus';
import { DOCUMENT_STATUSES, EVENT_KIND_OF, READERS, type DocumentEvent } from '@memstream/contracts';
import { evolve, type DocumentView } from '@memstream/views';

// The projection decodes only the kinds READERS.projection.reads says (the rest are acked
// unread). That is sound only if a skipped kind could never have changed a view: given a view in
// every status, applying any event of a skipped kind must give back the very same view. A new
// kind marked "not read" whose reducer case changes the view fails here, instead of being
// dropped in production without a word.
describe('projection: reads every kind it must', () => {
  const sub = submittedEvent('hello world', { documentId: 'd1', revision: 3, occurredAt: '2026-01-01T00:00:00.000Z', data: { containerTags: ['t1'] } });
  const samples = Object.values(sampleEvents(sub)) as DocumentEvent[];
  const base = evolve(null, sub)!;
  const views: DocumentView[] = DOCUMENT_STATUSES.map((status) => ({ ...base, status, version: 7 }));

  it('has a sample of every event type', () => {
    expect(samples.map((e) => e.type).sort()).toEqual(Object.keys(EVENT_KIND_OF).sort());
  });

  for (const event of samples) {
    const kind = EVENT_KIND_OF[event.type];
    if (READERS.projection.reads[kind]) continue;
    it(`skips ${kind} unread: it changes no view`, () => {
      for (const v of views) expect(evolve(v, event), `${kind} on a ${v.status} view`).toBe(v);
      expect(evolve(null, event)).toBeNull();
    });
  }

  it('reads every kind that changes a view', () => {
    const changing = samples.filter((e) => views.some((v) => evolve(v, e) !== v) || evolve(null, e) !== null).map((e) => EVENT_KIND_OF[e.type]);
    expect(changing.length).toBeGreaterThan(0);
    for (const kind of changing) expect(READERS.projection.reads[kind], `${kind} changes a view`).toBe(true);
  });
});
