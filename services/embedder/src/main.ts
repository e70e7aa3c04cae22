import { startWorker } from '@memstream/bus';
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
  setup: async () => {
    const embedder = createEmbedder({ kind: config.EMBEDDER, dim: config.EMBEDDING_DIM });
    log.info({ model: embedder.model, dim: embedder.dim }, 'embedder');
    return { handle: createEmbedHandler({ embedder, batch: config.EMBED_BATCH }) };
  },
});
