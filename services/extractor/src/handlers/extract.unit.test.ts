import { describe, expect, it } from 'vitest';
import { follow, recordingContext, submittedEvent } from '@memstream/bus';
import { PermanentError } from '@memstream/kit';
import { DEFAULT_LIMITS } from '../kinds.js';
import { htmlDepth } from '../extractors/html.js';
import { createExtractHandler, extractText, titleOf } from './index.js';

const noBlobs = { getStream: async () => null };
const noFetch = async () => {
  throw new Error('no network in this test');
};
const ports = { blobs: noBlobs, fetchUrl: noFetch, isolate: false };

describe('extractor handler', () => {
  it('given a text submission, emits stage-started(extracting) then extracted with title and format', async () => {
    const ctx = recordingContext();
    const sub = submittedEvent('# Release notes\n\nThe indexer now removes stale chunks.\n\n- faster\n- safer');
    const out = (await createExtractHandler(ports)(sub, ctx)) ?? [];
    expect(ctx.emitted.map((e) => e.type)).toEqual(['document.stage-started.v1']);
    expect(ctx.emitted[0]).toMatchObject({ documentId: sub.documentId, revision: 1, causationId: sub.id, data: { stage: 'extracting' } });
    expect(out).toHaveLength(1);
    expect(out[0]).toMatchObject({ type: 'document.extracted.v1', data: { title: 'Release notes', type: 'text', format: 'markdown' } });
  });

  it('derives the same event ids when the same message is delivered again', async () => {
    const sub = submittedEvent('plain words');
    const a = await createExtractHandler(ports)(sub, recordingContext());
    const b = await createExtractHandler(ports)(sub, recordingContext());
    expect(a?.[0]?.id).toBe(b?.[0]?.id);
    expect(a?.[0]?.id).toBe(follow(sub, 'document.extracted.v1', { title: null, type: 'text', text: '', url: null, format: 'plain' }).id);
  });

  it('fails permanently with "no extractable text" on whitespace', async () => {
    await expect(createExtractHandler(ports)(submittedEvent('  \n\t '), recordingContext())).rejects.toThrow(PermanentError);
    await expect(createExtractHandler(ports)(submittedEvent('  \n\t '), recordingContext())).rejects.toThrow('no extractable text');
  });

  it('fails permanently, saying why, when the text exceeds maxTextBytes', async () => {
    const limits = { ...DEFAULT_LIMITS, maxTextBytes: 2048 };
    const run = createExtractHandler({ ...ports, limits });
    await expect(run(submittedEvent('x'.repeat(4096)), recordingContext())).rejects.toThrow(PermanentError);
    await expect(run(submittedEvent('x'.repeat(4096)), recordingContext())).rejects.toThrow(/text is 4 KB, more than the 2 KB one document may have \(EXTRACT_MAX_TEXT_BYTES\)/);
    expect(await run(submittedEvent('x'.repeat(2000)), recordingContext())).toHaveLength(1);
  });

  it('refuses a binary upload with a reason', async () => {
    const sub = submittedEvent('', { data: { input: { kind: 'blob', key: 'k', filename: 'x.bin', mimeType: 'application/octet-stream', size: 16, sha256: 'x' } } });
    const blobs = { getStream: async () => new Blob([new Uint8Array([0x7f, 0x45, 0x4c, 0x46, 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0])]).stream() };
    await expect(createExtractHandler({ ...ports, blobs })(sub, recordingContext())).rejects.toThrow(/unsupported file type/);
  });

  it('keeps the speakers and turns of a conversation', async () => {
    const sub = submittedEvent(JSON.stringify([{ role: 'user', content: 'Where is the log?' }, { role: 'assistant', content: 'In JetStream.' }]));
    const out = (await createExtractHandler(ports)(sub, recordingContext())) ?? [];
    expect(out[0]).toMatchObject({ type: 'document.extracted.v1', data: { format: 'conversation', text: 'user: Where is the log?\n\nassistant: In JetStream.' } });
  });

  it('refuses an event of another type as poison rather than acking it unread', async () => {
    const sub = submittedEvent('x');
    const other = follow(sub, 'document.stage-started.v1', { stage: 'extracting' });
    await expect(createExtractHandler(ports)(other, recordingContext())).rejects.toMatchObject({ failureClass: 'poison' });
  });
});

describe('deeply nested HTML', () => {
  const nested = (n: number) => `<html><body>${'<div>'.repeat(n)}deep text${'</div>'.repeat(n)}</body></html>`;

  it('measures nesting depth from the tags, ignoring void and self-closed elements', () => {
    expect(htmlDepth('<p>a<br>b<img src=x><span/></p>')).toBe(1);
    expect(htmlDepth(nested(10))).toBe(12);
    expect(htmlDepth(nested(5000), 300)).toBe(300);
  });

  it('is parsed in the sandbox under its time limit, so it cannot hold the extractor for minutes', async () => {
    // 3,000 nested <div>s did not finish in 100 s in-process; in the sandbox the limit ends it.
    const handler = createExtractHandler({ blobs: noBlobs, fetchUrl: noFetch, limits: { ...DEFAULT_LIMITS, timeoutMs: 3_000 } });
    const started = Date.now();
    const err = await handler(submittedEvent(nested(3_000)), recordingContext()).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PermanentError);
    expect(String((err as Error).message)).toMatch(/took longer than 3 s/);
    expect((err as PermanentError).failureClass).toBe('poison');
    console.log(`[extractor] 3,000 nested <div>s: failed as poison after ${Date.now() - started} ms (time limit 3 s)`);
  }, 30_000);

  it('moderately deep markup still extracts', async () => {
    const out = (await createExtractHandler({ blobs: noBlobs, fetchUrl: noFetch })(submittedEvent(nested(300)), recordingContext())) ?? [];
    expect(out[0]).toMatchObject({ type: 'document.extracted.v1' });
    expect((out[0]!.data as { text: string }).text).toContain('deep text');
  }, 60_000);
});

describe('extractText', () => {
  it('normalises line ends and keeps plain text plain', () => {
    expect(extractText('one\r\ntwo\rthree')).toEqual({ title: 'one', type: 'text', text: 'one\ntwo\nthree', format: 'plain' });
  });
  it('titles come from the first heading, cut at a word', () => {
    expect(titleOf('intro line\n## The heading')).toBe('The heading');
    const long = 'word '.repeat(40);
    const t = titleOf(long)!;
    expect(t.length).toBeLessThanOrEqual(81);
    expect(t.endsWith('…')).toBe(true);
  });
});
