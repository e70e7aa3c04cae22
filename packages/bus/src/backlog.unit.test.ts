import { describe, expect, it } from 'vitest';
import { backlogAnnouncer, backlogReports, BACKLOG_SUBJECT_PREFIX } from './backlog.js';
import { readAdmission } from './admission.js';
import type { Bus } from './connect.js';

/** Core NATS in memory: what is published reaches every subscription whose `prefix.*` matches, at once. */
function fakeNc() {
  const subs: Array<{ prefix: string; callback: (err: Error | null, msg: { subject: string; data: Uint8Array }) => void }> = [];
  const published: string[] = [];
  return {
    published,
    nc: {
      publish(subject: string, data: Uint8Array) {
        published.push(subject);
        for (const s of subs) if (subject.startsWith(s.prefix)) s.callback(null, { subject, data });
      },
      subscribe(subject: string, opts: { callback: (err: Error | null, msg: { subject: string; data: Uint8Array }) => void }) {
        const s = { prefix: subject.replace(/\*$/, ''), callback: opts.callback };
        subs.push(s);
        return { unsubscribe: () => void subs.splice(subs.indexOf(s), 1) };
      },
    },
  };
}

const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('stage backlog announcements', () => {
  it('sends the newest of many updates once per interval, and nothing new when nothing changed', async () => {
    const f = fakeNc();
    const a = backlogAnnouncer(f as unknown as Bus, 'chunker', { intervalMs: 20, heartbeatMs: 10_000 });
    const r = backlogReports(f as unknown as Bus);
    for (let held = 1; held <= 50; held++) a.update(7, held);
    expect(f.published).toHaveLength(0);
    await wait(40);
    expect(f.published).toEqual([BACKLOG_SUBJECT_PREFIX + 'chunker']);
    expect(r.of('chunker')).toEqual({ pending: 7, held: 50 });
    a.update(7, 50);
    await wait(40);
    expect(f.published).toHaveLength(1);
    a.stop();
    r.stop();
  });

  it('repeats itself while nothing changes, so a reader knows the stage is there', async () => {
    const f = fakeNc();
    const a = backlogAnnouncer(f as unknown as Bus, 'embedder', { intervalMs: 5, heartbeatMs: 15 });
    await wait(70);
    a.stop();
    const n = f.published.length;
    expect(n).toBeGreaterThanOrEqual(3);
    await wait(40);
    expect(f.published).toHaveLength(n);
  });

  it("adds up the held messages of every process heard from lately, with the newest pending count; forgets one that went quiet", () => {
    let t = 0;
    const f = fakeNc();
    const r = backlogReports(f as unknown as Bus, { freshMs: 1000, now: () => t });
    const say = (instance: string, pending: number, held: number) => f.nc.publish(BACKLOG_SUBJECT_PREFIX + 'indexer', new TextEncoder().encode(JSON.stringify({ instance, pending, held })));
    expect(r.of('indexer')).toBeNull();
    say('a', 100, 64);
    t = 500;
    say('b', 90, 32);
    expect(r.of('indexer')).toEqual({ pending: 90, held: 96 });
    t = 1200;
    // a was last heard 1,200 ms ago: its held messages are no longer counted (they come back to the others).
    expect(r.of('indexer')).toEqual({ pending: 90, held: 32 });
    t = 1600;
    expect(r.of('indexer')).toBeNull();
    // Not a report: ignored.
    f.nc.publish(BACKLOG_SUBJECT_PREFIX + 'indexer', new TextEncoder().encode('{"instance":"c","pending":-1,"held":2}'));
    f.nc.publish(BACKLOG_SUBJECT_PREFIX + 'indexer', new TextEncoder().encode('not json'));
    expect(r.of('indexer')).toBeNull();
    r.stop();
  });
});

describe('readAdmission', () => {
  it('takes what the stages announce, and asks consumer info only for a durable none of whose processes was heard', async () => {
    const f = fakeNc();
    const asked: string[] = [];
    const bus = {
      nc: f.nc,
      jsm: {
        consumers: {
          info: async (_stream: string, durable: string) => {
            asked.push(durable);
            return { num_pending: 1000, num_ack_pending: 5 };
          },
        },
      },
    } as unknown as Bus;
    // The first read subscribes; nothing has been heard yet, so every durable is asked.
    expect(await readAdmission(bus, 'extractor', ['chunker', 'embedder'])).toEqual({ backlog: 2010, normalAhead: 1000 });
    expect(asked.sort()).toEqual(['chunker', 'embedder', 'extractor']);
    asked.length = 0;
    const say = (durable: string, pending: number, held: number) => f.nc.publish(BACKLOG_SUBJECT_PREFIX + durable, new TextEncoder().encode(JSON.stringify({ instance: 'x', pending, held })));
    say('extractor', 3, 10);
    say('chunker', 20, 64);
    expect(await readAdmission(bus, 'extractor', ['chunker', 'embedder'])).toEqual({ backlog: 20 + 64 + 1005, normalAhead: 3 });
    expect(asked).toEqual(['embedder']);
  });
});
