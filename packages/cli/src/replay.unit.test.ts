import { describe, expect, it } from 'vitest';
import { asHandler, follow, recordingContext, submittedEvent, type EmbeddingConfigStore } from '@memstream/bus';
import { encodeVector, type EmbeddedData, type EmbeddingConfig, type ExtractedData } from '@memstream/contracts';
import { SqliteDocumentViews, type DocumentView } from '@memstream/views';
import { HashedEmbedder, modelSpecSettings, withModelSettings, embedderEnv, embedderConfigFrom } from '../../embedder/src/index.js';
import { createExtractHandler } from '../../../services/extractor/src/handlers/index.js';
import { createChunkHandler } from '../../../services/chunker/src/handlers/index.js';
import { createEmbedHandler } from '../../../services/embedder/src/handlers/index.js';
import { parseFilter, selectDocuments, countByStatus } from './replay-redrive.js';
import { planSwitch, shadowIndexName } from './replay-embed.js';
import { z } from 'zod';

const noBlobs = { getStream: async () => Promise.reject(new Error('a re-drive from a later stage must not read the upload')) };
const noFetch = async () => Promise.reject(new Error('a re-drive from a later stage must not fetch'));
const extracted: ExtractedData = { title: 'Old title', type: 'text', text: 'the text extracted for revision 1', url: null, format: 'plain' };

describe('re-drive in the stages: before `from`, re-emit; from `from` on, compute', () => {
  it('the extractor re-emits the re-driven revision’s text when re-driven from a later stage', async () => {
    const sub = submittedEvent('content that would extract differently', { revision: 2, data: { redrive: { from: 'chunk', ofRevision: 1 } } });
    const asked: Array<[string, number]> = [];
    const handle = createExtractHandler({ blobs: noBlobs, fetchUrl: noFetch, extractedOf: async (id, rev) => (asked.push([id, rev]), extracted) });
    const ctx = recordingContext();
    const out = (await handle(sub, ctx)) ?? [];
    expect(asked).toEqual([[sub.documentId, 1]]);
    expect(ctx.emitted.map((e) => e.data)).toEqual([{ stage: 'extracting' }]);
    expect(out).toHaveLength(1);
    expect(out[0]).toMatchObject({ type: 'document.extracted.v1', revision: 2, data: { ...extracted, redrive: { from: 'chunk', ofRevision: 1 } } });
  });

  it('the extractor extracts again when re-driven from extract, or when the old revision has no text', async () => {
    let asked = 0;
    const handle = createExtractHandler({ blobs: noBlobs, fetchUrl: noFetch, extractedOf: async () => (asked++, null) });
    const fromExtract = submittedEvent('fresh words', { revision: 2, data: { redrive: { from: 'extract', ofRevision: 1 } } });
    const a = ((await handle(fromExtract, recordingContext())) ?? [])[0]!;
    expect(asked).toBe(0);
    expect(a).toMatchObject({ type: 'document.extracted.v1', data: { text: 'fresh words', redrive: { from: 'extract', ofRevision: 1 } } });
    const noPrior = submittedEvent('fresh words again', { revision: 2, data: { redrive: { from: 'embed', ofRevision: 1 } } });
    const b = ((await handle(noPrior, recordingContext())) ?? [])[0]!;
    expect(asked).toBe(1);
    expect(b).toMatchObject({ data: { text: 'fresh words again', redrive: { from: 'embed', ofRevision: 1 } } });
  });

  it('the chunker re-emits old chunks from embed or index, and chunks from chunk', async () => {
    const old = { tokenizer: 'o200k_base', chunks: [{ index: 0, hash: 'h'.repeat(64), text: 'old chunk', tokens: 2 }] };
    const handle = createChunkHandler({ maxTokens: 512, chunkedOf: async () => old });
    const sub = submittedEvent('x', { revision: 3 });
    for (const from of ['embed', 'index'] as const) {
      const ev = follow(sub, 'document.extracted.v1', { ...extracted, redrive: { from, ofRevision: 2 } });
      const out = ((await handle(ev, recordingContext())) ?? [])[0]!;
      expect(out).toMatchObject({ type: 'document.chunked.v1', revision: 3, data: { ...old, redrive: { from, ofRevision: 2 } } });
    }
    const ev = follow(sub, 'document.extracted.v1', { ...extracted, redrive: { from: 'chunk', ofRevision: 2 } });
    const out = ((await handle(ev, recordingContext())) ?? [])[0]!;
    if (out.type !== 'document.chunked.v1') throw new Error('expected chunked');
    expect(out.data.chunks.map((c) => c.text)).toEqual([extracted.text]);
    expect(out.data.redrive).toEqual({ from: 'chunk', ofRevision: 2 });
  });

  it('the embedder computes every vector from embed, and re-emits the old vectors from index (same model only)', async () => {
    const embedder = new HashedEmbedder({ dim: 32 });
    const chunks = [
      { index: 0, hash: 'a'.repeat(64), text: 'alpha words', tokens: 2 },
      { index: 1, hash: 'b'.repeat(64), text: 'beta words', tokens: 2 },
    ];
    const cached = new Map(chunks.map((c) => [c.hash, encodeVector(new Float32Array(32).fill(0.5))]));
    const prior: EmbeddedData = { model: embedder.model, dim: 32, computed: 2, chunks: chunks.map((c) => ({ ...c, vector: cached.get(c.hash)! })) };
    let priorModel = embedder.model;
    const handle = asHandler(createEmbedHandler({ embedder, batch: 8, previousVectors: async () => cached, embeddedOf: async () => ({ ...prior, model: priorModel }) }));
    const sub = submittedEvent('x', { revision: 4 });
    const run = async (redrive?: { from: 'extract' | 'chunk' | 'embed' | 'index'; ofRevision: number }) => {
      const out = ((await handle(follow(sub, 'document.chunked.v1', { tokenizer: 't', chunks, ...(redrive ? { redrive } : {}) }), recordingContext())) ?? [])[0]!;
      if (out.type !== 'document.embedded.v1') throw new Error('expected embedded');
      return out.data;
    };
    // A plain new revision reuses the cached vectors; a re-drive from embed does not.
    expect((await run()).computed).toBe(0);
    const fromEmbed = await run({ from: 'embed', ofRevision: 3 });
    expect(fromEmbed.computed).toBe(2);
    expect(fromEmbed.chunks[0]!.vector).not.toBe(cached.get(chunks[0]!.hash));
    expect(await run({ from: 'index', ofRevision: 3 })).toEqual({ ...prior, computed: 0 });
    // The old vectors are another model's (a switch happened since): embedded again.
    priorModel = 'another-model';
    expect((await run({ from: 'index', ofRevision: 3 })).model).toBe(embedder.model);
  });

  it('the embedder uses the active model when one is switched to', async () => {
    const env = new HashedEmbedder({ dim: 32 });
    const active = new HashedEmbedder({ dim: 48 });
    const handle = asHandler(createEmbedHandler({ embedder: env, batch: 8, activeEmbedder: async () => active }));
    const out = ((await handle(follow(submittedEvent('x'), 'document.chunked.v1', { tokenizer: 't', chunks: [{ index: 0, hash: 'c'.repeat(64), text: 'gamma', tokens: 1 }] }), recordingContext())) ?? [])[0]!;
    expect(out).toMatchObject({ data: { model: 'hashed-ngram-v1-48', dim: 48 } });
  });
});

