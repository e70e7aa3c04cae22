import { lastEvent, startWorker } from '@memstream/bus';
import { EmbeddingDimensionError, createEmbedder, embedderConfigFrom, type EmbedderConfig } from '@memstream/embedder';
import { PermanentError, createLogger, errorMessage } from '@memstream/kit';
import { loadConfig } from './config.js';
import { createEmbedHandler } from './handlers/index.js';

const config = loadConfig();
const log = createLogger('embedder', { level: config.LOG_LEVEL });

const embedderConfig: EmbedderConfig = embedderConfigFrom(config);

/**
 * One request to a remote model before consuming: a wrong key, model name or dimension would
 * otherwise fail every document, so it stops the service with the server's reason instead. A
 * server that is not reachable yet is only reported: documents wait in the stream and retry.
 */
async function probe(): Promise<void> {
  if (embedderConfig.kind !== 'openai') return;
  try {
    await createEmbedder({ ...embedderConfig, maxRetries: 0 }).embed(['memstream start-up check']);
  } catch (err) {
    if (err instanceof PermanentError || err instanceof EmbeddingDimensionError) throw err;
    log.warn({ err: errorMessage(err) }, 'embedding service not answering yet: documents will be retried');
  }
}

await startWorker({
  consumer: 'embedder',
  stage: 'embedding',
  skipStale: true,
  natsUrl: config.NATS_URL,
  ackWaitMs: config.MEMSTREAM_ACK_WAIT_MS,
  concurrency: config.EMBEDDER_CONCURRENCY,
  log,
  setup: async (bus) => {
    const embedder = createEmbedder(embedderConfig);
    await probe();
    log.info({ model: embedder.model, dim: embedder.dim }, 'embedder');
    const previousVectors = async (documentId: string, model: string) => {
      const last = await lastEvent(bus, documentId, 'embedded');
      const m = new Map<string, string>();
      if (last?.event.type === 'document.embedded.v1' && last.event.data.model === model) for (const c of last.event.data.chunks) m.set(c.hash, c.vector);
      return m;
    };
    return { handle: createEmbedHandler({ embedder, batch: config.EMBED_BATCH, previousVectors }) };
  },
});
