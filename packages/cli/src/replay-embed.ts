import { CONFIG_BUCKET, CONSUMERS, DEFAULT_INDEX, STREAM_DOCS, type EmbeddingConfig, type EmbeddingModelRef } from '@memstream/contracts';
import { embeddingConfigStore, latestRevision, type Bus, type EmbeddingConfigStore } from '@memstream/bus';
import type { ChunkIndex, ChunkIndexSet, StoredChunk } from '@memstream/chunk-index';
import { canonical } from '@memstream/views';
import type { Embedder } from '@memstream/embedder';
import { indexedDocumentIds } from './replay-index.js';
import type { Progress } from './replay.js';

/** A new chunk index's name for a model: readable, and new for every switch (an old file of that model is never reused with stale content). */
export function shadowIndexName(model: string, now = Date.now()): string {
  const slug = model.toLowerCase().replace(/[^a-z0-9_-]+/g, '-').replace(/^-+|-+$/g, '').slice(0, 60) || 'model';
  return `${slug}-${now.toString(36)}`;
}

/** The state of a switch, for the dry-run and the final report. */
export interface CopyResult {
  /** Documents the source index holds. */
  documents: number;
  chunks: number;
  /** Documents (and their chunks) embedded and written into the target now. */
  embeddedDocuments: number;
  embeddedChunks: number;
  /** Documents removed from the target because the source no longer holds them. */
  removed: number;
}

function scopeKey(c: StoredChunk): string {
  return canonical({ tags: [...c.containerTags].sort(), metadata: c.metadata });
}

/** Whether `target` already holds `source`'s chunks of this document (same revision or newer, same chunks, same tags and metadata). */
function upToDate(source: StoredChunk[], target: StoredChunk[]): boolean {
  if (target.length === 0) return false;
  if (target[0]!.revision > source[0]!.revision) return true;
  if (target[0]!.revision < source[0]!.revision || target.length !== source.length) return false;
  return source.every((c, i) => c.hash === target[i]!.hash && c.index === target[i]!.index) && scopeKey(source[0]!) === scopeKey(target[0]!);
}

/**
 * One pass of a model switch: every document the log has indexed, from the `source` index into
 * `target`, embedding its chunk texts with `embedder`. A document the target already holds at the
 * same revision (or newer: the pipeline wrote it after the switch) is skipped, so passes are
 * incremental. The target's revision check means a pass never overwrites newer work. Vectors are
 * cached by chunk hash for the run, so a text repeated across documents is embedded once.
 * `target` null: count only (dry run).
 */
export async function copyIntoModel(
  bus: Bus,
  source: ChunkIndex,
  target: ChunkIndex | null,
  embedder: Embedder,
  opts: { batch: number; cache: Map<string, Float32Array>; progress?: Progress; targetForCounting?: ChunkIndex },
): Promise<CopyResult> {
  const ids = await indexedDocumentIds(bus);
  const out: CopyResult = { documents: 0, chunks: 0, embeddedDocuments: 0, embeddedChunks: 0, removed: 0 };
  const compareWith = target ?? opts.targetForCounting ?? null;
  let n = 0;
  for (const documentId of ids) {
    n++;
    if (n % 10 === 0) opts.progress?.(n, ids.length);
    const src = await source.getDocumentChunks(documentId);
    const dst = compareWith ? await compareWith.getDocumentChunks(documentId) : [];
    if (src.length === 0) {
      // Gone from the source (deleted) but still in the target: remove it there too.
      if (dst.length > 0 && target && (await latestRevision(bus, documentId)).deleted) {
        await target.deleteDocument(documentId);
        out.removed++;
      }
      continue;
    }
    out.documents++;
    out.chunks += src.length;
    if (upToDate(src, dst)) continue;
    out.embeddedDocuments++;
    out.embeddedChunks += src.length;
    if (!target) continue;
    const todo = [...new Set(src.filter((c) => !opts.cache.has(c.hash)).map((c) => c.hash))];
    const textOf = new Map(src.map((c) => [c.hash, c.text]));
    // Bounded: the cache only saves work for texts repeated across documents and passes.
    if (opts.cache.size > 20_000) opts.cache.clear();
    for (let i = 0; i < todo.length; i += opts.batch) {
      const hashes = todo.slice(i, i + opts.batch);
      const vectors = await embedder.embed(hashes.map((h) => textOf.get(h)!));
      hashes.forEach((h, j) => opts.cache.set(h, vectors[j]!));
    }
    const first = src[0]!;
    await target.replaceDocument({
      documentId,
      revision: first.revision,
      model: embedder.model,
      dim: embedder.dim,
      containerTags: first.containerTags,
      metadata: first.metadata,
      chunks: src.map((c) => ({ index: c.index, hash: c.hash, text: c.text, vector: opts.cache.get(c.hash)! })),
    });
    // Deleted while we wrote: the gateway removed its chunks before our write landed.
    if ((await latestRevision(bus, documentId)).deleted) await target.deleteDocument(documentId);
  }
  opts.progress?.(ids.length, ids.length);
  return out;
}

/**
 * Wait until a consumer has finished every message up to stream sequence `seq` (its ack floor is
 * past it, or it has nothing pending at all). False when `timeoutMs` passes first.
 */
export async function waitConsumerPast(bus: Bus, durable: string, seq: number, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const info = await bus.jsm.consumers.info(STREAM_DOCS, durable);
    if (info.ack_floor.stream_seq >= seq || (info.num_pending === 0 && info.num_ack_pending === 0)) return true;
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 200));
  }
}

