import { spawn } from 'node:child_process';
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectBus, dataOfRevision, decodeEvent, embeddingConfigStore, lastEvent, type Bus } from '@memstream/bus';
import { REPO_ROOT } from '@memstream/cli';
import { SqliteChunkIndex } from '@memstream/chunk-index';
import { STREAM_DOCS } from '@memstream/contracts';
import { createLogger } from '@memstream/kit';
import { SqliteDocumentViews } from '@memstream/views';
import { api, startTestStack, waitFor, type TestStack } from './support/stack.js';

/**
 * `./memstream replay index | redrive | embed` as the user runs them (the CLI as its own process)
 * against a private memstream whose services are real processes: the chunk index rebuilt from
 * the log equals the live one; re-drives take exactly the selected documents, from the chosen
 * stage; dry runs change nothing; a model switch moves search to a new model's own index.
 */
describe('replay: index rebuild, re-drive, model switch', () => {
  let stack: TestStack;
  let client: ReturnType<typeof api>;
  let bus: Bus;
  let views: SqliteDocumentViews;
  const ids: Record<string, string> = {};

  // The stack and the CLI run the hashed model rather than the default static one: its dimension
  // is a setting (EMBEDDING_DIM), which the switches below (384 → 256, a wrong 128) need.
  const HASHED = { EMBEDDER: 'hashed' };

  function cli(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
    return cliWith({}, ...args);
  }
  function cliWith(env: Record<string, string>, ...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
    return new Promise((resolve, reject) => {
      const child = spawn(process.execPath, ['--import', 'tsx', 'packages/cli/src/main.ts', 'replay', ...args], {
        cwd: REPO_ROOT,
        env: { ...process.env, NATS_URL: stack.nats.url, MEMSTREAM_DATA_DIR: stack.dataDir, LOG_LEVEL: 'warn', ...HASHED, ...env },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d) => (stdout += d));
      child.stderr.on('data', (d) => (stderr += d));
      child.once('error', reject);
      child.once('exit', (code) => resolve({ code: code ?? -1, stdout, stderr }));
    });
  }

  const view = async (id: string) => (await views.get(id))!;
  const waitTerminal = (id: string, revision: number) =>
    waitFor(`${id} terminal at revision ${revision}`, async () => {
      const v = await views.get(id);
      return v && v.revision === revision && (v.status === 'done' || v.status === 'failed') ? v : undefined;
    }, 30_000, 50);
  /** The data of a document's event of one kind and revision, from its whole history. */
  const eventOf = async (id: string, kind: string, revision: number) => {
    const c = await bus.js.consumers.get(STREAM_DOCS, { filter_subjects: `doc.${id}.${kind}` });
    const messages = await c.fetch({ max_messages: 50, expires: 2000 });
    let found: object | null = null;
    for await (const m of messages) {
      const e = await decodeEvent(bus, m.data);
      if (e.revision === revision) found = e.data as object;
      if (m.info.pending === 0) break;
    }
    return found;
  };
  const lastSeq = async () => (await bus.jsm.streams.info(STREAM_DOCS)).state.last_seq;

  beforeAll(async () => {
    stack = await startTestStack({ env: HASHED });
    client = api(stack);
    bus = await connectBus({ url: stack.nats.url, name: 'replay-test', log: createLogger('replay-test', { level: 'silent' }) });
    views = SqliteDocumentViews.open(path.join(stack.dataDir, 'views.sqlite'));
    const add = async (key: string, content: string, tag: string) => {
      const r = await client.add(content, { containerTag: tag, metadata: { key } });
      expect(r.status).toBe(200);
      ids[key] = r.body.id;
    };
    await add('a1', 'Lighthouses guide ships along rocky coasts with rotating beams of light.', 'alpha');
    await add('a2', 'Sourdough bread rises slowly thanks to wild yeast and lactic bacteria.', 'alpha');
    await add('b1', 'Glaciers carve valleys as they creep downhill under their own weight.', 'beta');
    await add('b2', 'Honeybees communicate the location of flowers with a waggle dance.', 'beta');
    // Whitespace only: the extractor fails it ("no extractable text").
    await add('bad', '   ', 'beta');
    for (const key of Object.keys(ids)) await waitTerminal(ids[key]!, 1);
    expect((await view(ids.bad!)).status).toBe('failed');
  }, 90_000);

  afterAll(async () => {
    await views?.close();
    await bus?.close();
    await stack?.teardown();
  });

  it('replay index rebuilds an index equal to the live one, vectors included', async () => {
    // Read-only towards each other: run together (each CLI start costs seconds of tsx).
    const [dry, r] = await Promise.all([cli('index', '--dry-run'), cli('index')]);
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.stdout).toMatch(/would rebuild 4 documents/);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/rebuilt 4 documents/);
    expect(r.stdout).toMatch(/4 equal, 0 different, 0 only live, 0 only rebuilt/);
    const live = SqliteChunkIndex.open(path.join(stack.dataDir, 'index.sqlite'));
    const rebuilt = SqliteChunkIndex.open(path.join(stack.dataDir, 'index.rebuild.sqlite'));
    try {
      expect(await rebuilt.stats()).toEqual(await live.stats());
      // The same vectors: a dense search ranks and scores identically in both.
      const { HashedEmbedder } = await import('../packages/embedder/src/index.js');
      const e = new HashedEmbedder({ dim: 384 });
      const [vector] = await e.embed(['bees dancing near flowers']);
      const q = { mode: 'dense' as const, vector: vector!, model: e.model, limit: 10 };
      const [a, b] = [await live.search(q), await rebuilt.search(q)];
      expect(a.length).toBe(4);
      expect(b).toEqual(a);
    } finally {
      await live.close();
      await rebuilt.close();
    }
  }, 60_000);

  it('dry runs change nothing', async () => {
    const before = await lastSeq();
    const revisions = await Promise.all(Object.values(ids).map(async (id) => (await view(id)).revision));
    const [r, e, wrongEnv] = await Promise.all([
      cli('redrive', '--from', 'extract', '--all', '--dry-run'),
      cli('embed', '--model', 'hashed:256', '--dry-run'),
      // Before any switch the CLI must be run with the services' model: another one is refused.
      cliWith({ EMBEDDING_DIM: '128' }, 'embed', '--model', 'hashed:256', '--dry-run'),
    ]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/5 documents match \(done 4, failed 1\)/);
    expect(e.code, e.stderr).toBe(0);
    expect(e.stdout).toMatch(/4 documents, \d+ chunks; \d+ chunks of 4 documents to embed/);
    expect(wrongEnv.code).toBe(1);
    expect(wrongEnv.stderr).toMatch(/the index holds vectors of hashed-ngram-v1-384, but this environment names hashed-ngram-v1-128/);
    expect(await lastSeq()).toBe(before);
    expect(await Promise.all(Object.values(ids).map(async (id) => (await view(id)).revision))).toEqual(revisions);
    expect((await (await embeddingConfigStore(bus)).read()).config).toBeNull();
    expect(readdirSync(stack.dataDir).filter((f) => /^index\.hashed/.test(f))).toEqual([]);
  }, 60_000);

  it('redrive --failed re-processes the failed documents only', async () => {
    const before = Object.fromEntries(await Promise.all(Object.entries(ids).map(async ([k, id]) => [k, (await view(id)).revision] as const)));
    const r = await cli('redrive', '--from', 'extract', '--failed', '--yes');
    expect(r.code, r.stderr + r.stdout).toBe(0);
    expect(r.stdout).toMatch(/1 documents match \(failed 1\)/);
    expect(r.stdout).toMatch(/re-driven 1 documents from extract/);
    expect(r.stdout).toMatch(/done 0, failed 1/);
    const v = await view(ids.bad!);
    expect(v.revision).toBe(before.bad! + 1);
    expect(v.status).toBe('failed');
    // Extracted again (not a copy): the extractor ran on the new revision and failed it again.
    const failed = await lastEvent(bus, ids.bad!, 'failed');
    expect(failed?.event.revision).toBe(v.revision);
    for (const k of ['a1', 'a2', 'b1', 'b2']) expect((await view(ids[k]!)).revision, k).toBe(before[k]);
  }, 60_000);

  it('redrive --tag takes that tag only, and --from embed embeds again without extracting again', async () => {
    const before = Object.fromEntries(await Promise.all(Object.entries(ids).map(async ([k, id]) => [k, (await view(id)).revision] as const)));
    const logsBefore = stack.logs.length;
    const r = await cli('redrive', '--from', 'embed', '--tag', 'alpha', '--yes');
    expect(r.code, r.stderr + r.stdout).toBe(0);
    expect(r.stdout).toMatch(/2 documents match \(done 2\)/);
    expect(r.stdout).toMatch(/done 2, failed 0/);
    for (const k of ['a1', 'a2']) {
      const id = ids[k]!;
      const v = await view(id);
      expect(v.revision, k).toBe(before[k]! + 1);
      expect(v.status).toBe('done');
      const submitted = await lastEvent(bus, id, 'submitted');
      expect(submitted?.event.type === 'document.submitted.v1' && submitted.event.data.redrive).toEqual({ from: 'embed', ofRevision: before[k] });
      // The extracted text and the chunks are the old revision's, re-emitted; the vectors are computed anew.
      const [extracted, chunked] = [await dataOfRevision(bus, id, 'extracted', v.revision), await dataOfRevision(bus, id, 'chunked', v.revision)];
      const [oldExtracted, oldChunked] = [await eventOf(id, 'extracted', before[k]!), await eventOf(id, 'chunked', before[k]!)];
      expect(extracted).toEqual({ ...oldExtracted, redrive: { from: 'embed', ofRevision: before[k] } });
      expect(chunked).toEqual({ ...oldChunked, redrive: { from: 'embed', ofRevision: before[k] } });
      const embedded = await dataOfRevision(bus, id, 'embedded', v.revision);
      expect(embedded?.computed).toBe(embedded?.chunks.length);
      const indexed = await lastEvent(bus, id, 'indexed');
      expect(indexed?.event.revision).toBe(v.revision);
    }
    const extractorLines = stack.logs.slice(logsBefore).filter((l) => l.startsWith('extractor ') && l.includes('re-emitting the extracted output'));
    expect(extractorLines).toHaveLength(2);
    const chunkerLines = stack.logs.slice(logsBefore).filter((l) => l.startsWith('chunker ') && l.includes('re-emitting the chunked output'));
    expect(chunkerLines).toHaveLength(2);
    for (const k of ['b1', 'b2', 'bad']) expect((await view(ids[k]!)).revision, k).toBe(before[k]);
    // Search still finds the re-driven documents.
    const s = await client.call('POST', '/v3/search', { q: 'sourdough yeast bread', containerTag: 'alpha' });
    expect(s.body.results[0].documentId).toBe(ids.a2);
  }, 60_000);

  it('redrive --filter --from index re-indexes the logged vectors without embedding again', async () => {
    const before = (await view(ids.b1!)).revision;
    const r = await cli('redrive', '--from', 'index', '--filter', JSON.stringify({ AND: [{ key: 'key', value: 'b1' }] }), '--yes');
    expect(r.code, r.stderr + r.stdout).toBe(0);
    expect(r.stdout).toMatch(/1 documents match \(done 1\)/);
    expect(r.stdout).toMatch(/done 1, failed 0/);
    const v = await view(ids.b1!);
    expect(v.revision).toBe(before + 1);
    const [oldEmbedded, embedded] = [await eventOf(ids.b1!, 'embedded', before), await dataOfRevision(bus, ids.b1!, 'embedded', v.revision)];
    expect(embedded).toEqual({ ...oldEmbedded, computed: 0 });
    expect((await lastEvent(bus, ids.b1!, 'indexed'))?.event.revision).toBe(v.revision);
  }, 60_000);

  it('replay embed --model hashed:256 switches search to the new model and its own index', async () => {
    // Documents keep arriving while the model is switched: each must end in the new index.
    const during: string[] = [];
    const ingest = (async () => {
      for (let i = 0; i < 30; i++) {
        during.push((await client.add(`Arriving during the switch, number ${i}: kites, tides and ${i} lanterns.`, { containerTag: 'beta' })).body.id);
        // Spread over the CLI's whole run (start-up included), so some arrive before the switch and some after.
        await new Promise((res) => setTimeout(res, 150));
      }
    })();
    const r = await cli('embed', '--model', 'hashed:256', '--yes', '--wait-timeout', '30');
    await ingest;
    console.log(r.stdout);
    expect(r.code, r.stderr + r.stdout).toBe(0);
    expect(r.stdout).toMatch(/switched in .* search and new documents now use hashed-ngram-v1-256/);
    const { config } = await (await embeddingConfigStore(bus)).read();
    expect(config?.active).toMatchObject({ model: 'hashed-ngram-v1-256', dim: 256 });
    expect(config?.previous).toMatchObject({ model: 'hashed-ngram-v1-384', dim: 384, index: 'default' });
    expect(config?.migrating).toBeNull();

    // Search answers from the new index (the gateway follows the key).
    const found = await waitFor('search on the new model', async () => {
      const s = await client.call('POST', '/v3/search', { q: 'glaciers carving valleys' });
      return s.body.results?.[0]?.documentId === ids.b1 ? s.body : undefined;
    });
    expect(found.results.map((x: { documentId: string }) => x.documentId)).toContain(ids.b1);

    // A document added after the switch is embedded with the new model into the new index.
    const later = (await client.add('Volcanoes release magma, ash and gases from deep below the crust.', { containerTag: 'beta' })).body.id as string;
    await waitTerminal(later, 1);
    expect((await view(later)).status).toBe('done');
    const emb = await lastEvent(bus, later, 'embedded');
    expect(emb?.event.type === 'document.embedded.v1' && emb.event.data.model).toBe('hashed-ngram-v1-256');
    const s2 = await client.call('POST', '/v4/search', { q: 'volcano magma ash', searchMode: 'documents' });
    expect(s2.body.results[0].documents[0].id).toBe(later);

    // The new index holds the new model's vectors only; the old one keeps the old model's, unmixed.
    const file = readdirSync(stack.dataDir).find((f) => /^index\.hashed-ngram-v1-256-[a-z0-9]+\.sqlite$/.test(f));
    expect(file).toBeDefined();
    const shadow = SqliteChunkIndex.open(path.join(stack.dataDir, file!));
    const old = SqliteChunkIndex.open(path.join(stack.dataDir, 'index.sqlite'));
    try {
      for (const key of ['a1', 'a2', 'b1', 'b2']) {
        const chunks = await shadow.getDocumentChunks(ids[key]!);
        expect(chunks.length, key).toBeGreaterThan(0);
        expect(new Set(chunks.map((c) => `${c.model}/${c.dim}`))).toEqual(new Set(['hashed-ngram-v1-256/256']));
        expect(new Set((await old.getDocumentChunks(ids[key]!)).map((c) => c.model))).toEqual(new Set(['hashed-ngram-v1-384']));
      }
      for (const id of during) {
        const v = await waitTerminal(id, 1);
        expect(v.status).toBe('done');
        const chunks = await shadow.getDocumentChunks(id);
        expect(chunks.length, id).toBe(v.chunkCount);
        expect(chunks.every((c) => c.model === 'hashed-ngram-v1-256' && c.revision === v.revision), id).toBe(true);
      }
      expect((await shadow.stats()).documents).toBe(5 + during.length);
      expect(await old.getDocumentChunks(later)).toEqual([]);
    } finally {
      await shadow.close();
      await old.close();
    }

    expect(stack.logs.some((l) => l.startsWith('gateway ') && l.includes('search uses the active embedding model') && l.includes('hashed-ngram-v1-256'))).toBe(true);

    // The switched index is still a projection of the log: rebuilt, the documents the switch
    // copied (whose logged vectors are the old model's) are embedded again with the new model.
    // And the active model again is nothing to do (read-only: run alongside).
    const [rebuilt, again] = await Promise.all([cli('index'), cli('embed', '--model', 'hashed:256', '--yes')]);
    expect(again.stdout).toMatch(/already the active embedding model/);
    console.log(rebuilt.stdout);
    expect(rebuilt.code, rebuilt.stderr).toBe(0);
    expect(rebuilt.stdout).toMatch(/rebuilt 35 documents, \d+ chunks in .* \(\d+ embedded again with hashed-ngram-v1-256\)/);
    expect(rebuilt.stdout).toMatch(/35 equal, 0 different, 0 only live, 0 only rebuilt/);
  }, 90_000);
});
