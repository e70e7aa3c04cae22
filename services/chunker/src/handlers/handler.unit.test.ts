import { describe, expect, it } from 'vitest';
import { follow, recordingContext, submittedEvent } from '@memstream/bus';
import { PermanentError } from '@memstream/kit';
import { createChunkHandler } from './index.js';

const sub = submittedEvent('x');
const extracted = (text: string, format: 'plain' | 'markdown' | 'conversation' = 'markdown') =>
  follow(sub, 'document.extracted.v1', { title: 't', type: 'text', text, url: null, format });

describe('chunker handler', () => {
  it('given extracted text, emits chunked with hashed chunks (its status came with the extracted event: no stage-started)', async () => {
    const ctx = recordingContext();
    const text = Array.from({ length: 40 }, (_, i) => `## Section ${i}\n\nThe projection folds event ${i} into the view, and replay folds it again the same way.`).join('\n\n');
    const source = extracted(text);
    const out = (await createChunkHandler({ maxTokens: 128 })(source, ctx)) ?? [];
    expect(ctx.emitted).toEqual([]);
    expect(out).toHaveLength(1);
    const chunked = out[0]!;
    if (chunked.type !== 'document.chunked.v1') throw new Error('expected chunked');
    expect(chunked.data.tokenizer).toBe('o200k_base');
    expect(chunked.data.chunks.length).toBeGreaterThan(3);
    chunked.data.chunks.forEach((c, i) => {
      expect(c.index).toBe(i);
      expect(c.tokens).toBeLessThanOrEqual(128);
      expect(c.hash).toMatch(/^[0-9a-f]{64}$/);
    });
    expect(chunked.causationId).toBe(source.id);
  });

  it('a chunkSize carried from the submitting key’s settings wins over the service’s', async () => {
    const text = Array.from({ length: 40 }, (_, i) => `## Section ${i}\n\nThe projection folds event ${i} into the view, and replay folds it again the same way.`).join('\n\n');
    const withSize = follow(sub, 'document.extracted.v1', { title: 't', type: 'text', text, url: null, format: 'markdown', chunkSize: 64 });
    const out = (await createChunkHandler({ maxTokens: 2048 })(withSize, recordingContext())) ?? [];
    const chunked = out[0]!;
    if (chunked.type !== 'document.chunked.v1') throw new Error('expected chunked');
    expect(chunked.data.chunks.length).toBeGreaterThan(3);
    for (const c of chunked.data.chunks) expect(c.tokens).toBeLessThanOrEqual(64);
  });

  it('text that yields no chunks fails permanently', async () => {
    await expect(createChunkHandler({ maxTokens: 512 })(extracted('   \n\n  '), recordingContext())).rejects.toThrow(PermanentError);
  });
});
