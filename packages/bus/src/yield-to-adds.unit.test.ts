import { describe, expect, it } from 'vitest';
import type { NatsConnection } from '@nats-io/transport-node';
import type { JetStreamClient, PubAck } from '@nats-io/jetstream';
import { ADDS_ARRIVING_SUBJECT, ADDS_SIGNAL_EVERY_MS, ADDS_YIELD_FOR_MS, addsSignal, yieldWindowFromEnv, yieldingToAdds } from './yield-to-adds.js';

/** A client whose publishes stay unanswered until the test answers them, in any order. */
function fakeClient() {
  const pending: Array<{ subject: string; answer: () => void; refuse: (e: Error) => void }> = [];
  const sent: string[] = [];
  const client = {
    label: 'the real client',
    publish(subject: string) {
      sent.push(subject);
      return new Promise<PubAck>((resolve, reject) => {
        pending.push({ subject, answer: () => resolve({ seq: sent.indexOf(subject) + 1 } as PubAck), refuse: reject });
      });
    },
    whoAmI(this: { label: string }) {
      return this.label;
    },
  };
  return { js: client as unknown as JetStreamClient & { whoAmI(): string }, pending, sent, answer: (s: string) => pending.find((p) => p.subject === s)!.answer() };
}

/** A connection on which the test says, as a gateway would, that adds are arriving. */
function fakeConnection() {
  const subjects: string[] = [];
  let deliver: ((err: Error | null) => void) | undefined;
  const nc = {
    subscribe(subject: string, opts: { callback: (err: Error | null) => void }) {
      subjects.push(subject);
      deliver = opts.callback;
    },
  };
  return { nc: nc as unknown as Pick<NatsConnection, 'subscribe'>, subjects, signal: () => deliver!(null) };
}

const turn = () => new Promise<void>((r) => setImmediate(r));

describe('addsSignal', () => {
  it('sends the signal on the first add and then at most once every ADDS_SIGNAL_EVERY_MS, and nothing without adds', () => {
    let t = 1_000;
    const published: string[] = [];
    const s = addsSignal({ publish: (subject: string) => void published.push(subject) } as Pick<NatsConnection, 'publish'>, () => t);
    expect(published).toEqual([]);
    s.arriving();
    s.arriving();
    t += ADDS_SIGNAL_EVERY_MS - 1;
    s.arriving();
    expect(published).toEqual([ADDS_ARRIVING_SUBJECT]);
    t += 1;
    s.arriving();
    expect(published).toEqual([ADDS_ARRIVING_SUBJECT, ADDS_ARRIVING_SUBJECT]);
  });

  it('does not throw when the connection refuses (closed): the add itself reports that', () => {
    const s = addsSignal({ publish: () => { throw new Error('closed'); } } as unknown as Pick<NatsConnection, 'publish'>);
    expect(() => s.arriving()).not.toThrow();
  });
});

describe('yieldingToAdds', () => {
  it('sends every publish at once while no adds arrive', async () => {
    const { js, sent } = fakeClient();
    const { nc, subjects } = fakeConnection();
    const y = yieldingToAdds(js, nc, 2, () => 0);
    expect(subjects).toEqual([ADDS_ARRIVING_SUBJECT]);
    for (const s of ['a', 'b', 'c', 'd']) void y.publish(s);
    await turn();
    expect(sent).toEqual(['a', 'b', 'c', 'd']);
    expect(y.yielding()).toBe(false);
  });

  it('while adds arrive, has at most `window` unanswered, sends the rest in the order made as answers come, and all at once when the adds stop', async () => {
    let t = 0;
    const { js, sent, answer } = fakeClient();
    const { nc, signal } = fakeConnection();
    const y = yieldingToAdds(js, nc, 2, () => t);
    signal();
    expect(y.yielding()).toBe(true);
    const acks = ['a', 'b', 'c', 'd', 'e', 'f'].map((s) => y.publish(s));
    await turn();
    expect(sent).toEqual(['a', 'b']);
    answer('b');
    await turn();
    expect(sent).toEqual(['a', 'b', 'c']);
    // No signal for ADDS_YIELD_FOR_MS: the next answer lets every waiting publish go.
    t += ADDS_YIELD_FOR_MS;
    expect(y.yielding()).toBe(false);
    answer('a');
    await turn();
    expect(sent).toEqual(['a', 'b', 'c', 'd', 'e', 'f']);
    for (const s of ['c', 'd', 'e', 'f']) answer(s);
    expect((await Promise.all(acks)).map((a) => a.seq)).toEqual([1, 2, 3, 4, 5, 6]);
  });

  it('a new publish waits behind those already waiting even when a place is free, so one document\'s events keep their order', async () => {
    let t = 0;
    const { js, sent, answer } = fakeClient();
    const { nc, signal } = fakeConnection();
    const y = yieldingToAdds(js, nc, 1, () => t);
    signal();
    void y.publish('a');
    void y.publish('b');
    await turn();
    t += ADDS_YIELD_FOR_MS;
    void y.publish('c');
    await turn();
    expect(sent).toEqual(['a']);
    answer('a');
    await turn();
    expect(sent).toEqual(['a', 'b', 'c']);
  });

  it('frees the place of a refused publish, and its caller gets the refusal', async () => {
    const { js, pending, sent } = fakeClient();
    const { nc, signal } = fakeConnection();
    const y = yieldingToAdds(js, nc, 1, () => 0);
    signal();
    const first = y.publish('a');
    const second = y.publish('b');
    await turn();
    expect(sent).toEqual(['a']);
    pending[0]!.refuse(new Error('connection lost'));
    await expect(first).rejects.toThrow('connection lost');
    await turn();
    expect(sent).toEqual(['a', 'b']);
    pending[1]!.answer();
    await expect(second).resolves.toMatchObject({ seq: 2 });
  });

  it('leaves everything but publish to the client itself, bound to it', () => {
    const { js } = fakeClient();
    const { nc } = fakeConnection();
    const y = yieldingToAdds(js, nc, 4) as typeof js & { yielding(): boolean };
    const { whoAmI } = y;
    expect(whoAmI()).toBe('the real client');
  });
});

describe('MEMSTREAM_YIELD_WINDOW', () => {
  it('is 8 unless set, 0 turns yielding off, and anything else but a whole number is refused with the variable named', () => {
    expect(yieldWindowFromEnv({})).toBe(8);
    expect(yieldWindowFromEnv({ MEMSTREAM_YIELD_WINDOW: '' })).toBe(8);
    expect(yieldWindowFromEnv({ MEMSTREAM_YIELD_WINDOW: '0' })).toBe(0);
    expect(yieldWindowFromEnv({ MEMSTREAM_YIELD_WINDOW: '16' })).toBe(16);
    for (const bad of ['-1', '2.5', 'many']) expect(() => yieldWindowFromEnv({ MEMSTREAM_YIELD_WINDOW: bad })).toThrow(/MEMSTREAM_YIELD_WINDOW/);
  });
});
