import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startNatsServer, type NatsServerHandle } from '@memstream/cli';
import { BrokerAwayError, ConnectionLostError, connectBus, ensureTopology, isTransientError, lastEvent, publishEvent, submittedEvent, type Bus } from '@memstream/bus';
import { createLogger } from '@memstream/kit';
import { redriveDocuments } from '../packages/cli/src/replay-redrive.js';

/**
 * A client across a kill -9 of nats-server: a request is never left waiting for a reply nobody
 * will send (Bus.whileConnected), and `replay redrive` rides through the restart.
 */
describe('requests across a broker restart', () => {
  let dir: string;
  let nats: NatsServerHandle;
  let bus: Bus;
  const log = createLogger('test', { level: 'silent' });

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'memstream-broker-restart-'));
    nats = await startNatsServer({ storeDir: dir });
    bus = await connectBus({ url: nats.url, name: 'broker-restart-int', log });
    await ensureTopology(bus.jsm);
  });
  afterAll(async () => {
    await bus?.close();
    await nats?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('while the broker is away every publish fails at once as transient; once it is back they land', async () => {
    const outcomes: Array<{ ms: number; err: unknown }> = [];
    let sending = true;
    const sender = (async () => {
      while (sending) {
        const t = performance.now();
        const err = await publishEvent(bus, submittedEvent('across the restart')).then(
          () => null,
          (e: unknown) => e,
        );
        outcomes.push({ ms: performance.now() - t, err });
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    await new Promise((r) => setTimeout(r, 300));
    await nats.kill();
    await new Promise((r) => setTimeout(r, 500));
    await nats.restart();
    // Published again after the restart: then stop.
    const since = outcomes.length;
    for (let i = 0; i < 500 && !outcomes.slice(since).some((o) => o.err === null); i++) await new Promise((r) => setTimeout(r, 20));
    sending = false;
    await sender;
    const failed = outcomes.filter((o) => o.err !== null);
    expect(failed.length).toBeGreaterThan(0);
    for (const f of failed) {
      expect(f.err instanceof BrokerAwayError || f.err instanceof ConnectionLostError, String(f.err)).toBe(true);
      expect(isTransientError(f.err)).toBe(true);
      // Not the 10 s of a request timeout: at once.
      expect(f.ms).toBeLessThan(1_000);
    }
    expect(outcomes.at(-1)!.err).toBeNull();
    console.log(`[broker-restart] ${outcomes.length} publishes, ${failed.length} failed while the broker was away, the slowest failure in ${Math.round(Math.max(...failed.map((f) => f.ms)))} ms`);
  }, 60_000);

  it('replay redrive rides through a restart of the broker: every document re-driven, none lost', async () => {
    // Enough documents that the re-drive is still running 30 ms in on a quick machine (60 were done by then once).
    const subs = Array.from({ length: 300 }, (_, i) => submittedEvent(`document ${i} to re-drive`));
    for (const s of subs) await publishEvent(bus, s, { expectLastSubjectSequence: 0 });
    const run = redriveDocuments(
      bus,
      subs.map((s) => s.documentId),
      'embed',
      undefined,
      2,
    );
    let settled = false;
    void run.then(
      () => (settled = true),
      () => (settled = true),
    );
    // Mid-run: the broker goes away for half a second.
    await new Promise((r) => setTimeout(r, 30));
    const midRun = !settled;
    await nats.kill();
    await new Promise((r) => setTimeout(r, 500));
    await nats.restart();
    const done = await run;
    expect(midRun, 'the broker went away while the re-drive ran').toBe(true);
    expect(done.gone + done.changed + done.redriven.size).toBe(subs.length);
    // This test's own connection may still be reconnecting when the re-drive's work is done: its reads wait for it.
    const lastSubmitted = async (documentId: string) => {
      for (let attempt = 0; ; attempt++) {
        try {
          return await lastEvent(bus, documentId, 'submitted');
        } catch (err) {
          if (!(err instanceof BrokerAwayError || err instanceof ConnectionLostError) || attempt >= 400) throw err;
          await new Promise((r) => setTimeout(r, 25));
        }
      }
    };
    // Every document ends re-driven: at revision 2, or 3 where an attempt landed just before the connection dropped.
    for (const s of subs) {
      const last = await lastSubmitted(s.documentId);
      expect(last?.event.revision, s.documentId).toBeGreaterThanOrEqual(2);
      expect(last?.event.revision, s.documentId).toBeLessThanOrEqual(3);
    }
    console.log(`[broker-restart] redrive of ${subs.length} across a restart: ${done.redriven.size} re-driven, ${done.changed} changed meanwhile, ${done.gone} gone`);
  }, 90_000);
});
