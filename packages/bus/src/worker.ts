import { createServer, type Server } from 'node:http';
import { z } from 'zod';
import { CONSUMERS, STREAM_DOCS, isStage, stageOf, type ConsumerName, type Stage } from '@memstream/contracts';
import { errorMessage, onShutdown, processWide, type Logger } from '@memstream/kit';
import { busTelemetry } from './events.js';
import { connectBus, type Bus } from './connect.js';
import { ensureTopology } from './topology.js';
import { yieldWindowFromEnv, yieldingToAdds } from './yield-to-adds.js';
import { runConsumer, type BatchHandler, type Handler, type Outcome } from './runner.js';
import type { BatchPolicy } from './pull-loop.js';
import type { DocumentEvent, EventKind } from '@memstream/contracts';

export interface WorkerOptions {
  consumer: ConsumerName;
  natsUrl: string;
  log: Logger;
  concurrency: number;
  /** Override of the consumer's ack wait (MEMSTREAM_ACK_WAIT_MS). */
  ackWaitMs?: number | undefined;
  /** What failures are blamed on. Default: a stage's own (the pipeline table); readers have none. */
  stage?: Stage;
  /** Drop stale revisions' work. Default: true for a stage, false for a reader. */
  skipStale?: boolean;
  /** How its messages are gathered into batches (default DEFAULT_BATCH; `serial` for a handler whose batch is one store transaction). */
  batch?: BatchPolicy;
  kinds?: readonly EventKind[];
  /**
   * Build the handler and its ports once the bus is up; `close` releases the ports at shutdown.
   * `more` are further consumers of the same service (2.9 allows one filter subject per consumer).
   */
  setup(bus: Bus): Promise<{
    /** Each event on its own, or (handleBatch) a batch at once. */
    handle?: Handler;
    handleBatch?: BatchHandler;
    close?: () => Promise<void> | void;
    /** Throws when a store the handler needs cannot be reached (for /readyz). */
    ready?: () => Promise<void>;
    more?: Array<{ consumer: ConsumerName; handle?: Handler; handleBatch?: BatchHandler; concurrency?: number; skipStale?: boolean }>;
    /** Stops consumers of other streams the service runs itself (the notifier's deliveries), with the rest, before NATS drains. */
    stopConsuming?: () => Promise<void>;
  }>;
  onOutcome?: (outcome: Outcome, event: DocumentEvent | null, ms: number) => void;
  /** Where /healthz, /readyz and /metrics are served; default: MEMSTREAM_OPS_PORT and MEMSTREAM_OPS_HOST. */
  ops?: { port: number; host: string };
}

/**
 * The ops port's settings. Read here rather than in each service's config.ts so that every
 * worker, present and future, serves its probes on the same variables without wiring.
 */
const OpsEnv = z.object({
  /** The worker's /healthz, /readyz and /metrics port; 0 picks a free one (logged in the ready line). */
  MEMSTREAM_OPS_PORT: z.coerce.number().int().min(0).max(65535).default(9464),
  /** Its bind address: MEMSTREAM_OPS_HOST, else MEMSTREAM_HOST (0.0.0.0 in a container), else loopback. */
  MEMSTREAM_OPS_HOST: z.string().min(1).optional(),
  MEMSTREAM_HOST: z.string().min(1).optional(),
});

export function opsAddressFromEnv(env: NodeJS.ProcessEnv = process.env): { port: number; host: string } {
  const r = OpsEnv.safeParse(env);
  if (!r.success) throw new Error(`invalid configuration:\n${r.error.issues.map((i) => `  ${i.path.join('.')}: ${i.message}`).join('\n')}`);
  return { port: r.data.MEMSTREAM_OPS_PORT, host: r.data.MEMSTREAM_OPS_HOST ?? r.data.MEMSTREAM_HOST ?? '127.0.0.1' };
}

/** Resolve within `ms` or fail: a broker that went away makes requests hang rather than fail (for /readyz). */
export function within<T>(ms: number, what: string, p: Promise<T>): Promise<T> {
  let t: NodeJS.Timeout | undefined;
  return Promise.race([
    p.finally(() => clearTimeout(t)),
    new Promise<never>((_, reject) => {
      t = setTimeout(() => reject(new Error(`${what} did not answer within ${ms} ms`)), ms);
    }),
  ]);
}

