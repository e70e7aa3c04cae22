// First: the OpenTelemetry SDK starts before any application module is loaded.
import '@memstream/telemetry';
import { dataOfRevision, embeddingConfigStore, kvRateLimiter, lastEvent, startWorker } from '@memstream/bus';
import {
  EmbeddingDimensionError,
  createEmbedder,
  embedderConfigFrom,
  loadEmbedder,
  modelCache,
  sharedRateLimitFrom,
  type EmbedderConfig,
  type RateLimiter,
} from '@memstream/embedder';
import { PermanentError, createLogger, errorMessage } from '@memstream/kit';
import { loadConfig } from './config.js';
import { createEmbedHandler } from './handlers/index.js';

const config = loadConfig();
const log = createLogger('embedder', { level: config.LOG_LEVEL });

const embedderConfig: EmbedderConfig = embedderConfigFrom(config);
/** EMBEDDING_RPS shared with the other replicas and the gateways, through NATS KV. */
const sharedRateLimit = sharedRateLimitFrom(config);

/**
 * One request to a remote model before consuming: a wrong key, model name or dimension would
 * otherwise fail every document, so it stops the service with the server's reason instead. A
 * server that is not reachable yet is only reported: documents wait in the stream and retry.
 */
async function probe(rateLimiter: RateLimiter | undefined): Promise<void> {
  if (embedderConfig.kind !== 'openai') return;
  try {
    await createEmbedder({ ...embedderConfig, maxRetries: 0, ...(rateLimiter ? { rateLimiter } : {}) }).embed(['memstream start-up check']);
  } catch (err) {
    if (err instanceof PermanentError || err instanceof EmbeddingDimensionError) throw err;
    log.warn({ err: errorMessage(err) }, 'embedding service not answering yet: documents will be retried');
  }
}

await startWorker({
  consumer: 'embedder',
  // Its stage, status and stale-work rule come from its row in the pipeline table.
  natsUrl: config.NATS_URL,
  ackWaitMs: config.MEMSTREAM_ACK_WAIT_MS,
  concurrency: config.EMBEDDER_CONCURRENCY,
  log,
  setup: async (bus) => {
    const rateLimiter = sharedRateLimit ? await kvRateLimiter(bus, sharedRateLimit) : undefined;
    // An ONNX model is loaded here, before consuming: a broken model stops the service at start.
    const embedder = await loadEmbedder(embedderConfig, { rateLimiter });
    await probe(rateLimiter);
    log.info({ model: embedder.model, dim: embedder.dim }, 'embedder');
    const previousVectors = async (documentId: string, model: string) => {
      const last = await lastEvent(bus, documentId, 'embedded');
      const m = new Map<string, string>();
      if (last?.event.type === 'document.embedded.v1' && last.event.data.model === model) for (const c of last.event.data.chunks) m.set(c.hash, c.vector);
      return m;
    };
    // The active model can be switched at run time (memstream replay embed): read per message from NATS KV.
    const models = await embeddingConfigStore(bus);
    const modelFor = modelCache(config, embedder, async (c) => {
      const limit = sharedRateLimitFrom(c);
      return loadEmbedder(embedderConfigFrom(c), { rateLimiter: limit ? await kvRateLimiter(bus, limit) : undefined });
    });
    const activeEmbedder = async () => modelFor((await models.read()).config?.active.settings);
    const embeddedOf = (documentId: string, revision: number) => dataOfRevision(bus, documentId, 'embedded', revision);
    return { handleBatch: createEmbedHandler({ embedder, batch: config.EMBED_BATCH, previousVectors, activeEmbedder, embeddedOf }) };
  },
});
