// First: the OpenTelemetry SDK starts before any application module is loaded.
import '@memstream/telemetry';
import { blobStore, dataOfRevision, startWorker } from '@memstream/bus';
import { createLogger } from '@memstream/kit';
import { fetchPolicyFrom, limitsFrom, loadConfig } from './config.js';
import { createExtractHandler } from './handlers/index.js';
import { createUrlFetcher } from './extractors/url.js';

const config = loadConfig();
const log = createLogger('extractor', { level: config.LOG_LEVEL });

await startWorker({
  consumer: 'extractor',
  // Its stage, status and stale-work rule come from its row in the pipeline table.
  natsUrl: config.NATS_URL,
  ackWaitMs: config.MEMSTREAM_ACK_WAIT_MS,
  concurrency: config.EXTRACTOR_CONCURRENCY,
  log,
  setup: async (bus) => ({
    handle: createExtractHandler({ blobs: blobStore(bus), fetchUrl: createUrlFetcher(fetchPolicyFrom(config)), limits: limitsFrom(config), extractedOf: (id, rev) => dataOfRevision(bus, id, 'extracted', rev), poisonMarker: config.MEMSTREAM_TEST_POISON_MARKER }),
  }),
});
