import { describe, expect, it } from 'vitest';
import type { MemoryCommit, MemoryRecord } from '@memstream/contracts';
import { evolveMemories } from './evolve.js';
import { OfflineExtractor } from './extract/offline.js';
import { resolveExtraction } from './resolve.js';

const extractor = new OfflineExtractor();

/** Given the documents of one tag in order, the store after each was extracted, resolved and applied. */
async function story(docs: Array<{ id: string; text: string; date: string; format?: 'plain' | 'conversation'; entityContext?: string }>) {
  let store = new Map<string, MemoryRecord>();
  for (const d of docs) {
    const existing = [...store.values()];
    const { candidates } = await extractor.extract({ text: d.text, format: d.format ?? 'plain', documentDate: d.date, entityContext: d.entityContext ?? null, existing });
    const changes = resolveExtraction(existing, { commitId: `c-${d.id}`, containerTag: 'priya', documentId: d.id, documentDate: d.date, metadata: {}, extractor: extractor.name, candidates, at: d.date });
    const commit: MemoryCommit = { id: `c-${d.id}`, type: 'memory.committed.v1', containerTag: 'priya', occurredAt: d.date, correlationId: d.id, cause: { kind: 'direct-write', documentId: d.id }, changes };
    store = evolveMemories(store, commit);
  }
  return [...store.values()];
}
const live = (ms: MemoryRecord[]) => ms.filter((m) => m.isLatest && !m.isForgotten);

describe('offline extraction and resolution', () => {
  it('Lisbon → Berlin: the move makes version 2 of where she lives; Lisbon stays only as its parent', async () => {
    const ms = await story([
      { id: 'd1', text: 'My name is Priya Raman. I live in Lisbon and work as a nurse at Hospital Santa Maria.', date: '2026-01-10T09:00:00.000Z' },
      { id: 'd2', text: 'I moved to Berlin last month.', date: '2026-03-05T09:00:00.000Z' },
    ]);
    const lisbon = ms.find((m) => m.memory === 'Priya Raman lives in Lisbon.')!;
    const berlin = ms.find((m) => m.memory === 'Priya Raman lives in Berlin.')!;
    expect(lisbon).toMatchObject({ isLatest: false, version: 1 });
    expect(berlin).toMatchObject({ isLatest: true, version: 2, parentMemoryId: lisbon.id, rootMemoryId: lisbon.id, relations: [{ memoryId: lisbon.id, relation: 'updates' }] });
    expect(berlin.temporalContext.eventDate?.[0]).toMatch(/^2026-02-05/);
    expect(live(ms).map((m) => m.memory)).toEqual(expect.arrayContaining(["The user's name is Priya Raman.", 'Priya Raman works as a nurse.', 'Priya Raman lives in Berlin.']));
    expect(live(ms).some((m) => m.memory.includes('Lisbon'))).toBe(false);
  });

  it('an older statement does not replace a newer one', async () => {
    const ms = await story([
      { id: 'd1', text: 'I live in Berlin.', date: '2026-03-01T00:00:00.000Z' },
      { id: 'd2', text: 'I live in Lisbon.', date: '2025-01-01T00:00:00.000Z' },
    ]);
    expect(live(ms).map((m) => m.memory)).toEqual(['The user lives in Berlin.']);
    expect(ms.find((m) => m.memory.includes('Lisbon'))).toMatchObject({ isLatest: false });
  });

  it('an attribute stated with a date is lasting: "I joined Bosch this week" does not expire', async () => {
    const ms = await story([{ id: 'd1', text: 'I joined Bosch this week. I have a dentist appointment tomorrow at noon with Dr. Weber.', date: '2026-03-02T09:00:00.000Z' }]);
    expect(ms.find((m) => m.memory === 'The user works at Bosch.')).toMatchObject({ forgetAfter: null });
    expect(ms.find((m) => m.memory.includes('dentist'))!.forgetAfter).toMatch(/^2026-03-04/);
  });

  it('the same fact again strengthens rather than duplicates', async () => {
    const ms = await story([
      { id: 'd1', text: 'I work at Siemens.', date: '2026-01-01T00:00:00.000Z' },
      { id: 'd2', text: 'As I said, I work at Siemens.', date: '2026-01-02T00:00:00.000Z' },
    ]);
    expect(ms).toHaveLength(1);
    expect(ms[0]).toMatchObject({ memory: 'The user works at Siemens.', documentIds: ['d1', 'd2'] });
  });

  it('"no longer" forgets the attribute; text similarity alone supersedes nothing', async () => {
    const ms = await story([
      { id: 'd1', text: 'I am vegetarian. I went hiking in the Alps with my brother last summer.', date: '2026-01-01T00:00:00.000Z' },
      { id: 'd2', text: "I'm no longer vegetarian. I went hiking in the Pyrenees with my brother last summer.", date: '2026-02-01T00:00:00.000Z' },
    ]);
    expect(ms.find((m) => m.memory === 'The user is vegetarian.')).toMatchObject({ isForgotten: true });
    expect(live(ms).filter((m) => m.memory.includes('hiking'))).toHaveLength(2);
  });

  it('subjects come from entityContext; assistant turns state nothing; a temporary future fact expires', async () => {
    const ms = await story([
      {
        id: 'd1',
        format: 'conversation',
        entityContext: 'Conversations with Tomás Silva, a student.',
        text: 'user: I have my chemistry exam tomorrow morning at the university.\nassistant: I hope your exam goes well and you sleep enough.',
        date: '2026-05-10T12:00:00.000Z',
      },
    ]);
    expect(ms).toHaveLength(1);
    expect(ms[0]!.memory).toBe('Tomás Silva has Tomás Silva\'s chemistry exam tomorrow morning at the university.');
    expect(ms[0]!.forgetAfter).toMatch(/^2026-05-12/);
  });
});
