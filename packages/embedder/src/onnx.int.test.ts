import { mkdtempSync, rmSync, unlinkSync, writeFileSync, mkdirSync, renameSync, rmdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { checkEmbedderEnv, embedderConfigFrom, embedderEnv } from './env.js';
import { createEmbedder, loadEmbedder } from './index.js';
import { OnnxEmbedder, onnxModelDirProblems } from './onnx.js';
import { EmbeddingDimensionError } from './openai.js';
import { writeTinyModel, type TinyModel } from './testing/tiny-model.js';
import { cosine, norm } from './testing/vectors.js';

const Schema = z.object(embedderEnv).superRefine(checkEmbedderEnv);

describe('OnnxEmbedder over a model folder built by the test (transformers.js + onnxruntime, offline)', () => {
  let root: string;
  let tiny: TinyModel;
  /** The default 64 dimensions: less random overlap between unrelated words than 32. */
  let wide: TinyModel;
  let embedder: OnnxEmbedder;
  // Any attempt to reach the network (the Hugging Face Hub) goes through fetch: count them.
  const realFetch = globalThis.fetch;
  const fetched: string[] = [];

  beforeAll(async () => {
    globalThis.fetch = (async (input: Parameters<typeof fetch>[0]) => {
      fetched.push(String(input instanceof Request ? input.url : input));
      throw new Error('network access attempted in an offline test');
    }) as typeof fetch;
    root = mkdtempSync(path.join(tmpdir(), 'memstream-onnx-'));
    tiny = writeTinyModel(path.join(root, 'tiny-static'), { dim: 32 });
    wide = writeTinyModel(path.join(root, 'tiny-wide'));
    embedder = await OnnxEmbedder.load({ modelDir: tiny.dir, batchSize: 3 });
  });
  afterAll(() => {
    globalThis.fetch = realFetch;
    rmSync(root, { recursive: true, force: true });
  });

  it('reads the dimension from the model and names the model after folder, dim and file contents', async () => {
    expect(embedder.dim).toBe(32);
    expect(embedder.model).toMatch(/^onnx:tiny-static:32:[0-9a-f]{12}$/);
    // Same files elsewhere: same fingerprint. Different weights in a same-named folder: another model.
    const copy = writeTinyModel(path.join(root, 'copy', 'tiny-static'), { dim: 32 });
    expect((await OnnxEmbedder.load({ modelDir: copy.dir })).model).toBe(embedder.model);
    const other = writeTinyModel(path.join(root, 'other', 'tiny-static'), { dim: 48 });
    const e48 = await OnnxEmbedder.load({ modelDir: other.dir });
    expect(e48.dim).toBe(48);
    expect(e48.model).not.toBe(embedder.model);
  });

  it('returns one unit Float32Array of the model dimension per text, in input order', async () => {
    const texts = ['The cat sat on the mat.', '', 'a', 'Quarterly revenue grew by twelve percent thanks to cloud sales.', 'x'.repeat(3000), 'Événements indexés'];
    const vectors = await embedder.embed(texts);
    expect(vectors).toHaveLength(texts.length);
    for (const v of vectors) {
      expect(v).toBeInstanceOf(Float32Array);
      expect(v.length).toBe(32);
      expect(norm(v)).toBeCloseTo(1, 5);
    }
    // Order: each text's vector equals the one it gets alone.
    for (const [i, t] of texts.entries()) {
      const [alone] = await embedder.embed([t]);
      expect(cosine(vectors[i], alone)).toBeCloseTo(1, 5);
    }
  });

  it('is deterministic across calls, batch sizes and instances', async () => {
    const texts = Array.from({ length: 10 }, (_, i) => `document ${i} about vectors and the index ${'search '.repeat(i)}`);
    const first = await embedder.embed(texts);
    const second = await embedder.embed(texts);
    const oneBatch = await OnnxEmbedder.load({ modelDir: tiny.dir, batchSize: 64 });
    const third = await oneBatch.embed(texts);
    // Concurrent calls (EMBEDDER_CONCURRENCY documents at once) share one session.
    const [c1, c2] = await Promise.all([embedder.embed(texts), embedder.embed([...texts].reverse())]);
    for (let i = 0; i < texts.length; i++) {
      expect(Array.from(second[i]!)).toEqual(Array.from(first[i]!));
      expect(Array.from(c1[i]!)).toEqual(Array.from(first[i]!));
      expect(Array.from(c2[texts.length - 1 - i]!)).toEqual(Array.from(first[i]!));
      // Padding to a batch's longest text changes nothing but float rounding.
      for (let j = 0; j < 32; j++) expect(third[i]![j]).toBeCloseTo(first[i]![j]!, 5);
    }
  });

  it('scores texts sharing words above unrelated ones', async () => {
    const cases = [
      ['The cat sat on the warm mat near the kitchen door.', 'A cat was sitting on the mat by the kitchen door.', 'Quarterly revenue grew thanks to strong cloud sales.'],
      ['Reset your password from the account settings page.', 'You forgot your password? Change it on the settings page.', 'The hiking trail climbs through pine forest to the ridge.'],
      ['The chunker splits markdown documents at headings.', 'Markdown documents are split by the chunker.', 'Preheat the oven and bake the bread for forty minutes.'],
    ] as const;
    const e = await OnnxEmbedder.load({ modelDir: wide.dir });
    expect(e.dim).toBe(64);
    for (const [text, close, far] of cases) {
      const [a, b, c] = await e.embed([text, close, far]);
      const near = cosine(a, b);
      const away = cosine(a, c);
      console.log(`cos(close)=${near.toFixed(3)} cos(unrelated)=${away.toFixed(3)}  ${text}`);
      expect(near, text).toBeGreaterThan(away + 0.2);
    }
  });

  it('embeds a large call in batches of batchSize', async () => {
    const texts = Array.from({ length: 11 }, (_, i) => `text number ${i}`);
    const spy = await OnnxEmbedder.load({ modelDir: tiny.dir, batchSize: 4 });
    const extractor = (spy as unknown as { extractor: (t: string[], o: unknown) => Promise<unknown> }).extractor;
    const sizes: number[] = [];
    (spy as unknown as { extractor: unknown }).extractor = (t: string[], o: unknown) => (sizes.push(t.length), extractor(t, o));
    const out = await spy.embed(texts);
    expect(out).toHaveLength(11);
    expect(sizes).toEqual([4, 4, 3]);
  });

  it('loads optimum’s layout (model.onnx at the top of the folder) too', async () => {
    const flat = writeTinyModel(path.join(root, 'flat'), { dim: 32 });
    renameSync(path.join(flat.dir, 'onnx', 'model.onnx'), path.join(flat.dir, 'model.onnx'));
    rmdirSync(path.join(flat.dir, 'onnx'));
    const e = await loadEmbedder({ kind: 'onnx', modelDir: flat.dir });
    const [a] = await e.embed(['the cat sat on the mat']);
    const [b] = await embedder.embed(['the cat sat on the mat']);
    expect(cosine(a, b)).toBeCloseTo(1, 5);
  });

  it('loads weights kept in an external onnx/model.onnx_data file (large exports)', async () => {
    const ext = writeTinyModel(path.join(root, 'external'), { dim: 32, externalData: true });
    const e = await OnnxEmbedder.load({ modelDir: ext.dir });
    const [a] = await e.embed(['the cat sat on the mat']);
    const [b] = await embedder.embed(['the cat sat on the mat']);
    expect(cosine(a, b)).toBeCloseTo(1, 5);
  });

  it('checks EMBEDDING_DIM against the model', async () => {
    await expect(OnnxEmbedder.load({ modelDir: tiny.dir, dim: 384 })).rejects.toThrow(EmbeddingDimensionError);
    await expect(OnnxEmbedder.load({ modelDir: tiny.dir, dim: 384 })).rejects.toThrow(/returns 32-dimensional vectors but EMBEDDING_DIM is 384/);
    expect((await OnnxEmbedder.load({ modelDir: tiny.dir, dim: 32 })).dim).toBe(32);
  });

  it('honours sentence-transformers’ 1_Pooling/config.json (cls pooling gives other vectors than mean)', async () => {
    const cls = writeTinyModel(path.join(root, 'cls'), { dim: 32 });
    mkdirSync(path.join(cls.dir, '1_Pooling'));
    writeFileSync(path.join(cls.dir, '1_Pooling', 'config.json'), JSON.stringify({ word_embedding_dimension: 32, pooling_mode_cls_token: true, pooling_mode_mean_tokens: false }));
    const e = await OnnxEmbedder.load({ modelDir: cls.dir });
    // With cls pooling every text is its [CLS] row: all texts get the same vector.
    const [a, b] = await e.embed(['the cat sat on the mat', 'quarterly revenue grew']);
    expect(cosine(a, b)).toBeCloseTo(1, 5);
    const [m1, m2] = await embedder.embed(['the cat sat on the mat', 'quarterly revenue grew']);
    expect(cosine(m1, m2)).toBeLessThan(0.9);
  });

  it('refuses a missing or incomplete model folder with the path, at config time and at load, and never downloads', async () => {
    const missing = path.join(root, 'no-such-model');
    expect(onnxModelDirProblems(missing)).toEqual([`${missing} does not exist`]);
    await expect(OnnxEmbedder.load({ modelDir: missing })).rejects.toThrow(`ONNX model folder unusable: ${missing} does not exist`);

    const partial = writeTinyModel(path.join(root, 'partial'), { dim: 32 }).dir;
    unlinkSync(path.join(partial, 'tokenizer.json'));
    unlinkSync(path.join(partial, 'onnx', 'model.onnx'));
    const problems = onnxModelDirProblems(partial);
    expect(problems).toEqual([
      `tokenizer.json is missing from ${partial}`,
      `neither onnx/model.onnx nor model.onnx is in ${partial} (an fp32 export is needed)`,
    ]);
    await expect(loadEmbedder({ kind: 'onnx', modelDir: partial })).rejects.toThrow(/tokenizer\.json is missing/);

    // The service's config check: every problem listed against ONNX_MODEL_DIR before start.
    const r = Schema.safeParse({ EMBEDDER: 'onnx', ONNX_MODEL_DIR: partial });
    expect(r.success).toBe(false);
    expect(r.error?.issues.map((i) => [i.path.join('.'), i.message])).toEqual(problems.map((p) => ['ONNX_MODEL_DIR', p]));
    const unset = Schema.safeParse({ EMBEDDER: 'onnx' });
    expect(unset.error?.issues[0]?.message).toMatch(/required when EMBEDDER=onnx/);

    // A folder that passes the file check but whose graph is not ONNX: transformers.js fails, locally.
    const corrupt = writeTinyModel(path.join(root, 'corrupt'), { dim: 32 }).dir;
    writeFileSync(path.join(corrupt, 'onnx', 'model.onnx'), 'not a protobuf');
    await expect(OnnxEmbedder.load({ modelDir: corrupt })).rejects.toThrow();

    expect(fetched).toEqual([]);
  });

  it('is built from the environment by embedderConfigFrom + loadEmbedder; createEmbedder refuses it', async () => {
    const config = embedderConfigFrom(Schema.parse({ EMBEDDER: 'onnx', ONNX_MODEL_DIR: tiny.dir, EMBED_BATCH: '2' }));
    expect(config).toMatchObject({ kind: 'onnx', modelDir: tiny.dir, batchSize: 2 });
    const e = await loadEmbedder(config);
    expect(e.model).toBe(embedder.model);
    expect(() => createEmbedder(config)).toThrow(/use loadEmbedder/);
    expect(fetched).toEqual([]);
  });
});
