import { afterEach, describe, expect, it } from 'vitest';
import { MemoryCandidate, type MemoryRecord } from '@memstream/contracts';
import { firstVersion } from '../resolve.js';
import type { ExtractionInput, MemoryExtractor } from './port.js';

/** What an adapter's test file hands the suite: an extractor and how to drop it. */
export interface MemoryExtractorHandle {
  extractor: MemoryExtractor;
  cleanup: () => Promise<void>;
}

const DATE = '2026-03-10T09:00:00.000Z';
const input = (text: string, extra: Partial<ExtractionInput> = {}): ExtractionInput => ({ text, format: 'plain', documentDate: DATE, entityContext: null, existing: [], ...extra });

/**
 * The MemoryExtractor contract (memory-layer.md §4): every adapter passes it — the offline rules,
 * and the chat-completions adapter against a loopback server that answers like a model. Given
 * content, then candidates the log can record: valid MemoryCandidates, self-contained statements
 * naming the subject, attributes for the facts that change, `forget` for what no longer holds,
 * nothing from an assistant's turns or from a question.
 */
export function describeMemoryExtractorContract(name: string, open: () => Promise<MemoryExtractorHandle>): void {
  describe(`MemoryExtractor contract: ${name}`, () => {
    let h: MemoryExtractorHandle | undefined;
    afterEach(async () => {
      await h?.cleanup();
      h = undefined;
    });

    it('makes valid, self-contained candidates naming the subject, with the attributes that can change', async () => {
      h = await open();
      const { candidates, tokens } = await h.extractor.extract(input('My name is Priya Raman. I live in Lisbon and work as a nurse.'));
      expect(Number.isInteger(tokens) && tokens >= 0).toBe(true);
      for (const c of candidates) expect(MemoryCandidate.parse(c)).toEqual(c);
      const home = candidates.find((c) => c.attribute?.key === 'lives_in');
      expect(home).toMatchObject({ action: 'remember', isStatic: true, attribute: { subject: 'user', value: 'Lisbon' } });
      expect(home!.memory).toContain('Priya Raman');
      expect(candidates.some((c) => c.attribute?.key === 'name')).toBe(true);
      expect(candidates.every((c) => !/\bI\b/.test(c.memory))).toBe(true);
    });

    it('names the subject from the tag’s existing memories; a negation forgets the attribute', async () => {
      h = await open();
      const name: MemoryRecord = firstVersion('mem_name', 't', { memory: 'The user is called Tomás Silva.', isStatic: true, metadata: {}, attribute: { subject: 'user', key: 'name', value: 'Tomás Silva' }, sources: [], extractor: 'x' }, DATE);
      const { candidates } = await h.extractor.extract(input('I no longer live in Lisbon. I moved to Berlin last month.', { existing: [name] }));
      expect(candidates.find((c) => c.action === 'forget')).toMatchObject({ attribute: { subject: 'user', key: 'lives_in' } });
      const moved = candidates.find((c) => c.action === 'remember' && c.attribute?.key === 'lives_in');
      expect(moved).toMatchObject({ attribute: { value: 'Berlin' } });
      expect(moved!.memory).toContain('Tomás Silva');
    });

    it('reads only the user’s turns of a conversation, and makes nothing of a question', async () => {
      h = await open();
      const convo = 'user: I work at Bosch as an engineer.\nassistant: I live in Paris and I love painting landscapes every weekend.';
      const { candidates } = await h.extractor.extract(input(convo, { format: 'conversation' }));
      expect(candidates.some((c) => c.attribute?.key === 'works_at' && c.attribute.value === 'Bosch')).toBe(true);
      expect(candidates.some((c) => /Paris|painting/.test(c.memory))).toBe(false);
      expect((await h.extractor.extract(input('Where do you think I should travel next summer?'))).candidates).toEqual([]);
    });
  });
}
