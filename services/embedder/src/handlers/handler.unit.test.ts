import { describe, expect, it } from 'vitest';
import { asHandler, follow, recordingContext, submittedEvent } from '@memstream/bus';
import { decodeVector } from '@memstream/contracts';
import { HashedEmbedder } from '@memstream/embedder';
import { createEmbedHandler } from './index.js';

describe('embedder handler', () => {
  it('given chunks, emits one unit vector per chunk, batched (its status came with the chunked event: no stage-started)', async () => {
    const embedder = new HashedEmbedder({ dim: 64 });
    let calls = 0;
    const counting = { model: embedder.model, dim: embedder.dim, embed: (t: string[]) => (calls++, embedder.embed(t)) };
    const sub = submittedEvent('x');
    const chunks = Array.from({ length: 5 }, (_, i) => ({ index: i, hash: String(i).repeat(64).slice(0, 64), text: `chunk number ${i} about vectors`, tokens: 5 }));
    const ctx = recordingContext();
    const out = (await asHandler(createEmbedHandler({ embedder: counting, batch: 2 }))(follow(sub, 'document.chunked.v1', { tokenizer: 'o200k_base', chunks }), ctx)) ?? [];
    expect(ctx.emitted).toEqual([]);
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

  it('embeds the chunks of a batch of documents in shared calls; when a shared call fails, each document on its own', async () => {
    const embedder = new HashedEmbedder({ dim: 16 });
    const calls: number[] = [];
    const refusing = {
      model: embedder.model,
      dim: embedder.dim,
      // A remote model that refuses any call holding the text 'refused'.
      embed: async (t: string[]) => {
        calls.push(t.length);
        if (t.some((x) => x.includes('refused'))) throw new Error('400 input refused');
        return embedder.embed(t);
      },
    };
    const doc = (text: string, n: number) =>
      follow(submittedEvent(text), 'document.chunked.v1', {
        tokenizer: 'o200k_base',
        chunks: Array.from({ length: n }, (_, i) => ({ index: i, hash: `${text}-${i}`.padEnd(64, '0'), text: `${text} ${i}`, tokens: 2 })),
      });
    const handle = createEmbedHandler({ embedder: refusing, batch: 8 });
    const ok = await handle([doc('alpha', 3), doc('beta', 2)].map((event) => ({ event, ctx: recordingContext() })));
    expect(calls).toEqual([5]);
    expect(ok.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled']);
    calls.length = 0;
    const mixed = await handle([doc('gamma', 2), doc('refused', 1)].map((event) => ({ event, ctx: recordingContext() })));
    expect(calls).toEqual([3, 2, 1]);
    expect(mixed.map((r) => r.status)).toEqual(['fulfilled', 'rejected']);
  });

  it('looks for earlier vectors only where the log may have some: a later revision, a redelivery, a re-drive', async () => {
    const embedder = new HashedEmbedder({ dim: 16 });
    const asked: string[] = [];
    const previousVectors = async (documentId: string) => (asked.push(documentId), new Map<string, string>());
    const handle = asHandler(createEmbedHandler({ embedder, batch: 8, previousVectors }));
    const chunks = [{ index: 0, hash: 'a'.repeat(64), text: 'one chunk', tokens: 2 }];
    const chunked = (over: { revision?: number; redrive?: { from: 'chunk'; ofRevision: number } } = {}) => {
      const sub = submittedEvent('x', over.revision ? { revision: over.revision } : {});
      return follow(sub, 'document.chunked.v1', { tokenizer: 'o200k_base', chunks, ...(over.redrive ? { redrive: over.redrive } : {}) });
    };
    const first = chunked();
    await handle(first, recordingContext());
    expect(asked).toEqual([]);
    const redelivered = recordingContext();
    redelivered.msg.deliveryCount = 2;
    await handle(first, redelivered);
    const second = chunked({ revision: 2 });
    await handle(second, recordingContext());
    const redriven = chunked({ redrive: { from: 'chunk', ofRevision: 1 } });
    await handle(redriven, recordingContext());
    expect(asked).toEqual([first.documentId, second.documentId, redriven.documentId]);
  });
});
