import type { ConsumerName, Stage } from '@memstream/contracts';
import { errorMessage, onShutdown, type Logger } from '@memstream/kit';
import { connectBus, type Bus } from './connect.js';
import { ensureTopology } from './topology.js';
import { runConsumer, type Handler, type Outcome } from './runner.js';
import type { DocumentEvent, EventKind } from '@memstream/contracts';

export interface WorkerOptions {
  consumer: ConsumerName;
  natsUrl: string;
  log: Logger;
  concurrency: number;
  /** Override of the consumer's ack wait (MEMSTREAM_ACK_WAIT_MS). */
  ackWaitMs?: number | undefined;
  stage?: Stage;
  skipStale?: boolean;
  kinds?: readonly EventKind[];
  /**
   * Build the handler and its ports once the bus is up; `close` releases the ports at shutdown.
   * `more` are further consumers of the same service (2.9 allows one filter subject per consumer).
   */
  setup(bus: Bus): Promise<{
    handle: Handler;
    close?: () => Promise<void> | void;
    more?: Array<{ consumer: ConsumerName; handle: Handler; concurrency?: number; skipStale?: boolean }>;
  }>;
  onOutcome?: (outcome: Outcome, event: DocumentEvent | null, ms: number) => void;
}

/**
 * Start one pipeline stage as a process: connect, ensure the topology, consume, and stop in the
 * house order on SIGTERM: stop consuming → drain NATS → close stores.
 */
export async function startWorker(opts: WorkerOptions): Promise<void> {
  const { log } = opts;
  try {
    const bus = await connectBus({ url: opts.natsUrl, name: `memstream-${opts.consumer}`, log });
    // Every process applies the same topology, with the same overrides, so none undoes another's.
    await ensureTopology(bus.jsm, { ackWaitMs: opts.ackWaitMs });
    const { handle, close, more = [] } = await opts.setup(bus);
    const runner = runConsumer({
      bus,
      consumer: opts.consumer,
      log,
      handle,
      concurrency: opts.concurrency,
      ...(opts.ackWaitMs ? { ackWaitMs: opts.ackWaitMs } : {}),
      ...(opts.stage ? { stage: opts.stage } : {}),
      ...(opts.skipStale !== undefined ? { skipStale: opts.skipStale } : {}),
      ...(opts.kinds ? { kinds: opts.kinds } : {}),
      ...(opts.onOutcome ? { onOutcome: opts.onOutcome } : {}),
    });
    const others = more.map((m) =>
      runConsumer({ bus, consumer: m.consumer, log, handle: m.handle, concurrency: m.concurrency ?? opts.concurrency, ...(m.skipStale ? { skipStale: true } : {}) }),
    );
    onShutdown(log, [
      ['stop consuming', () => Promise.all([runner, ...others].map((r) => r.stop()))],
      ['drain nats', () => bus.close()],
      ['close stores', () => close?.()],
    ]);
    log.info({ consumer: opts.consumer, concurrency: opts.concurrency }, 'ready');
  } catch (err) {
    log.fatal({ err: errorMessage(err) }, 'failed to start');
    process.exit(1);
  }
}
