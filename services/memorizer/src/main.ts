// First: the OpenTelemetry SDK starts before any application module is loaded.
import { recordMemorized } from '@memstream/telemetry';
import path from 'node:path';
import { mkdirSync } from 'node:fs';
import { kvRateLimiter, startWorker } from '@memstream/bus';
import { embedderConfigFrom, loadEmbedder, sharedRateLimitFrom } from '@memstream/embedder';
import { createLogger } from '@memstream/kit';
import { DreamGroups, MemoryLog, ensureMemoryStream, memorizeGroup, openMemoryStore, extractorFrom, extractorRateLimitFrom } from '@memstream/memory';
import { loadConfig } from './config.js';
import { createForgetHandler, createMemorizeHandler } from './handlers/index.js';
import { documentFromLog } from './adapters/document-from-log.js';

const config = loadConfig();
const log = createLogger('memorizer', { level: config.LOG_LEVEL });

await startWorker({
  consumer: 'memorizer',
  skipStale: true,
  natsUrl: config.NATS_URL,
  ackWaitMs: config.MEMSTREAM_ACK_WAIT_MS,
  concurrency: config.MEMORIZER_CONCURRENCY,
  log,
  setup: async (bus) => {
    mkdirSync(config.MEMSTREAM_DATA_DIR, { recursive: true });
    await ensureMemoryStream(bus.jsm);
    const limit = sharedRateLimitFrom(config);
    const embedder = await loadEmbedder(embedderConfigFrom(config), { rateLimiter: limit ? await kvRateLimiter(bus, limit) : undefined });
    const store = await openMemoryStore({
      sqlitePath: path.join(config.MEMSTREAM_DATA_DIR, 'memories.sqlite'),
      embedder,
      qdrantUrl: config.QDRANT_URL,
      qdrantApiKey: config.QDRANT_API_KEY,
      qdrantCollection: config.QDRANT_MEMORY_COLLECTION,
    });
    const memoryLog = new MemoryLog(bus, store);
    // The chat model's rate limit is shared by every memorizer replica, like the embedder's.
    const llmLimit = extractorRateLimitFrom(config);
    const extractor = extractorFrom(config, llmLimit ? await kvRateLimiter(bus, llmLimit) : undefined);
    log.info({ extractor: extractor.name }, 'extractor');
    const memorizing = { log: memoryLog, extractor, now: () => new Date() };
    const groups = new DreamGroups({
      windowMs: config.MEMORIZER_DREAM_WINDOW_MS,
      maxDocs: config.MEMORIZER_DREAM_MAX_DOCS,
      capacity: config.MEMORIZER_CONCURRENCY,
      run: (tag, docs) => memorizeGroup(memorizing, tag, docs),
    });
    const ports = { ...memorizing, document: documentFromLog(bus), groups, onCommitted: recordMemorized };
    return {
      handle: createMemorizeHandler(ports),
      more: [{ consumer: 'memorizerDeleted' as const, handle: createForgetHandler(ports) }],
      ready: () => store.ping(),
      close: () => store.close(),
    };
  },
});
