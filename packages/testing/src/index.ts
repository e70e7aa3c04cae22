/**
 * Real servers for the suites that need MongoDB, Qdrant or a NATS of its own image: the URL the
 * user gave (MONGODB_URL, QDRANT_URL, NATS_TEST_URL), else a throwaway container started through
 * testcontainers when a Docker engine is reachable, else the one-line reason the suite is
 * skipped. A user with Docker gets the real-store suites from `./memstream test` with no setup.
 */
import { getContainerRuntimeClient } from 'testcontainers';
import { MongoDBContainer } from '@testcontainers/mongodb';
import { QdrantContainer } from '@testcontainers/qdrant';
import { NatsContainer } from '@testcontainers/nats';

/** Where a suite's server is, and how to release it; or why there is none. */
export type RealServer =
  | { url: string; from: 'environment' | 'container'; stop(): Promise<void> }
  | { skip: string };

/** Images, pinned: the ones deploy/compose.yaml runs. */
export const IMAGES = {
  mongodb: 'mongo:7',
  qdrant: 'qdrant/qdrant:v1.16.0',
  nats: 'nats:2.10-alpine',
} as const;

let docker: Promise<string | null> | undefined;
/** null when a container runtime answers, else why not (testcontainers tries DOCKER_HOST, ~/.testcontainers.properties, the socket, rootless, Podman). */
export function dockerUnavailable(): Promise<string | null> {
  docker ??= getContainerRuntimeClient().then(
    () => null,
    (err: unknown) => (err instanceof Error ? err.message : String(err)).split('\n')[0]!,
  );
  return docker;
}

async function realServer(opts: { envVar: string; what: string; start: () => Promise<{ url: string; stop(): Promise<unknown> }> }): Promise<RealServer> {
  const fromEnv = process.env[opts.envVar];
  if (fromEnv) return { url: fromEnv, from: 'environment', stop: async () => {} };
  const why = await dockerUnavailable();
  if (why) return { skip: `${opts.what}: ${opts.envVar} is not set and no Docker engine is reachable for testcontainers (${why})` };
  const c = await opts.start();
  return {
    url: c.url,
    from: 'container',
    stop: async () => {
      await c.stop();
    },
  };
}

/** A MongoDB replica set (the adapter's change streams and transactions need one). */
export function mongoServer(): Promise<RealServer> {
  return realServer({
    envVar: 'MONGODB_URL',
    what: 'MongoDB',
    start: async () => {
      const c = await new MongoDBContainer(IMAGES.mongodb).start();
      // The container's replica set advertises its in-container host name: connect to the mapped port directly.
      const url = new URL(c.getConnectionString());
      url.searchParams.set('directConnection', 'true');
      return { url: url.toString(), stop: () => c.stop() };
    },
  });
}

export function qdrantServer(): Promise<RealServer> {
  return realServer({
    envVar: 'QDRANT_URL',
    what: 'Qdrant',
    start: async () => {
      const c = await new QdrantContainer(IMAGES.qdrant).start();
      return { url: `http://${c.getRestHostAddress()}`, stop: () => c.stop() };
    },
  });
}

/** A NATS server of the upstream image with JetStream (the suites otherwise use Debian's nats-server 2.9 binary). */
export function natsServer(): Promise<RealServer> {
  return realServer({
    envVar: 'NATS_TEST_URL',
    what: 'NATS (container)',
    start: async () => {
      const c = await new NatsContainer(IMAGES.nats).withJetStream().start();
      const o = c.getConnectionOptions();
      const server = String(Array.isArray(o.servers) ? o.servers[0] : o.servers).replace(/^(nats:\/\/)?/, '');
      // Credentials in the URL: connectBus takes them out (see packages/bus/src/connect.ts).
      const auth = o.user ? `${encodeURIComponent(o.user)}:${encodeURIComponent(o.pass ?? '')}@` : '';
      return { url: `nats://${auth}${server}`, stop: () => c.stop() };
    },
  });
}
