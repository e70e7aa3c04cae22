import path from 'node:path';
import { existsSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { createInterface } from 'node:readline/promises';
import { commandArgs } from './args.js';
import { embeddingConfigStore, type Bus } from '@memstream/bus';
import { ChunkIndexSet, SqliteChunkIndex, annDir, namedIndexPath, openNamedChunkIndex, removeAnnFiles, type ChunkIndex } from '@memstream/chunk-index';
import { DEFAULT_INDEX, RedriveStage } from '@memstream/contracts';
import { openDocumentViews, type DocumentViews } from '@memstream/views';
import { QdrantMemoryStore, SqliteMemoryStore, replayMemories as replayMemoryLog, type MemoryStore } from '@memstream/memory';
import { loadEmbeddingEnv, type Config } from './config.js';
import { progressBar } from './replay.js';
import { compareIndexes, indexedDocumentIds, rebuildIndex } from './replay-index.js';
import { countByStatus, redriveDocuments, selectDocuments, waitTerminal } from './replay-redrive.js';
import { copyIntoModel, planSwitch, switchModel } from './replay-embed.js';

/** Runs `fn` with a bus: `running` requires a memstream that is up (its services do the work). */
export type WithBus = <T>(fn: (bus: Bus) => Promise<T>, opts?: { running?: boolean }) => Promise<T>;

/**
 * The URL of the nats-server `./memstream up` runs for this data dir, if it is running: `up`
 * writes it to <data dir>/nats.url, and the server's pid file says whether it is still alive.
 */
export function runningNatsUrl(dir: string): string | null {
  try {
    const pid = Number(readFileSync(path.join(dir, 'nats', 'nats.pid'), 'utf8').trim());
    if (!pid || !readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('nats-server')) return null;
    return readFileSync(path.join(dir, 'nats.url'), 'utf8').trim() || null;
  } catch {
    return null;
  }
}

function openViews(config: Config, dir: string): Promise<DocumentViews> {
  return openDocumentViews({ sqlitePath: path.join(dir, 'views.sqlite'), ...(config.MONGODB_URL ? { mongodbUrl: config.MONGODB_URL } : {}) });
}

function indexStore(config: Config, dir: string) {
  return { dataDir: dir, qdrantUrl: config.QDRANT_URL, qdrantApiKey: config.QDRANT_API_KEY };
}

const out = (line: string) => process.stdout.write(line + '\n');

/** Each replay command's --help. */
export const REPLAY_USAGE = {
  projection: `usage: ./memstream replay projection [--swap]

Reads the whole log into a fresh view store (<data dir>/views.rebuild.sqlite) and compares it
document by document with the live view. --swap makes it the live one (stop memstream first).`,
  index: `usage: ./memstream replay index [--dry-run] [--swap]

Rebuilds the active embedding model's chunk index from the log and compares it with the live one.
--dry-run only compares; --swap makes the rebuilt index the live one (stop memstream first).`,
  redrive: `usage: ./memstream replay redrive --from <extract|chunk|embed|index>
         (--all | --tag T | --filter JSON | --failed) [--dry-run] [--yes] [--no-wait] [--wait-timeout S]

Processes the selected documents again from a stage, as a new revision (memstream must be up).
--dry-run counts them by status; otherwise it waits until they are done or failed (default 120 s).`,
  memories: `usage: ./memstream replay memories [--swap]

Reads the whole MEMORY log into a fresh memory store (<data dir>/memories.rebuild.sqlite), without
calling any extractor (each decision is in the log), and compares it memory by memory with the live
memories.sqlite. --swap makes it the live one (stop memstream first).`,
  embed: `usage: ./memstream replay embed --model <static | hashed:DIM | openai:MODEL[:DIM] | onnx:DIR> [--dry-run] [--yes] [--wait-timeout S]

Embeds every chunk with a new model into a shadow index, catches up, then switches search and new
documents to it (memstream must be up).`,
} as const;

async function confirm(question: string, yes: boolean): Promise<boolean> {
  if (yes) return true;
  if (!process.stdin.isTTY) throw new Error(`${question} — not asked without a terminal: add --yes`);
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    return /^y(es)?$/i.test((await rl.question(`${question} [y/N] `)).trim());
  } finally {
    rl.close();
  }
}

/** The embedder of a stored model (or of the environment), built the way the services build it. */
async function embedderFor(settings: Record<string, string> | undefined) {
  const { env, embedding } = await loadEmbeddingEnv();
  const merged = embedding.withModelSettings(env, settings);
  return { embedder: await embedding.loadEmbedder(embedding.embedderConfigFrom(merged)), batch: merged.EMBED_BATCH };
}

