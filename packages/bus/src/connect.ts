import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstream, jetstreamManager, type JetStreamClient, type JetStreamManager } from '@nats-io/jetstream';
import type { Logger } from '@memstream/kit';

/** One connection per process, with its JetStream client and manager. */
export interface Bus {
  nc: NatsConnection;
  js: JetStreamClient;
  jsm: JetStreamManager;
  log: Logger;
  /** Drain: finish in-flight publishes and subscriptions, then close. */
  close(): Promise<void>;
}

export async function connectBus(opts: { url: string; name: string; log: Logger; timeoutMs?: number }): Promise<Bus> {
  const nc = await connect({
    servers: opts.url.split(','),
    name: opts.name,
    // Keep trying forever: a broker restart must not take the services down with it.
    maxReconnectAttempts: -1,
    reconnectTimeWait: 250,
    timeout: opts.timeoutMs ?? 5_000,
    // Without it nats.js captures a stack trace for every request (every JetStream publish and
    // ack) to decorate a possible error: a measurable share of a stage's CPU for nothing.
    noAsyncTraces: true,
  });
  const log = opts.log;
  void (async () => {
    for await (const s of nc.status()) {
      if (s.type === 'disconnect' || s.type === 'reconnect' || s.type === 'error') log.warn({ status: s.type }, 'nats connection');
    }
  })();
  const js = jetstream(nc, { timeout: 10_000 });
  const jsm = await jetstreamManager(nc, { timeout: 10_000 });
  return {
    nc,
    js,
    jsm,
    log,
    async close() {
      if (!nc.isClosed()) await nc.drain();
    },
  };
}