export interface OpsServer {
  server: Server;
  url: string;
  port: number;
}

/**
 * A worker's small HTTP port: GET /healthz (the process answers: liveness), GET /readyz (`ready`
 * resolves: broker and stores reachable, 503 otherwise), GET /metrics (Prometheus, from the
 * installed telemetry). Errors are `{error, details}`.
 */
export async function startOpsServer(opts: { port: number; host: string; ready: () => Promise<void> }): Promise<OpsServer> {
  const json = (res: import('node:http').ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' });
    res.end(JSON.stringify(body));
  };
  const server = createServer((req, res) => {
    const url = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' && req.method !== 'HEAD') return json(res, 405, { error: 'Method not allowed', details: `${req.method} ${url}: only GET` });
    if (url === '/healthz') return json(res, 200, { status: 'ok' });
    if (url === '/readyz') {
      opts.ready().then(
        () => json(res, 200, { status: 'ready' }),
        (err) => json(res, 503, { error: 'Not ready', details: errorMessage(err) }),
      );
      return;
    }
    if (url === '/metrics') {
      busTelemetry()
        .metrics(req.headers.authorization)
        .then(
          (m) => {
            res.writeHead(m.status, { 'content-type': m.contentType, 'cache-control': 'no-store' });
            res.end(m.body);
          },
          (err) => json(res, 500, { error: 'Metrics failed', details: errorMessage(err) }),
        );
      return;
    }
    json(res, 404, { error: 'Not found', details: `${url}: the ops port serves /healthz, /readyz and /metrics` });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const addr = server.address();
  const port = typeof addr === 'object' && addr ? addr.port : opts.port;
  const host = opts.host.includes(':') ? `[${opts.host}]` : opts.host;
  return { server, port, url: `http://${host}:${port}` };
}

/** One worker of the process, as its ops port sees it. */
interface OpsMember {
  state: 'starting' | 'running' | 'stopping';
  checks: () => Promise<void>;
}

/**
 * The process's ops port, shared by every worker it hosts (one, or several under a worker host:
 * packages/cli/src/host.ts): opened by the first, /readyz ready only while every one of them is
 * running and its broker and stores answer (kit's processWide, like the shutdown).
 */
interface ProcessOps {
  members: Map<string, OpsMember>;
  opened: Promise<OpsServer>;
}

function processOps(address: { port: number; host: string }): ProcessOps {
  return processWide('bus.ops', () => openProcessOps(address));
}

function openProcessOps(address: { port: number; host: string }): ProcessOps {
  const members = new Map<string, OpsMember>();
  const opened = startOpsServer({
    ...address,
    ready: async () => {
      // Every hosted worker, each named when it is not: one that is still starting, or stopping, makes the process not ready.
      await Promise.all(
        [...members].map(async ([name, m]) => {
          if (m.state !== 'running') throw new Error(members.size > 1 ? `${name}: ${m.state}` : m.state);
          try {
            await m.checks();
          } catch (err) {
            throw new Error(members.size > 1 ? `${name}: ${errorMessage(err)}` : errorMessage(err));
          }
        }),
      );
    },
  }).catch((err: unknown) => {
    throw new Error(`could not open the ops port (MEMSTREAM_OPS_PORT; 0 picks a free one): ${errorMessage(err)}`);
  });
  return { members, opened };
}

/**
 * The process's connection to NATS, shared by every worker it hosts: their acks, publishes and
 * pulls of one event-loop turn leave in one socket write (the patched client writes once per turn
 * and connection), and deliveries to all of them arrive on one socket. While a gateway says adds
 * arrive, its JetStream publishes yield to them: at most MEMSTREAM_YIELD_WINDOW unanswered at once
 * (./yield-to-adds.ts). Each worker gets its own handle (its logger), and the connection drains
 * when the last of them closes its handle. One per broker URL (kit's processWide, like the ops port).
 */
interface ProcessBus {
  bus: Promise<Bus>;
  open: number;
}

async function processBus(url: string, consumer: string, log: Logger): Promise<Bus> {
  const mine = processWide<ProcessBus>(`bus.connection ${url}`, () => {
    // A host names its connection after itself (MEMSTREAM_PROCESS: `stages`, `stores`), a worker alone after its consumer.
    const name = `memstream-${process.env.MEMSTREAM_PROCESS?.trim() || consumer}`;
    const window = yieldWindowFromEnv();
    return { bus: connectBus({ url, name, log }).then((b) => (window > 0 ? { ...b, js: yieldingToAdds(b.js, b.nc, window) } : b)), open: 0 };
  });
  const bus = await mine.bus;
  mine.open++;
  let closed = false;
  return {
    ...bus,
    log,
    async close() {
      if (closed) return;
      closed = true;
      if (--mine.open === 0) await bus.close();
    },
  };
}

/**
 * Start one pipeline stage or reader: connect, ensure the topology, consume, and stop in the
 * house order on SIGTERM: stop consuming → drain NATS → close stores. A process may host several
 * (packages/cli/src/host.ts): each has its own consumers, they share the broker connection and
 * the ops port, and one signal stops them all (kit's onShutdown).
 */
export async function startWorker(opts: WorkerOptions): Promise<void> {
  const { log } = opts;
  try {
    // The ops port opens first, so liveness answers while the worker connects; readiness waits.
    const processOpsPort = processOps(opts.ops ?? opsAddressFromEnv());
    const me: OpsMember = { state: 'starting', checks: async () => {} };
    processOpsPort.members.set(opts.consumer, me);
    const ops = await processOpsPort.opened;
    const bus = await processBus(opts.natsUrl, opts.consumer, log);
    // Every process applies the same topology, with the same overrides, so none undoes another's.
    await ensureTopology(bus.jsm, { ackWaitMs: opts.ackWaitMs });
    const { handle, handleBatch, close, ready, more = [], stopConsuming } = await opts.setup(bus);
    me.checks = async () => {
      await within(2_000, 'the broker', bus.jsm.getAccountInfo());
      if (ready) await within(2_000, 'the stores', ready());
    };
    const telemetry = busTelemetry();
    // A stage's bulk lane is watched too, under its durable's name (docs/pipeline.md, "Fairness").
    const watched = [opts.consumer, ...more.map((m) => m.consumer)].flatMap((c) => [
      { label: c as string, durable: CONSUMERS[c].durable },
      ...(CONSUMERS[c].bulkDurable ? [{ label: CONSUMERS[c].bulkDurable, durable: CONSUMERS[c].bulkDurable }] : []),
    ]);
    const unwatch = watched.map(({ label, durable }) =>
      telemetry.watchConsumer(label, async () => {
        const i = await within(2_000, 'the broker', bus.jsm.consumers.info(STREAM_DOCS, durable));
        return { pending: i.num_pending, ackPending: i.num_ack_pending, redelivered: i.num_redelivered };
      }),
    );
    const row = isStage(opts.consumer) ? stageOf(opts.consumer) : null;
    const stage = opts.stage ?? row?.stage;
    const skipStale = opts.skipStale ?? row !== null;
    const runner = runConsumer({
      bus,
      consumer: opts.consumer,
      log,
      ...(handleBatch ? { handleBatch } : { handle: handle! }),
      concurrency: opts.concurrency,
      ...(opts.batch ? { batch: opts.batch } : {}),
      ...(stage ? { stage } : {}),
      skipStale,
      ...(opts.kinds ? { kinds: opts.kinds } : {}),
      ...(opts.onOutcome ? { onOutcome: opts.onOutcome } : {}),
    });
    const others = more.map((m) =>
      runConsumer({ bus, consumer: m.consumer, log, ...(m.handleBatch ? { handleBatch: m.handleBatch } : { handle: m.handle! }), concurrency: m.concurrency ?? opts.concurrency, ...(m.skipStale ? { skipStale: true } : {}) }),
    );
    onShutdown(log, [
      [
        'stop consuming',
        () => {
          me.state = 'stopping';
          for (const u of unwatch) u();
          return Promise.all([...[runner, ...others].map((r) => r.stop()), stopConsuming?.()]);
        },
      ],
      ['drain nats', () => bus.close()],
      ['close stores', () => close?.()],
      ['flush telemetry', () => telemetry.flush()],
    ]);
    me.state = 'running';
    log.info({ consumer: opts.consumer, concurrency: opts.concurrency, opsUrl: ops.url, opsPort: ops.port }, 'ready');
  } catch (err) {
    log.fatal({ err: errorMessage(err) }, 'failed to start');
    process.exit(1);
  }
}