/**
 * `replay index [--dry-run] [--swap]`: rebuild the active model's chunk index from the log into
 * index.rebuild.sqlite (Qdrant: the memstream_chunks_rebuild collections) and compare it with
 * the live one; --swap makes it the live one (stop memstream first).
 */
export async function replayIndex(config: Config, dir: string, argv: string[], withBus: WithBus): Promise<number> {
  const { values } = commandArgs('replay index', REPLAY_USAGE.index, { args: argv, options: { 'dry-run': { type: 'boolean' }, swap: { type: 'boolean' } } });
  return withBus(async (bus) => {
    const { config: models } = await (await embeddingConfigStore(bus)).read();
    const active = models?.active ?? null;
    const activeName = active?.index ?? DEFAULT_INDEX;
    // After a model switch the log holds the old model's vectors for documents the switch copied: they are embedded again.
    const model = active?.settings ? await embedderFor(active.settings) : null;
    if (values['dry-run']) {
      const r = await rebuildIndex(bus, null, { progress: progressBar('replay index (dry run)', 'documents'), ...(model ? { model: model.embedder } : {}) });
      out(`would rebuild ${r.documents} documents, ${r.chunks} chunks${model ? ` (${r.reembedded} documents embedded again with ${model.embedder.model})` : ''}; ${r.skipped} in the log have nothing to index`);
      return 0;
    }
    const rebuildPath = namedIndexPath(dir, 'rebuild');
    if (!config.QDRANT_URL) {
      for (const suffix of ['', '-wal', '-shm']) rmSync(rebuildPath + suffix, { force: true });
      removeAnnFiles(rebuildPath);
    }
    const target = await openNamedChunkIndex(indexStore(config, dir), 'rebuild');
    let live: ChunkIndex | null = null;
    try {
      if (config.QDRANT_URL) for (const id of await indexedDocumentIds(bus)) await target.deleteDocument(id);
      const t0 = performance.now();
      const r = await rebuildIndex(bus, target, { progress: progressBar('replay index', 'documents'), ...(model ? { model: model.embedder, batch: model.batch } : {}) });
      out(`rebuilt ${r.documents} documents, ${r.chunks} chunks in ${((performance.now() - t0) / 1000).toFixed(1)} s${model ? ` (${r.reembedded} embedded again with ${model.embedder.model})` : ''}`);
      if (target instanceof SqliteChunkIndex) {
        // The nearest-neighbour graphs are part of the rebuilt index: built now and saved beside
        // it, so search does not build them after the swap.
        const t1 = performance.now();
        const graphs = await target.prepareAnn();
        if (graphs.length) out(`built the nearest-neighbour graph${graphs.length > 1 ? 's' : ''} (${graphs.map((g) => `${g.model}: ${g.points} vectors`).join(', ')}) in ${((performance.now() - t1) / 1000).toFixed(1)} s`);
      }
      live = await openNamedChunkIndex(indexStore(config, dir), activeName);
      const views = await openViews(config, dir);
      const ids = new Set(await indexedDocumentIds(bus));
      for await (const v of views.all()) ids.add(v.id);
      await views.close();
      const cmp = await compareIndexes(live, target, ids);
      out(
        `compared with the live index (${activeName}): ${cmp.same} equal, ${cmp.different.length} different, ${cmp.onlyInA.length} only live, ${cmp.onlyInB.length} only rebuilt; ` +
          `live ${cmp.statsA.documents} documents / ${cmp.statsA.chunks} chunks, rebuilt ${cmp.statsB.documents} / ${cmp.statsB.chunks}`,
      );
    } finally {
      await target.close();
      await live?.close();
    }
    if (values.swap) {
      if (config.QDRANT_URL) {
        out('--swap with Qdrant: the rebuilt collections are memstream_chunks_rebuild_*; point QDRANT collection names at them or copy them with a Qdrant snapshot.');
      } else {
        const livePath = namedIndexPath(dir, activeName);
        for (const suffix of ['-wal', '-shm']) rmSync(livePath + suffix, { force: true });
        renameSync(rebuildPath, livePath);
        // The graphs follow their file (a graph also records its file's identity, so a stale one is never used).
        removeAnnFiles(livePath);
        try {
          renameSync(annDir(rebuildPath), annDir(livePath));
        } catch {
          // No graph was built (an index under the size that uses one).
        }
        out(`the live index is now the rebuilt one (${livePath})`);
      }
    } else {
      out(`rebuilt index kept at ${config.QDRANT_URL ? 'collections memstream_chunks_rebuild_*' : rebuildPath}; --swap makes it the live one`);
    }
    return 0;
  });
}

