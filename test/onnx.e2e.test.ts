import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// Relative: the test package does not depend on @memstream/embedder; the builder needs only node:fs.
import { writeTinyModel } from '../packages/embedder/src/testing/tiny-model.js';
import { api, startTestStack, waitFor, type TestStack } from './support/stack.js';

/**
 * EMBEDDER=onnx end to end: the embedder service embeds documents and the gateway embeds queries
 * with the same local ONNX model folder (built by the test, no network), and search finds the
 * right document.
 */
describe('memstream with a local ONNX model (EMBEDDER=onnx)', () => {
  let stack: TestStack;
  let modelRoot: string;

  beforeAll(async () => {
    modelRoot = mkdtempSync(path.join(tmpdir(), 'memstream-onnx-e2e-'));
    const model = writeTinyModel(path.join(modelRoot, 'tiny-static'));
    stack = await startTestStack({ env: { EMBEDDER: 'onnx', ONNX_MODEL_DIR: model.dir } });
  });
  afterAll(async () => {
    await stack?.teardown();
    rmSync(modelRoot, { recursive: true, force: true });
  });

  it('embeds documents and queries with the model, and search ranks the matching document first', async () => {
    const http = api(stack);
    const tag = `onnx-${Date.now().toString(36)}`;
    const docs = {
      cat: 'The cat sat on the warm mat near the kitchen door.',
      bread: 'Preheat the oven and bake the bread for forty minutes until golden.',
      revenue: 'Quarterly revenue grew by twelve percent thanks to strong cloud sales.',
    };
    const ids: Record<string, string> = {};
    for (const [name, content] of Object.entries(docs)) {
      const r = await http.add(content, { containerTag: tag });
      expect(r.status, JSON.stringify(r.body)).toBeLessThan(300);
      ids[name] = r.body.id;
    }
    for (const id of Object.values(ids)) {
      await waitFor(`${id} done`, async () => ((await http.get(id)).body?.status === 'done' ? true : undefined), 30_000);
    }

    const search = await http.call('POST', '/v3/search', { q: 'bake bread in the oven', containerTag: tag });
    expect(search.status, JSON.stringify(search.body)).toBe(200);
    expect(search.body.results[0]?.documentId).toBe(ids.bread);
    const other = await http.call('POST', '/v3/search', { q: 'a cat on the kitchen mat', containerTag: tag });
    expect(other.body.results[0]?.documentId).toBe(ids.cat);

    // Both processes built the same model from the folder: the embedder says so in its log.
    const line = stack.logs.find((l) => l.startsWith('embedder') && l.includes('onnx:tiny-static:64:'));
    expect(line, stack.logs.filter((l) => l.startsWith('embedder')).join('\n')).toBeDefined();
  });

  it('a service pointed at a missing model folder stops at start with the reason, and downloads nothing', async () => {
    const missing = path.join(modelRoot, 'not-there');
    await expect(stack.start('embedder', { ONNX_MODEL_DIR: missing })).rejects.toThrow(new RegExp(`ONNX_MODEL_DIR.*${missing} does not exist`));
  });
});
