import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startNatsServer, type NatsServerHandle } from '@memstream/cli';
import { createLogger } from '@memstream/kit';
import { connectBus, type Bus } from './connect.js';
import { ensureTopology } from './topology.js';
import { lastEvent, publishEvent } from './events.js';
import { submittedEvent } from './testing.js';
import { addsSignal, yieldingToAdds } from './yield-to-adds.js';

/** Two connections to a real nats-server: one a gateway's, one a worker process's. */
describe('yielding to adds over a real broker', () => {
  let dir: string;
  let nats: NatsServerHandle;
  let gateway: Bus;
  let worker: Bus;
  const log = createLogger('test', { level: 'silent' });

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'memstream-yield-'));
    nats = await startNatsServer({ storeDir: dir });
    gateway = await connectBus({ url: nats.url, name: 'yield-gateway', log });
    worker = await connectBus({ url: nats.url, name: 'yield-worker', log });
    await ensureTopology(gateway.jsm);
  });
  afterAll(async () => {
    await gateway?.close();
    await worker?.close();
    await nats?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('a gateway\'s signal reaches the worker\'s connection, which then yields, and every one of its publishes still lands', async () => {
    const js = yieldingToAdds(worker.js, worker.nc, 2);
    await worker.nc.flush();
    expect(js.yielding()).toBe(false);
    addsSignal(gateway.nc).arriving();
    await gateway.nc.flush();
    const deadline = Date.now() + 5_000;
    while (!js.yielding()) {
      if (Date.now() > deadline) throw new Error('the signal did not arrive');
      await new Promise((r) => setTimeout(r, 5));
    }
    const events = Array.from({ length: 10 }, (_, i) => submittedEvent(`yielding ${i}`));
    await Promise.all(events.map((e) => publishEvent({ ...worker, js }, e)));
    for (const e of events) expect((await lastEvent(gateway, e.documentId, 'submitted'))?.event.documentId).toBe(e.documentId);
  });
});