/**
 * `replay redrive --from <stage> [--all | --tag T | --filter JSON | --failed] [--dry-run] [--yes]
 * [--no-wait] [--wait-timeout S]`: a new revision of each selected document, processed again
 * from `stage` (see replay-redrive.ts), then (by default) wait until all are done or failed.
 */
export async function replayRedrive(config: Config, dir: string, argv: string[], withBus: WithBus): Promise<number> {
  const { values } = commandArgs('replay redrive', REPLAY_USAGE.redrive, {
    args: argv,
    options: {
      from: { type: 'string' },
      all: { type: 'boolean' },
      tag: { type: 'string' },
      filter: { type: 'string' },
      failed: { type: 'boolean' },
      'dry-run': { type: 'boolean' },
      yes: { type: 'boolean' },
      'no-wait': { type: 'boolean' },
      'wait-timeout': { type: 'string' },
    },
  });
  const from = RedriveStage.safeParse(values.from);
  if (!from.success) throw new Error(`--from must be one of ${RedriveStage.options.join(', ')} (got ${values.from ?? 'nothing'})`);
  const waitMs = Number(values['wait-timeout'] ?? 3600) * 1000;
  if (!Number.isFinite(waitMs) || waitMs < 0) throw new Error('--wait-timeout: seconds, a number');
  const views = await openViews(config, dir);
  try {
    const docs = await selectDocuments(views, {
      ...(values.all ? { all: true } : {}),
      ...(values.tag !== undefined ? { tag: values.tag } : {}),
      ...(values.filter !== undefined ? { filter: values.filter } : {}),
      ...(values.failed ? { failed: true } : {}),
    });
    const counts = Object.entries(countByStatus(docs))
      .map(([s, n]) => `${s} ${n}`)
      .join(', ');
    out(`${docs.length} documents match${docs.length ? ` (${counts})` : ''}`);
    if (values['dry-run'] || docs.length === 0) {
      if (values['dry-run']) out(`dry run: nothing re-driven; without --dry-run they are processed again from ${from.data}`);
      return 0;
    }
    if (!(await confirm(`re-drive ${docs.length} documents from ${from.data}?`, values.yes ?? false))) {
      out('nothing re-driven');
      return 1;
    }
    return await withBus(
      async (bus) => {
        const run = await redriveDocuments(
          bus,
          docs.map((d) => d.id),
          from.data,
          progressBar('redrive', 'documents'),
        );
        out(`re-driven ${run.redriven.size} documents from ${from.data}${run.gone ? `; ${run.gone} deleted meanwhile` : ''}${run.changed ? `; ${run.changed} changed by a new submission meanwhile (processed anyway)` : ''}`);
        if (values['no-wait'] || run.redriven.size === 0) return 0;
        const w = await waitTerminal(views, run.redriven, { timeoutMs: waitMs, progress: progressBar('processing', 'documents') });
        out(`done ${w.done}, failed ${w.failed}${w.superseded ? `, superseded ${w.superseded}` : ''}${w.pending ? `, still in progress after ${waitMs / 1000} s: ${w.pending}` : ''}`);
        return w.pending ? 1 : 0;
      },
      { running: true },
    );
  } finally {
    await views.close();
  }
}

/**
 * `replay embed --model <spec> [--dry-run] [--yes] [--wait-timeout S]`: switch the embedding
 * model through a shadow index (see replay-embed.ts).
 */
