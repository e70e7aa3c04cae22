import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STREAM_DEAD_LETTERS, deadLetterSubject } from '@memstream/contracts';
import { connectBus, decodeEvent, type Bus } from '@memstream/bus';
import { createLogger } from '@memstream/kit';
import { api, startTestStack, waitFor, type TestStack } from './support/stack.js';

// Test-only hook of the extractor (MEMSTREAM_TEST_POISON_MARKER): content holding it throws a
// TypeError on every attempt, as a parser bug would. Inert unless the variable is set.
const MARKER = 'POISON-7f3a9c-breaks-the-extractor';
const AROUND = 20;

/**
 * A poison document — one that breaks a stage on every delivery — must end failed as `poison`
 * with its reason, within the retry budget, copied to DEAD_LETTERS; and the documents submitted
 * just before and after it must not be held up.
 */
describe('poison: a document that breaks the extractor on every attempt', () => {
  let stack: TestStack;
  let client: ReturnType<typeof api>;
  let bus: Bus;

  beforeAll(async () => {
    stack = await startTestStack({ env: { MEMSTREAM_TEST_POISON_MARKER: MARKER } });
    client = api(stack);
    bus = await connectBus({ url: stack.nats.url, name: 'poison-test', log: createLogger('test', { level: 'silent' }) });
  });
  afterAll(async () => {
    await bus?.close();
    await stack?.teardown();
  });

  it('ends failed as poison after max_deliver attempts, dead-lettered, and the documents around it are done', async () => {
    const tag = 'poison-round';
    const t0 = Date.now();
    const before: string[] = [];
    const after: string[] = [];
    for (let i = 0; i < AROUND; i++) before.push((await client.add(`# Before ${i}\n\nA healthy document number ${i}, sent before the poison.`, { containerTag: tag })).body.id);
    const poison = await client.add(`# Poison\n\nThis document carries ${MARKER} and breaks the extractor every time.`, { containerTag: tag, customId: 'the-poison-doc' });
    expect(poison.status).toBe(200);
    const poisonId = poison.body.id as string;
    for (let i = 0; i < AROUND; i++) after.push((await client.add(`# After ${i}\n\nA healthy document number ${i}, sent after the poison.`, { containerTag: tag })).body.id);

    // The neighbours do not wait for the poison's retries.
    let neighboursMs = 0;
    await waitFor(
      'every neighbour done',
      async () => {
        for (const id of [...before, ...after]) if ((await client.get(id)).body.status !== 'done') return undefined;
        neighboursMs = Date.now() - t0;
        return true;
      },
      60_000,
      200,
    );
    expect((await client.get(poisonId)).body.status).not.toBe('done');

    // Budget: 6 deliveries with backoff 0.5, 1, 2, 4, 8 s (±20%) between them, about 16 s.
    const doc = await waitFor(
      'the poison document failed',
      async () => {
        const d = (await client.get(poisonId)).body;
        return d.status === 'failed' ? d : undefined;
      },
      60_000,
      200,
    );
    const failedMs = Date.now() - t0;
    expect(doc.error).toMatchObject({ stage: 'extracting', class: 'poison' });
    expect(doc.reason).toMatch(/test poison marker found.*\(the same error on every one of 6 attempts\)/);
    // The same through the customId, as a client that only knows its own id would ask.
    expect((await client.get('the-poison-doc')).body).toMatchObject({ id: poisonId, status: 'failed' });

    // The raw submission is kept in DEAD_LETTERS with the reason, for inspection and replay.
    const dead = await bus.jsm.streams.getMessage(STREAM_DEAD_LETTERS, { last_by_subj: deadLetterSubject('extractor', poisonId) });
    expect(dead).not.toBeNull();
    expect(dead!.header.get('Memstream-Reason')).toMatch(/test poison marker found/);
    expect(dead!.header.get('Memstream-Consumer')).toBe('extractor');
    const original = await decodeEvent(bus, dead!.data);
    expect(original).toMatchObject({ type: 'document.submitted.v1', documentId: poisonId });

    // The timeline shows the attempt and the failure; the document is not in progress any more.
    const timeline = (await client.call('GET', `/v3/documents/${poisonId}/timeline`)).body.events as Array<{ type: string }>;
    expect(timeline.map((e) => e.type)).toEqual(['document.submitted.v1', 'document.stage-started.v1', 'document.failed.v1']);
    const processing = (await client.call('GET', '/v3/documents/processing')).body;
    expect(processing.documents.map((d: { id: string }) => d.id)).not.toContain(poisonId);

    const attemptLines = stack.logs.filter((l) => l.startsWith('extractor') && l.includes(poisonId) && /failure: retrying|retries exhausted/.test(l)).length;
    console.log(
      `[poison] ${2 * AROUND} neighbours done in ${neighboursMs} ms; the poison document failed as poison after ${attemptLines} attempts in ${failedMs} ms, reason: ${doc.reason}`,
    );
    expect(attemptLines).toBe(6);
  }, 90_000);
});