describe('selecting documents to re-drive', () => {
  const at = (i: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, i)).toISOString();
  const doc = (id: string, i: number, over: Partial<DocumentView>): DocumentView => ({
    id,
    customId: null,
    revision: 1,
    status: 'done',
    title: null,
    type: 'text',
    content: 'c',
    summary: null,
    url: null,
    filepath: null,
    source: null,
    metadata: {},
    containerTags: [],
    taskType: 'memory',
    contentHash: null,
    error: null,
    chunkCount: 1,
    metadataVersion: 0,
    createdAt: at(i),
    updatedAt: at(i),
    version: 0,
    ...over,
  });

  it('by tag, by failure, by filter, all; never without a selector', async () => {
    const views = SqliteDocumentViews.open(':memory:');
    try {
      await views.put(doc('d1', 1, { containerTags: ['alpha'], metadata: { lang: 'en' } }), 0);
      await views.put(doc('d2', 2, { containerTags: ['alpha'], status: 'failed', metadata: { lang: 'fr' } }), 0);
      await views.put(doc('d3', 3, { containerTags: ['beta'], status: 'failed', metadata: { lang: 'en' } }), 0);
      await views.put(doc('d4', 4, { containerTags: ['beta'], status: 'embedding' }), 0);
      const ids = async (sel: Parameters<typeof selectDocuments>[1]) => (await selectDocuments(views, sel)).map((d) => d.id);
      expect(await ids({ all: true })).toEqual(['d1', 'd2', 'd3', 'd4']);
      expect(await ids({ tag: 'alpha' })).toEqual(['d1', 'd2']);
      expect(await ids({ failed: true })).toEqual(['d2', 'd3']);
      expect(await ids({ filter: '{"AND":[{"key":"lang","value":"en"}]}' })).toEqual(['d1', 'd3']);
      expect(await ids({ tag: 'beta', failed: true })).toEqual(['d3']);
      expect(countByStatus(await selectDocuments(views, { all: true }))).toEqual({ done: 1, failed: 2, embedding: 1 });
      await expect(selectDocuments(views, {})).rejects.toThrow(/--all, --tag/);
      expect(() => parseFilter('{"AND": [')).toThrow(/--filter: filters is not valid JSON/);
    } finally {
      await views.close();
    }
  });
});

