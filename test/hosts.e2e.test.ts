import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WORKER_HOSTS } from '@memstream/contracts';
import { valueIn } from './support/metrics.js';
import { api, startTestStack, waitFor, type TestStack } from './support/stack.js';

/**
 * The worker hosts `./memstream up` runs (packages/cli/src/host.ts): several workers in one Node
 * process, each with its own consumers, sharing one broker connection, one ops port and one shutdown.
 */
describe('worker hosts: several workers in one process, as ./memstream up runs them', () => {
  let stack: TestStack;
  let client: ReturnType<typeof api>;

  beforeAll(async () => {
    stack = await startTestStack({ layout: 'grouped' });
    client = api(stack);
  });
  afterAll(async () => {
    await stack?.teardown();
  });

  const metrics = async (url: string) => (await fetch(`${url}/metrics`)).text();
  const done = (id: string) => waitFor(`${id} done`, async () => ((await client.get(id)).body?.status === 'done' ? true : undefined), 30_000, 50);

  it('runs each host in one process with one ops port: ready once all its workers are, metrics labelled by the host and counting each worker', async () => {
    for (const [host, members] of Object.entries(WORKER_HOSTS)) {
      const p = stack.procs.get(members[0]!)!;
      expect(p.name).toBe(host);
      expect([...p.services].sort()).toEqual([...members].sort());
      for (const m of members) expect(stack.procs.get(m), m).toBe(p);
      expect((await fetch(`${p.opsUrl}/readyz`)).status).toBe(200);
    }
    const stages = stack.procs.get('chunker')!;
    const stores = stack.procs.get('projection')!;
    const [s0, r0] = await Promise.all([metrics(stages.opsUrl!), metrics(stores.opsUrl!)]);
    const { id } = (await client.add('One document through both hosts.')).body as { id: string };
    await done(id);
    const [s1, r1] = await Promise.all([metrics(stages.opsUrl!), metrics(stores.opsUrl!)]);
    const moved = (a: string, b: string, labels: Record<string, string>) => valueIn(b, 'memstream_events_total', labels) - valueIn(a, 'memstream_events_total', labels);
    // Each worker counts its own events on its host's registry, and only there.
    for (const w of WORKER_HOSTS.stages) expect(moved(s0, s1, { stage: w, outcome: 'handled' }), w).toBeGreaterThanOrEqual(1);
    expect(moved(r0, r1, { stage: 'indexer', outcome: 'handled' })).toBe(1);
    expect(moved(r0, r1, { stage: 'projection', event: 'indexed', outcome: 'handled' })).toBe(1);
    expect(valueIn(s1, 'memstream_events_total', { stage: 'projection' })).toBe(0);
    // Every worker's consumers are watched, and the process metrics carry the host's name.
    for (const w of WORKER_HOSTS.stages) expect(s1, w).toMatch(new RegExp(`^memstream_consumer_pending_messages\\{[^}]*consumer="${w}"`, 'm'));
    for (const w of ['indexer', 'projection', 'notifier', 'memorizer']) expect(r1, w).toMatch(new RegExp(`^memstream_consumer_pending_messages\\{[^}]*consumer="${w}"`, 'm'));
    expect(valueIn(s1, 'process_resident_memory_bytes', { service: 'stages' })).toBeGreaterThan(0);
    expect(valueIn(r1, 'process_resident_memory_bytes', { service: 'stores' })).toBeGreaterThan(0);
  }, 60_000);

  it('SIGTERM stops every worker of the host, each in its order, and the host exits 0; what was added meanwhile is done once it is back', async () => {
    const stages = stack.procs.get('extractor')!;
    const from = stack.logs.length;
    const exited = new Promise<number | null>((resolve) => stages.child.once('exit', (code) => resolve(code)));
    await stack.stopService('extractor', 'SIGTERM');
    expect(await exited).toBe(0);
    const after = stack.logs.slice(from);
    for (const w of WORKER_HOSTS.stages) {
      const mine = after.filter((l) => l.startsWith(`${w} `));
      const shutting = mine.findIndex((l) => l.includes('"msg":"shutting down"'));
      const stopped = mine.findIndex((l) => l.includes('"msg":"stopped"'));
      expect(shutting, `${w} shutting down`).toBeGreaterThanOrEqual(0);
      expect(stopped, `${w} stopped`).toBeGreaterThan(shutting);
      expect(mine.some((l) => l.includes('shutdown step failed')), `${w}: no step failed`).toBe(false);
    }
    // A clean stop says nothing worse than info (the telemetry, shared by the host's workers, is flushed once).
    expect(after.filter((l) => /"level":(40|50|60)/.test(l))).toEqual([]);
    for (const w of WORKER_HOSTS.stages) expect(stack.procs.has(w), w).toBe(false);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await client.add(`Added while the stages were stopped, number ${i}.`)).body.id as string);
    for (const id of ids) expect((await client.get(id)).body.status).toBe('queued');
    // The host comes back whole: every stage stopped with it.
    const back = await stack.start('chunker');
    expect([...back.services].sort()).toEqual([...WORKER_HOSTS.stages].sort());
    for (const id of ids) await done(id);
  }, 60_000);
});
