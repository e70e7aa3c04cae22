import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstream, jetstreamManager, type JetStreamClient, type JetStreamManager } from '@nats-io/jetstream';
import { RetryableError, type Logger } from '@memstream/kit';

/** One connection per process, with its JetStream client and manager. */
export interface Bus {
  nc: NatsConnection;
  js: JetStreamClient;
  jsm: JetStreamManager;
  log: Logger;
  /** Drain: finish in-flight publishes and subscriptions, then close. */
  close(): Promise<void>;
  /**
   * Send a request (`send` sends it) only while connected, and fail it at once if the connection
   * is lost before its reply: a BrokerAwayError without sending while the client is reconnecting,
   * a ConnectionLostError when it was sent and the connection then dropped. Without this, a
   * request sent to a server that went away, or buffered while reconnecting and flushed to a
   * restarted server whose JetStream was not ready, is answered by nobody and waits out its own
   * timeout (10 s): seen as adds refused 10 s after a nats-server kill -9, while the ones sent
   * 2 s after it were accepted.
   */
  whileConnected<T>(send: () => Promise<T>): Promise<T>;
}

/** A request was in flight when the connection to NATS was lost: retry it; whether it was carried out is not known. */
export class ConnectionLostError extends RetryableError {
  constructor() {
    super('the connection to NATS was lost before the reply came: the request may or may not have been carried out');
    this.name = 'ConnectionLostError';
  }
}

/** The client is reconnecting: the request was not sent, so nothing of it was carried out. */
export class BrokerAwayError extends Error {
  constructor() {
    super('the connection to NATS is down (reconnecting): the request was not sent');
    // A name isTransientError knows: retry later.
    this.name = 'ConnectionError';
  }
}

/** The requests in flight, for `whileConnected`: all failed when the connection is lost; none sent while it is down. */
export function lossWatch(): { whileConnected<T>(send: () => Promise<T>): Promise<T>; lost(): void; regained(): void } {
  const waiting = new Set<(err: Error) => void>();
  let down = false;
  return {
    whileConnected<T>(send: () => Promise<T>) {
      if (down) return Promise.reject(new BrokerAwayError());
      const request = send();
      return new Promise<T>((resolve, reject) => {
        waiting.add(reject);
        request.then(
          (v) => {
            waiting.delete(reject);
            resolve(v);
          },
          (err: unknown) => {
            waiting.delete(reject);
            reject(err);
          },
        );
      });
    },
    lost() {
      down = true;
      const all = [...waiting];
      waiting.clear();
      const err = new ConnectionLostError();
      for (const reject of all) reject(err);
    },
    regained() {
      down = false;
    },
  };
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
  const loss = lossWatch();
  void (async () => {
    for await (const s of nc.status()) {
      if (s.type === 'disconnect') loss.lost();
      if (s.type === 'reconnect') loss.regained();
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
    whileConnected: loss.whileConnected,
    async close() {
      if (!nc.isClosed()) await nc.drain();
    },
  };
}
