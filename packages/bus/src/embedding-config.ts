import { storageReplicas } from '@memstream/kit';
import { Kvm, type KV } from '@nats-io/kv';
import { CONFIG_BUCKET, EMBEDDING_CONFIG_KEY, EmbeddingConfig, type EmbeddingModelRef } from '@memstream/contracts';
import { errorMessage } from '@memstream/kit';
import type { Bus } from './connect.js';

/**
 * The active embedding model, kept in NATS KV so every process of every replica agrees on it:
 * `memstream replay embed` writes it, the embedder, indexer and gateway read it. Absent, every
 * process uses its environment's model and the default index (the state before any switch).
 */
export interface EmbeddingConfigStore {
  /** A fresh read (one round trip): the value and its KV revision (0: absent). */
  read(): Promise<{ config: EmbeddingConfig | null; revision: number }>;
  /** Compare-and-set: writes only if the key still has `expectedRevision` (0: must be absent). Returns the new revision. */
  write(config: EmbeddingConfig, expectedRevision: number): Promise<number>;
  /** Calls `onChange` with the current value, then with every change, until stopped. */
  watch(onChange: (config: EmbeddingConfig | null) => void): Promise<{ stop(): void }>;
}

/**
 * Reads that each start after their caller asked, shared between callers: a caller that arrives
 * while a read is in flight waits for the next one, which starts when that one ends and serves
 * everyone who came meanwhile. So every answer is as fresh as a read of its own (a model switch
 * is seen by every message handled after it), and a batch of documents asking at once costs two
 * reads instead of one each (the embedder and the indexer read the key for every document).
 * A read in flight for longer than `patienceMs` is not waited for: one sent just before the broker
 * went away is answered by nobody until its request times out (10 s), and the callers after it
 * would wait as long; they start a read of their own instead.
 */
export function freshReads<T>(read: () => Promise<T>, opts: { patienceMs?: number; now?: () => number } = {}): () => Promise<T> {
  const patienceMs = opts.patienceMs ?? 250;
  const now = opts.now ?? (() => performance.now());
  let current: { p: Promise<T>; at: number } | null = null;
  let next: Promise<T> | null = null;
  const start = (): Promise<T> => {
    const p = read().finally(() => {
      if (current?.p === p) current = null;
    });
    current = { p, at: now() };
    return p;
  };
  const settled = () => undefined;
  return () => {
    if (!current) return start();
    if (now() - current.at > patienceMs) {
      next = null;
      return start();
    }
    // Joins the read that starts once the one in flight (begun before this call) has ended.
    next ??= current.p.then(settled, settled).then(() => {
      next = null;
      return start();
    });
    return next;
  };
}

export async function embeddingConfigStore(bus: Bus): Promise<EmbeddingConfigStore> {
  const kv: KV = await new Kvm(bus.js).create(CONFIG_BUCKET, { history: 10, replicas: storageReplicas() });
  const parse = (bytes: Uint8Array): EmbeddingConfig | null => {
    try {
      return EmbeddingConfig.parse(JSON.parse(new TextDecoder().decode(bytes)));
    } catch (err) {
      bus.log.error({ err: errorMessage(err) }, `unreadable ${CONFIG_BUCKET}/${EMBEDDING_CONFIG_KEY}: using the environment's embedding model`);
      return null;
    }
  };
  return {
    read: freshReads(async () => {
      const e = await bus.whileConnected(() => kv.get(EMBEDDING_CONFIG_KEY));
      if (!e || e.operation !== 'PUT') return { config: null, revision: e?.revision ?? 0 };
      return { config: parse(e.value), revision: e.revision };
    }),
    async write(config, expectedRevision) {
      const body = JSON.stringify(EmbeddingConfig.parse(config));
      return expectedRevision === 0 ? kv.create(EMBEDDING_CONFIG_KEY, body) : kv.update(EMBEDDING_CONFIG_KEY, body, expectedRevision);
    },
    async watch(onChange) {
      const it = await kv.watch({ key: EMBEDDING_CONFIG_KEY });
      void (async () => {
        for await (const e of it) onChange(e.operation === 'PUT' ? parse(e.value) : null);
      })();
      return { stop: () => it.stop() };
    },
  };
}

/** The models whose indexes still receive writes: the active one, the one being built, the previous one. */
export function embeddingRefs(config: EmbeddingConfig | null): EmbeddingModelRef[] {
  if (!config) return [];
  return [config.active, ...(config.migrating ? [config.migrating] : []), ...(config.previous ? [config.previous] : [])];
}