export async function replayEmbed(config: Config, dir: string, argv: string[], withBus: WithBus): Promise<number> {
  const { values } = commandArgs('replay embed', REPLAY_USAGE.embed, {
    args: argv,
    options: { model: { type: 'string' }, 'dry-run': { type: 'boolean' }, yes: { type: 'boolean' }, 'wait-timeout': { type: 'string' } },
  });
  if (!values.model) throw new Error('--model <spec> is required: hashed:<dim>, static, openai:<model>[:<dim>] or onnx:<model folder>');
  const waitMs = Number(values['wait-timeout'] ?? 120) * 1000;
  const { env, embedding } = await loadEmbeddingEnv();
  const settings = embedding.modelSpecSettings(values.model, { EMBEDDING_BASE_URL: env.EMBEDDING_BASE_URL });
  const merged = embedding.withModelSettings(env, settings);
  const embedder = await embedding.loadEmbedder(embedding.embedderConfigFrom(merged));
  const envEmbedder = await embedding.loadEmbedder(embedding.embedderConfigFrom(env));
  return withBus(
    async (bus) => {
      const store = await embeddingConfigStore(bus);
      const plan = await planSwitch(store, embedder, values.model!, settings, envEmbedder);
      if (plan.current.model === embedder.model && plan.current.dim === embedder.dim) {
        out(`${embedder.model} (dim ${embedder.dim}) is already the active embedding model: nothing to do`);
        return 0;
      }
      const indexes = new ChunkIndexSet(indexStore(config, dir));
      try {
        const source = await indexes.get(plan.current.index);
        if (!plan.config) await checkEnvModel(source, bus, envEmbedder.model);
        const dry = await copyIntoModel(bus, source, null, embedder, {
          batch: merged.EMBED_BATCH,
          cache: new Map(),
          ...(plan.reused ? { targetForCounting: await indexes.get(plan.target.index) } : {}),
        });
        out(
          `switch ${plan.current.model} (index ${plan.current.index}) → ${embedder.model} (dim ${embedder.dim}, index ${plan.target.index}${plan.reused ? ', kept from before' : ', new'}): ` +
            `${dry.documents} documents, ${dry.chunks} chunks; ${dry.embeddedChunks} chunks of ${dry.embeddedDocuments} documents to embed`,
        );
        if (values['dry-run']) return 0;
        if (!(await confirm(`embed ${dry.embeddedChunks} chunks with ${embedder.model} and switch to it?`, values.yes ?? false))) {
          out('nothing changed');
          return 1;
        }
        const t0 = performance.now();
        const r = await switchModel(bus, indexes, embedder, plan, {
          batch: merged.EMBED_BATCH,
          waitMs,
          progress: (label) => progressBar(label, 'documents'),
          log: out,
        });
        const chunks = r.passes.reduce((n, p) => n + p.embeddedChunks, 0);
        out(`switched in ${((performance.now() - t0) / 1000).toFixed(1)} s: search and new documents now use ${embedder.model}; ${chunks} chunks embedded; the previous index (${plan.current.index}) is kept`);
        if (!r.settled) {
          out(`warning: the pipeline had not finished within ${waitMs / 1000} s what it began with the old model: run the same command again later to copy those documents (it resumes)`);
          return 1;
        }
        return 0;
      } finally {
        await indexes.close();
      }
    },
    { running: !values['dry-run'] },
  );
}

/**
 * Before any switch the model in use is the environment's, and the CLI reads its own: make sure
 * it is the one the services used, from what the default index holds.
 */
async function checkEnvModel(index: ChunkIndex, bus: Bus, envModel: string): Promise<void> {
  for (const id of (await indexedDocumentIds(bus)).slice(0, 20)) {
    const chunks = await index.getDocumentChunks(id);
    const other = chunks.find((c) => c.model !== envModel);
    if (other) {
      throw new Error(`the index holds vectors of ${other.model}, but this environment names ${envModel}: run the command with the services' EMBEDDER and EMBEDDING_* settings`);
    }
  }
}

/** Every memory of a store by id, as JSON (every version, forgotten or not). */
async function memoriesById(store: MemoryStore): Promise<Map<string, string>> {
  const { items } = await store.list({ containerTags: undefined, sort: 'createdAt', order: 'asc', limit: Number.MAX_SAFE_INTEGER, offset: 0 });
  return new Map(items.map((m) => [m.id, JSON.stringify(m)]));
}

/** Two memory stores memory by memory: equal, different, only in one. */
export async function compareMemoryStores(a: MemoryStore, b: MemoryStore): Promise<{ same: number; different: string[]; onlyInA: string[]; onlyInB: string[]; equalDigests: boolean }> {
  const [ma, mb] = await Promise.all([memoriesById(a), memoriesById(b)]);
  const out = { same: 0, different: [] as string[], onlyInA: [] as string[], onlyInB: [...mb.keys()].filter((id) => !ma.has(id)) };
  for (const [id, json] of ma) {
    const other = mb.get(id);
    if (other === undefined) out.onlyInA.push(id);
    else if (other === json) out.same++;
    else out.different.push(id);
  }
  return { ...out, equalDigests: (await a.digest()) === (await b.digest()) };
}

