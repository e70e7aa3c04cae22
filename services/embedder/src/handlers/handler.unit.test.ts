import { describe, expect, it } from 'vitest';
import { follow, recordingContext, submittedEvent } from '@memstream/bus';
import { decodeVector } from '@memstream/contracts';
import { HashedEmbedder } from '@memstream/embedder';
import { createEmbedHandler } from './index.js';

describe('embedder handler', () => {
  it('given chunks, emits stage-started(embedding) then one unit vector per chunk, batched', async () => {
    const embedder = new HashedEmbedder({ dim: 64 });
    let calls = 0;
    const counting = { model: embedder.model, dim: embedder.dim, embed: (t: string[]) => (calls++, embedder.embed(t)) };
    const sub = submittedEvent('x');
    const chunks = Array.from({ length: 5 }, (_, i) => ({ index: i, hash: String(i).repeat(64).slice(0, 64), text: `chunk number ${i} about vectors`, tokens: 5 }));
    const ctx = recordingContext();
    const out = (await createEmbedHandler({ embedder: counting, batch: 2 })(follow(sub, 'document.chunked.v1', { tokenizer: 'o200k_base', chunks }), ctx)) ?? [];
    expect(ctx.emitted.map((e) => e.data)).toEqual([{ stage: 'embedding' }]);
    expect(calls).toBe(3);
    const e = out[0]!;
    if (e.type !== 'document.embedded.v1') throw new Error('expected embedded');
    expect(e.data).toMatchObject({ model: 'hashed-ngram-v1-64', dim: 64, computed: 5 });
    expect(e.data.chunks.map((c) => c.index)).toEqual([0, 1, 2, 3, 4]);
    for (const c of e.data.chunks) {
      const v = decodeVector(c.vector);
      expect(v.length).toBe(64);
      expect(Math.hypot(...v)).toBeCloseTo(1, 5);
    }
    const again = await embedder.embed([chunks[3]!.text]);
    expect(Array.from(decodeVector(e.data.chunks[3]!.vector))).toEqual(Array.from(again[0]!));
  });
});
