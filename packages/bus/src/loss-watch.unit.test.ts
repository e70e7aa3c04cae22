import { describe, expect, it } from 'vitest';
import { isTransientError } from './decide.js';
import { BrokerAwayError, ConnectionLostError, lossWatch } from './connect.js';

describe('lossWatch: requests only while connected, and failed at once when the connection is lost', () => {
  it('a request that settles passes through, value or error', async () => {
    const w = lossWatch();
    expect(await w.whileConnected(() => Promise.resolve(7))).toBe(7);
    await expect(w.whileConnected(() => Promise.reject(new Error('wrong last sequence')))).rejects.toThrow('wrong last sequence');
  });

  it('a request still waiting when the connection is lost is rejected as retryable, and its late answer is ignored', async () => {
    const w = lossWatch();
    let answer!: (v: string) => void;
    const pending = w.whileConnected(() => new Promise<string>((r) => (answer = r)));
    w.lost();
    const err = await pending.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConnectionLostError);
    expect(isTransientError(err)).toBe(true);
    answer('too late');
    await new Promise((r) => setImmediate(r));
  });

  it('while reconnecting nothing is sent: refused at once as transient; after the reconnect requests go out again', async () => {
    const w = lossWatch();
    const settledBefore = await w.whileConnected(() => Promise.resolve('before'));
    expect(settledBefore).toBe('before');
    w.lost();
    let sent = 0;
    const err = await w.whileConnected(() => (sent++, Promise.resolve('sent while down'))).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(BrokerAwayError);
    expect(isTransientError(err)).toBe(true);
    expect(sent).toBe(0);
    w.regained();
    let answer!: (v: string) => void;
    const after = w.whileConnected(() => new Promise<string>((r) => (answer = r)));
    answer('answered after the reconnect');
    expect(await after).toBe('answered after the reconnect');
  });
});