/**
 * `replay memories [--swap]`: rebuild the memory store from the MEMORY log into
 * memories.rebuild.sqlite (the fold of the commits; no extractor runs) and compare it with the
 * live memories.sqlite; --swap makes it the live one (stop memstream first). Vectors are made
 * with the environment's embedding model, like the memorizer's. With QDRANT_URL the store is
 * Qdrant's: rebuilt into the `${QDRANT_MEMORY_COLLECTION}_rebuild` collections.
 */
export async function replayMemories(config: Config, dir: string, argv: string[], withBus: WithBus): Promise<number> {
  if (config.QDRANT_URL) return replayQdrantMemories(config, config.QDRANT_URL, argv, withBus);
  const { values } = commandArgs('replay memories', REPLAY_USAGE.memories, { args: argv, options: { swap: { type: 'boolean' } } });
  const livePath = path.join(dir, 'memories.sqlite');
  const rebuildPath = path.join(dir, 'memories.rebuild.sqlite');
  const { embedder } = await embedderFor(undefined);
  return withBus(async (bus) => {
    for (const suffix of ['', '-wal', '-shm']) rmSync(rebuildPath + suffix, { force: true });
    const target = SqliteMemoryStore.open(rebuildPath, embedder);
    let live: SqliteMemoryStore | null = null;
    try {
      const t0 = performance.now();
      const commits = await replayMemoryLog(bus, target);
      out(`rebuilt the memory store from ${commits} commits in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
      if (existsSync(livePath)) {
        live = SqliteMemoryStore.open(livePath, embedder);
        const cmp = await compareMemoryStores(live, target);
        out(
          `compared with the live store: ${cmp.same} equal, ${cmp.different.length} different, ${cmp.onlyInA.length} only live, ${cmp.onlyInB.length} only rebuilt; ` +
            (cmp.equalDigests ? 'digests equal (memories and tag sequences)' : 'digests differ (a store behind the log differs in its tag sequences too)'),
        );
      } else {
        out(`no live store at ${livePath} to compare with`);
      }
    } finally {
      await target.close();
      await live?.close();
    }
    if (values.swap) {
      for (const suffix of ['-wal', '-shm']) rmSync(livePath + suffix, { force: true });
      renameSync(rebuildPath, livePath);
      out(`the live memory store is now the rebuilt one (${livePath})`);
    } else {
      out(`rebuilt store kept at ${rebuildPath}; --swap makes it the live one`);
    }
    return 0;
  });
}

/** `replay memories` with the memory store in Qdrant: the rebuild goes to collections of their own, compared with the live ones. */
async function replayQdrantMemories(config: Config, url: string, argv: string[], withBus: WithBus): Promise<number> {
  const { values } = commandArgs('replay memories', REPLAY_USAGE.memories, { args: argv, options: { swap: { type: 'boolean' } } });
  const { embedder } = await embedderFor(undefined);
  const liveName = config.QDRANT_MEMORY_COLLECTION;
  const rebuildName = `${liveName}_rebuild`;
  return withBus(async (bus) => {
    const apiKey = config.QDRANT_API_KEY;
    const stale = await QdrantMemoryStore.connect(url, embedder, { collection: rebuildName, apiKey });
    await stale.dropCollections();
    const target = await QdrantMemoryStore.connect(url, embedder, { collection: rebuildName, apiKey });
    const live = await QdrantMemoryStore.connect(url, embedder, { collection: liveName, apiKey });
    try {
      const t0 = performance.now();
      const commits = await replayMemoryLog(bus, target);
      out(`rebuilt the memory store from ${commits} commits in ${((performance.now() - t0) / 1000).toFixed(1)} s (Qdrant collections ${rebuildName}_*)`);
      const cmp = await compareMemoryStores(live, target);
      out(
        `compared with the live store (${liveName}_*): ${cmp.same} equal, ${cmp.different.length} different, ${cmp.onlyInA.length} only live, ${cmp.onlyInB.length} only rebuilt; ` +
          (cmp.equalDigests ? 'digests equal (memories and tag sequences)' : 'digests differ (a store behind the log differs in its tag sequences too)'),
      );
    } finally {
      await Promise.all([stale.close(), target.close(), live.close()]);
    }
    out(
      values.swap
        ? `--swap with Qdrant: collections cannot be renamed; start the memorizer and gateway with QDRANT_MEMORY_COLLECTION=${rebuildName} to use the rebuilt store.`
        : `rebuilt store kept in the Qdrant collections ${rebuildName}_*; QDRANT_MEMORY_COLLECTION=${rebuildName} makes the services use it`,
    );
    return 0;
  });
}
