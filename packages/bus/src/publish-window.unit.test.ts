import { describe, expect, it } from 'vitest';
import type { JetStreamClient, PubAck } from '@nats-io/jetstream';
import { publishWindowFromEnv, windowedPublishes } from './publish-window.js';

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
  return { js: client as unknown as JetStreamClient & { whoAmI(): string }, pending, sent };
}

const turn = () => new Promise<void>((r) => setImmediate(r));

describe('windowedPublishes', () => {
  it('has at most `window` publishes unanswered, and sends the rest in the order they were made as answers come', async () => {
    const { js, pending, sent } = fakeClient();
    const w = windowedPublishes(js, 2);
    const acks = ['a', 'b', 'c', 'd', 'e'].map((s) => w.publish(s));
    await turn();
    expect(sent).toEqual(['a', 'b']);
    pending.find((p) => p.subject === 'b')!.answer();
    await turn();
    expect(sent).toEqual(['a', 'b', 'c']);
    pending.find((p) => p.subject === 'a')!.answer();
    pending.find((p) => p.subject === 'c')!.answer();
    await turn();
    expect(sent).toEqual(['a', 'b', 'c', 'd', 'e']);
    pending.filter((p) => p.subject === 'd' || p.subject === 'e').forEach((p) => p.answer());
    expect((await Promise.all(acks)).map((a) => a.seq)).toEqual([1, 2, 3, 4, 5]);
  });

  it('frees the place of a refused publish, and its caller gets the refusal', async () => {
    const { js, pending, sent } = fakeClient();
    const w = windowedPublishes(js, 1);
    const first = w.publish('a');
    const second = w.publish('b');
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
    const w = windowedPublishes(js, 4) as typeof js;
    expect(w.whoAmI()).toBe('the real client');
    const { whoAmI } = w;
    expect(whoAmI()).toBe('the real client');
  });

  it('takes its size from MEMSTREAM_PUBLISH_WINDOW, 32 unless set, and refuses a bad one with the reason', () => {
    expect(publishWindowFromEnv({})).toBe(32);
    expect(publishWindowFromEnv({ MEMSTREAM_PUBLISH_WINDOW: '' })).toBe(32);
    expect(publishWindowFromEnv({ MEMSTREAM_PUBLISH_WINDOW: '8' })).toBe(8);
    expect(() => publishWindowFromEnv({ MEMSTREAM_PUBLISH_WINDOW: '0' })).toThrow(/MEMSTREAM_PUBLISH_WINDOW/);
    expect(() => publishWindowFromEnv({ MEMSTREAM_PUBLISH_WINDOW: 'many' })).toThrow(/MEMSTREAM_PUBLISH_WINDOW/);
  });
});
