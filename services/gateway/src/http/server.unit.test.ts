import type { AddressInfo } from 'node:net';
import { IncomingMessage, ServerResponse, type Server } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import type { DocumentEvent } from '@memstream/contracts';
import { createLogger } from '@memstream/kit';
import { createApp } from '../app.js';
import { UNSEEN, portsForAdds } from '../handlers/testing.js';
import { appServer } from './server.js';

const API_KEY = 'server-test-key-0123456789';

function gateway() {
  const published: DocumentEvent[] = [];
  const ports = portsForAdds(
    {
      head: async () => UNSEEN,
      async publish(event: DocumentEvent) {
        published.push(event);
        return published.length;
      },
    },
    '2026-11-27T00:00:00Z',
  );
  return { app: createApp({ ports, apiKey: API_KEY, log: createLogger('test', { level: 'silent' }) }), published };
}

/** Calls of Object.setPrototypeOf that really changed a request's or a response's prototype, while `fn` runs. */
async function prototypeChanges(fn: () => Promise<void>): Promise<number> {
  const original = Object.setPrototypeOf;
  let changes = 0;
  Object.setPrototypeOf = function (o: object, proto: object | null) {
    if ((o instanceof IncomingMessage || o instanceof ServerResponse) && Object.getPrototypeOf(o) !== proto) changes++;
    return original(o, proto);
  } as typeof Object.setPrototypeOf;
  try {
    await fn();
  } finally {
    Object.setPrototypeOf = original;
  }
  return changes;
}

async function listen(server: Server): Promise<string> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** One of each path a request takes: the add route past the router, a routed GET, a refusal, an unknown path. */
async function requests(base: string): Promise<number[]> {
  const auth = { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' };
  const answers = await Promise.all([
    fetch(`${base}/v3/documents`, { method: 'POST', headers: auth, body: JSON.stringify({ content: 'hello', containerTag: 't' }) }),
    fetch(`${base}/healthz`),
    fetch(`${base}/v3/documents`, { method: 'POST', headers: auth, body: '{"contentx":1}' }),
    fetch(`${base}/v3/nowhere`, { headers: auth }),
  ]);
  await Promise.all(answers.map((a) => a.arrayBuffer()));
  return answers.map((a) => a.status);
}

describe('appServer', () => {
  let server: Server | undefined;
  afterEach(() => new Promise<void>((r) => (server ? server.close(() => r()) : r())));

  it('serves every route with requests and responses born with the app prototypes: Express changes none', async () => {
    const { app, published } = gateway();
    server = appServer(app);
    const base = await listen(server);
    let statuses: number[] = [];
    expect(await prototypeChanges(async () => void (statuses = await requests(base)))).toBe(0);
    expect(statuses).toEqual([200, 200, 400, 404]);
    expect(published).toHaveLength(1);
  });

  it('(the probe sees the changes Express makes on a server of its own, app.listen)', async () => {
    const { app } = gateway();
    server = app.listen(0, '127.0.0.1');
    await new Promise((r) => server!.once('listening', r));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    let statuses: number[] = [];
    expect(await prototypeChanges(async () => void (statuses = await requests(base)))).toBeGreaterThanOrEqual(8);
    expect(statuses).toEqual([200, 200, 400, 404]);
  });
});
