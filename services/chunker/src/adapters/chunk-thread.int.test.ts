import { afterAll, describe, expect, it } from 'vitest';
import { chunkText } from '../handlers/chunk.js';
import { threadedChunker } from './chunk-thread.js';

describe('chunking long texts on a worker thread', () => {
  const chunk = threadedChunker({ inlineChars: 1000 });
  afterAll(() => chunk.close());

  it('gives the same chunks as chunking inline, and keeps the main thread free meanwhile', async () => {
    const long = `marker sentence. ${'abcdefghij'.repeat(100_000)}`;
    // The main thread's event loop keeps turning while the thread chunks 1 MB: it counts its ticks.
    let ticks = 0;
    const timer = setInterval(() => ticks++, 5);
    const viaThread = await chunk(long, 'plain', { maxTokens: 512 });
    clearInterval(timer);
    expect(viaThread).toEqual(chunkText(long, 'plain', { maxTokens: 512 }));
    expect(ticks).toBeGreaterThan(0);
    // Short texts stay inline; both give chunkText's answer.
    expect(await chunk('a short note.', 'plain', { maxTokens: 512 })).toEqual(chunkText('a short note.', 'plain', { maxTokens: 512 }));
  }, 120_000);

  it("reports chunkText's own errors as a rejection, and keeps working after", async () => {
    await expect(chunk('x'.repeat(2000), 'plain', { maxTokens: 4 })).rejects.toThrow(/maxTokens must be an integer/);
    expect((await chunk('y '.repeat(2000), 'plain', { maxTokens: 64 })).length).toBeGreaterThan(1);
  }, 60_000);
});