export interface SwitchPlan {
  config: EmbeddingConfig | null;
  revision: number;
  current: EmbeddingModelRef;
  target: EmbeddingModelRef;
  /** The target index exists from before (a resumed switch, or a switch back to the previous model). */
  reused: boolean;
}

/**
 * Decide a switch to `embedder` (made from `settings`, given as `spec`): the model in use now
 * (the KV value, or before any switch the environment's model, with the default index) and the
 * target's index (the one of an interrupted switch to the same model, or of the previous model
 * when switching back, else a new one). `envModel`: the model the environment names, checked
 * against what the default index holds.
 */
export async function planSwitch(
  store: EmbeddingConfigStore,
  embedder: Embedder,
  spec: string,
  settings: Record<string, string>,
  envModel: { model: string; dim: number },
): Promise<SwitchPlan> {
  const { config, revision } = await store.read();
  const current: EmbeddingModelRef = config?.active ?? { model: envModel.model, dim: envModel.dim, index: DEFAULT_INDEX };
  const same = (r: EmbeddingModelRef | null | undefined) => r && r.model === embedder.model && r.dim === embedder.dim;
  const earlier = same(config?.migrating) ? config!.migrating! : same(config?.previous) ? config!.previous! : null;
  const target: EmbeddingModelRef = { model: embedder.model, dim: embedder.dim, index: earlier?.index ?? shadowIndexName(embedder.model), settings, spec };
  return { config, revision, current, target, reused: earlier !== null };
}

export interface SwitchResult {
  plan: SwitchPlan;
  passes: CopyResult[];
  /** Whether the pipeline finished, within the wait, every embedding begun before the switch. */
  settled: boolean;
}

/**
 * Switch the embedding model: fill the target model's own index (a shadow: search still uses
 * the current one) from the current index, catch up with documents indexed meanwhile, make the
 * target active in NATS KV (the embedder embeds new documents with it from the next message,
 * the indexer writes them to its index, the gateway searches it), wait until the pipeline has
 * finished what it had begun with the old model, and copy those documents over too.
 */
export async function switchModel(
  bus: Bus,
  indexes: ChunkIndexSet,
  embedder: Embedder,
  plan: SwitchPlan,
  opts: { batch: number; waitMs: number; progress?: (label: string) => Progress; log?: (line: string) => void },
): Promise<SwitchResult> {
  const kv = await embeddingConfigStore(bus);
  // Compare-and-set on every write: a concurrent `replay embed` (or an operator's edit) stops this one.
  const store = {
    write: async (config: EmbeddingConfig, expected: number) => {
      try {
        return await kv.write(config, expected);
      } catch (err) {
        if (/wrong last sequence|key exists/i.test(String((err as Error)?.message ?? err))) {
          throw new Error(`the embedding configuration (${CONFIG_BUCKET}/embedding) changed meanwhile: is another replay embed running? Nothing was switched`);
        }
        throw err;
      }
    },
  };
  const log = opts.log ?? (() => {});
  // 1. Announce the shadow: deletes and tag changes now reach it too.
  let revision = await store.write(
    { active: plan.current, migrating: plan.target, previous: plan.config?.previous ?? null, updatedAt: new Date().toISOString() },
    plan.revision,
  );
  const source = await indexes.get(plan.current.index);
  const target = await indexes.get(plan.target.index);
  const cache = new Map<string, Float32Array>();
  const passes: CopyResult[] = [];
  const pass = async (label: string) => {
    const r = await copyIntoModel(bus, source, target, embedder, { batch: opts.batch, cache, ...(opts.progress ? { progress: opts.progress(label) } : {}) });
    passes.push(r);
    log(`${label}: ${r.embeddedDocuments} documents (${r.embeddedChunks} chunks) embedded, ${r.documents - r.embeddedDocuments} already there, ${r.removed} removed`);
    return r;
  };
  // 2. Fill the shadow, then catch up with what was indexed meanwhile, until a pass finds little new.
  await pass('embed into the shadow index');
  for (let i = 0; i < 3; i++) if ((await pass('catch up')).embeddedDocuments <= 1) break;
  // 3. Switch. From here the embedder embeds with the new model (it reads the key per message).
  revision = await store.write({ active: plan.target, migrating: null, previous: plan.current, updatedAt: new Date().toISOString() }, revision);
  // 4. Embeddings begun before the switch end in the old model's index: wait for them, then copy them over.
  const switchedAt = (await bus.jsm.streams.info(STREAM_DOCS)).state.last_seq;
  // Every durable of each stage (a stage may have one per lane: docs/pipeline.md, "Fairness").
  const durables = (c: typeof CONSUMERS.embedder) => [c.durable, ...(c.bulkDurable ? [c.bulkDurable] : [])];
  let settled = true;
  for (const durable of durables(CONSUMERS.embedder)) settled = (await waitConsumerPast(bus, durable, switchedAt, opts.waitMs)) && settled;
  const embeddedBy = (await bus.jsm.streams.info(STREAM_DOCS)).state.last_seq;
  for (const durable of durables(CONSUMERS.indexer)) settled = (await waitConsumerPast(bus, durable, embeddedBy, opts.waitMs)) && settled;
  await pass('after the switch');
  return { plan, passes, settled };
}
