// First: the OpenTelemetry SDK starts before any application module is loaded.
import { watchDocumentStatuses } from '@memstream/telemetry';
import path from 'node:path';
import { mkdirSync } from 'node:fs';
import { DEFAULT_BATCH, lastEvent, publishEvent, startWorker } from '@memstream/bus';
import type { DocumentSubmitted } from '@memstream/contracts';
import { createLogger } from '@memstream/kit';
import { openDocumentViews } from '@memstream/views';
import { loadConfig } from './config.js';
import { createProjectionHandler } from './handlers/index.js';
import { createStallDetector } from './handlers/stalls.js';

const config = loadConfig();
const log = createLogger('projection', { level: config.LOG_LEVEL });

await startWorker({
  consumer: 'projection',
  natsUrl: config.NATS_URL,
  ackWaitMs: config.MEMSTREAM_ACK_WAIT_MS,
  // Several at once: the compare-and-set makes concurrent writes to one document safe, and the
  // reducer gives the same view whatever order one document's events arrive in.
  concurrency: config.PROJECTION_CONCURRENCY,
  // A batch is one SQLite transaction: one at a time, so batches grow with the load (group commit).
  // Up to 128 events (the runner's default is 32): the projection reads every event of the log, a
  // document's several events fold into one write when they share a batch, and a commit has a
  // fixed cost. bench ingest --memory-docs 0, 128 against 32, order 128, 32, 128, 32 (2026-12-01):
  // the stores host 1.62 and 1.59 CPU-ms per document against 1.83 and 1.72, 386 and 396
  // documents/s against 365 and 375. At most PROJECTION_CONCURRENCY in any case.
  batch: { ...DEFAULT_BATCH, size: 128, serial: true },
  // The kinds it decodes are READERS.projection.reads (packages/contracts/src/pipeline.ts); the
  // rest (chunked and embedded, every chunk's text and vector) are acked unread.
  log,
  setup: async (bus) => {
    mkdirSync(config.MEMSTREAM_DATA_DIR, { recursive: true });
    const views = await openDocumentViews({
      sqlitePath: path.join(config.MEMSTREAM_DATA_DIR, 'views.sqlite'),
      ...(config.MONGODB_URL ? { mongodbUrl: config.MONGODB_URL } : {}),
    });
    const lastSubmitted = async (id: string) => ((await lastEvent(bus, id, 'submitted'))?.event as DocumentSubmitted | undefined) ?? null;
    const tombstoneRevision = async (id: string) => (await lastEvent(bus, id, 'deleted'))?.event.revision ?? 0;
    const stalls = createStallDetector(
      {
        views,
        lastEvent: async (id, kind) => (await lastEvent(bus, id, kind))?.event ?? null,
        publish: async (e) => void (await publishEvent(bus, e)),
        now: () => new Date(),
      },
      { leaseMs: config.STALL_LEASE_MS, maxRedrives: config.STALL_MAX_REDRIVES },
    );
    let scanning = false;
    const timer = setInterval(() => {
      if (scanning) return;
      scanning = true;
      stalls
        .scan()
        .then((r) => {
          if (r.stalled > 0) log.warn({ ...r, redrivenTotal: stalls.total() }, 'stalled documents');
        })
        .catch((err) => log.warn({ err: String(err) }, 'stall scan failed'))
        .finally(() => (scanning = false));
    }, config.STALL_SCAN_MS);
    timer.unref();
    // memstream_documents{status}: counted in the view store at each scrape.
    const unwatch = watchDocumentStatuses(() => views.countByStatus());
    return {
      handleBatch: createProjectionHandler(views, { lastSubmitted, tombstoneRevision }),
      ready: () => views.ping(),
      close: async () => {
        unwatch();
        clearInterval(timer);
        await views.close();
      },
    };
  },
});