describe('model specs and switch plans', () => {
  const env = z.object(embedderEnv).parse({ EMBEDDER: 'openai', EMBEDDING_MODEL: 'old-model', EMBEDDING_DIM: '768', EMBEDDING_API_KEY: 'secret' });

  it('a spec names the model; the process keeps its secrets', () => {
    expect(modelSpecSettings('hashed:256')).toEqual({ EMBEDDER: 'hashed', EMBEDDING_DIM: '256' });
    expect(modelSpecSettings('openai:text-embedding-3-small:1536', { EMBEDDING_BASE_URL: 'http://h/v1' })).toEqual({
      EMBEDDER: 'openai',
      EMBEDDING_MODEL: 'text-embedding-3-small',
      EMBEDDING_DIM: '1536',
      EMBEDDING_BASE_URL: 'http://h/v1',
    });
    expect(modelSpecSettings('onnx:/models/e5')).toEqual({ EMBEDDER: 'onnx', ONNX_MODEL_DIR: '/models/e5' });
    expect(modelSpecSettings('static')).toEqual({ EMBEDDER: 'static' });
    expect(embedderConfigFrom(withModelSettings(env, modelSpecSettings('static')))).toEqual({ kind: 'static' });
    expect(() => modelSpecSettings('static:300')).toThrow(/static takes no argument/);
    expect(() => modelSpecSettings('bert:1')).toThrow(/unknown kind bert/);
    expect(() => modelSpecSettings('onnx:')).toThrow(/expected onnx/);
    const hashed = embedderConfigFrom(withModelSettings(env, modelSpecSettings('hashed:256')));
    expect(hashed).toEqual({ kind: 'hashed', dim: 256 });
    const openai = embedderConfigFrom(withModelSettings(env, modelSpecSettings('openai:new-model:1024')));
    expect(openai).toMatchObject({ kind: 'openai', model: 'new-model', dim: 1024, apiKey: 'secret' });
    expect(() => withModelSettings(env, { EMBEDDING_API_KEY: 'x' })).toThrow(/cannot be set by a model spec/);
  });

  it('shadow index names are valid index names, new for every switch', () => {
    const a = shadowIndexName('openai:Text-Embedding-3-Small:1536', 1);
    expect(a).toMatch(/^[a-z0-9_-]{1,80}$/);
    expect(a.startsWith('openai-text-embedding-3-small-1536-')).toBe(true);
    expect(shadowIndexName('openai:Text-Embedding-3-Small:1536', 2)).not.toBe(a);
  });

  it('a switch back to the previous model reuses its index; a new model gets a new one', async () => {
    const value: EmbeddingConfig = {
      active: { model: 'hashed-ngram-v1-256', dim: 256, index: 'hashed-ngram-v1-256-x', settings: { EMBEDDER: 'hashed', EMBEDDING_DIM: '256' } },
      migrating: null,
      previous: { model: 'hashed-ngram-v1-384', dim: 384, index: 'default' },
      updatedAt: new Date().toISOString(),
    };
    const store = (config: EmbeddingConfig | null): EmbeddingConfigStore => ({
      read: async () => ({ config, revision: config ? 7 : 0 }),
      write: async () => 8,
      watch: async () => ({ stop() {} }),
    });
    const back = await planSwitch(store(value), new HashedEmbedder({ dim: 384 }), 'hashed:384', { EMBEDDER: 'hashed', EMBEDDING_DIM: '384' }, { model: 'x', dim: 1 });
    expect(back).toMatchObject({ revision: 7, reused: true, current: value.active, target: { index: 'default', model: 'hashed-ngram-v1-384' } });
    const fresh = await planSwitch(store(null), new HashedEmbedder({ dim: 128 }), 'hashed:128', {}, { model: 'hashed-ngram-v1-384', dim: 384 });
    expect(fresh.current).toEqual({ model: 'hashed-ngram-v1-384', dim: 384, index: 'default' });
    expect(fresh.reused).toBe(false);
    expect(fresh.target.index).toMatch(/^hashed-ngram-v1-128-/);
  });
});
