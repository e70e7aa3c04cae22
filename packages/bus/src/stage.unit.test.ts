import { describe, expect, it } from 'vitest';
import type { ChunkedData } from '@memstream/contracts';
import { follow } from './events.js';
import { stageBatchHandler, stageHandler } from './stage.js';
import { recordingContext, submittedEvent } from './testing.js';

const sub = submittedEvent('x', { revision: 5 });
const extracted = (redrive?: { from: 'extract' | 'chunk' | 'embed' | 'index'; ofRevision: number }) =>
  follow(sub, 'document.extracted.v1', { title: null, type: 'text', text: 'x', url: null, format: 'plain', ...(redrive ? { redrive } : {}) });
const prior: ChunkedData = { tokenizer: 'earlier', chunks: [{ index: 0, hash: 'h', text: 'x', tokens: 1 }] };

/** A chunker whose own work is recorded, over an earlier revision 2 whose chunks are in the log. */
function chunker(outputs: Record<number, ChunkedData> = { 2: prior }) {
  const calls: number[] = [];
  const handle = stageHandler('chunker', {
    handle: async (event) => {
      calls.push(event.revision);
      return [follow(event, 'document.chunked.v1', { tokenizer: 'now', chunks: [] })];
    },
    outputOf: async (_id, revision) => outputs[revision] ?? null,
  });
  return { handle, calls };
}

describe('a stage over the runner', () => {
  it("a later stage announces nothing: its input's arrival already set its status", async () => {
    const c = chunker();
    const ctx = recordingContext();
    const out = await c.handle(extracted(), ctx);
    expect(ctx.emitted).toEqual([]);
    expect(out).toMatchObject([{ type: 'document.chunked.v1', data: { tokenizer: 'now' } }]);
    expect(c.calls).toEqual([5]);
  });

  it('the entrance announces its status from the table before its own work', async () => {
    const ctx = recordingContext();
    const handle = stageHandler('extractor', { handle: async (e) => [follow(e, 'document.extracted.v1', { title: null, type: 'text', text: 'x', url: null, format: 'plain' })] });
    const out = await handle(sub, ctx);
    expect(ctx.emitted.map((e) => [e.type, e.data])).toEqual([['document.stage-started.v1', { stage: 'extracting' }]]);
    expect(out).toMatchObject([{ type: 'document.extracted.v1' }]);
  });

  it('a stage without a status (the indexer) announces nothing', async () => {
    const ctx = recordingContext();
    const handle = stageHandler('indexer', { handle: async () => [] });
    await handle(follow(sub, 'document.embedded.v1', { model: 'm', dim: 1, chunks: [], computed: 0 }), ctx);
    expect(ctx.emitted).toEqual([]);
  });

  it('re-driven from a later stage, re-emits the earlier output with the re-drive carried on, without working', async () => {
    const c = chunker();
    const out = await c.handle(extracted({ from: 'embed', ofRevision: 2 }), recordingContext());
    expect(out).toMatchObject([{ type: 'document.chunked.v1', revision: 5, data: { ...prior, redrive: { from: 'embed', ofRevision: 2 } } }]);
    expect(c.calls).toEqual([]);
  });

  it('re-driven from itself, or with no earlier output in the log, works again', async () => {
    const c = chunker();
    await c.handle(extracted({ from: 'chunk', ofRevision: 2 }), recordingContext());
    await c.handle(extracted({ from: 'index', ofRevision: 3 }), recordingContext());
    expect(c.calls).toEqual([5, 5]);
  });

  it('a reuse rule may refuse the earlier output (the embedder after a model switch)', async () => {
    const calls: string[] = [];
    const handle = stageHandler('embedder', {
      handle: async (e) => (calls.push('embedded again'), [follow(e, 'document.embedded.v1', { model: 'new', dim: 1, chunks: [], computed: 0 })]),
      outputOf: async () => ({ model: 'old', dim: 1, chunks: [], computed: 3 }),
      reuse: (p) => (p.model === 'new' ? { ...p, computed: 0 } : null),
    });
    const chunked = follow(sub, 'document.chunked.v1', { tokenizer: 't', chunks: [], redrive: { from: 'index', ofRevision: 2 } });
    expect(await handle(chunked, recordingContext())).toMatchObject([{ data: { model: 'new' } }]);
    expect(calls).toEqual(['embedded again']);
  });

  it('refuses an event of another type as poison', async () => {
    await expect(chunker().handle(sub, recordingContext())).rejects.toMatchObject({ failureClass: 'poison' });
  });

  it('a batch stage: the re-driven event is answered from the log, the poison one fails alone, only the rest reach the batch', async () => {
    const batches: number[][] = [];
    const handle = stageBatchHandler('chunker', {
      handleBatch: async (items) => {
        batches.push(items.map((i) => i.event.revision));
        return items.map(({ event }) => ({ status: 'fulfilled', value: [follow(event, 'document.chunked.v1', { tokenizer: 'now', chunks: [] })] }));
      },
      outputOf: async () => prior,
    });
    const other = submittedEvent('y', { revision: 7 });
    const items = [extracted({ from: 'embed', ofRevision: 2 }), sub, follow(other, 'document.extracted.v1', { title: null, type: 'text', text: 'y', url: null, format: 'plain' })].map((event) => ({
      event,
      ctx: recordingContext(),
    }));
    const out = await handle(items);
    expect(batches).toEqual([[7]]);
    expect(out[0]).toMatchObject({ status: 'fulfilled', value: [{ data: { ...prior, redrive: { from: 'embed', ofRevision: 2 } } }] });
    expect(out[1]).toMatchObject({ status: 'rejected', reason: { failureClass: 'poison' } });
    expect(out[2]).toMatchObject({ status: 'fulfilled', value: [{ type: 'document.chunked.v1', revision: 7 }] });
    // Each event's own stage-started.
    expect(items.map((i) => i.ctx.emitted.map((e) => e.type))).toEqual([[], [], []]);
  });
});
