import { lastEvent, startWorker } from '@memstream/bus';
import { createEmbedder } from '@memstream/embedder';
import { createLogger } from '@memstream/kit';
import { loadConfig } from './config.js';
import { createEmbedHandler } from './handlers/index.js';

const config = loadConfig();
const log = createLogger('embedder', { level: config.LOG_LEVEL });

await startWorker({
  consumer: 'embedder',
  stage: 'embedding',
  skipStale: true,
  natsUrl: config.NATS_URL,
  ackWaitMs: config.MEMSTREAM_ACK_WAIT_MS,
  concurrency: config.EMBEDDER_CONCURRENCY,
  log,
  setup: async (bus) => {
    const embedder = createEmbedder({ kind: config.EMBEDDER, dim: config.EMBEDDING_DIM });
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
