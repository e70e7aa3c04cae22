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

/**
 * NATS_URL may carry credentials, `nats://user:password@host:port` (or `nats://token@host:port`),
 * like a database URL: the embedded server's are generated into the data dir and handed to every
 * service this way. nats.js ignores credentials in a server URL, so they are taken out here and
 * passed as connection options. Several servers are separated by commas.
 */
export function natsConnectOptions(url: string): { servers: string[]; user?: string; pass?: string; token?: string } {
  let auth: { user?: string; pass?: string; token?: string } = {};
  const servers = url.split(',').map((s) => {
    const m = /^([a-z]+:\/\/)?([^@/]*)@(.*)$/i.exec(s.trim());
    if (!m) return s.trim();
    const [user = '', pass] = m[2]!.split(/:(.*)/s).map(decodeURIComponent);
    if (!auth.user && !auth.token) auth = pass === undefined ? { token: user } : { user, pass };
    return `${m[1] ?? ''}${m[3]}`;
  });
  return { servers, ...auth };
}

/** The URL without its credentials, for logs. */
export function redactNatsUrl(url: string): string {
  return natsConnectOptions(url).servers.join(',');
}

export async function connectBus(opts: { url: string; name: string; log: Logger; timeoutMs?: number }): Promise<Bus> {
  const nc = await connect({
    ...natsConnectOptions(opts.url),
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
