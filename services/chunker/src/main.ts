// First: the OpenTelemetry SDK starts before any application module is loaded.
import '@memstream/telemetry';
import { dataOfRevision, startWorker } from '@memstream/bus';
import { createLogger } from '@memstream/kit';
import { loadConfig } from './config.js';
import { chunkText, createChunkHandler } from './handlers/index.js';
import { threadedChunker } from './adapters/chunk-thread.js';

const config = loadConfig();
const log = createLogger('chunker', { level: config.LOG_LEVEL });

await startWorker({
  consumer: 'chunker',
  // Its stage, status and stale-work rule come from its row in the pipeline table.
  natsUrl: config.NATS_URL,
  ackWaitMs: config.MEMSTREAM_ACK_WAIT_MS,
  concurrency: config.CHUNKER_CONCURRENCY,
  log,
  setup: async (bus) => {
    // Build the tokenizer now, not on the first document (it takes a moment), so the first
    // document after a start is as quick as the rest.
    chunkText('warm up the tokenizer', 'plain');
    const chunk = threadedChunker({ inlineChars: config.CHUNK_THREAD_ABOVE_CHARS });
    return {
      handle: createChunkHandler({ maxTokens: config.CHUNK_MAX_TOKENS, chunk, chunkedOf: (id, rev) => dataOfRevision(bus, id, 'chunked', rev) }),
      close: () => chunk.close(),
    };
  },
});
