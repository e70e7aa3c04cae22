import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { startTestStack } from './support/stack.js';
import { unique } from './support/sdk.js';

/** Processes whose environment holds `marker`. */
function withMarker(marker: string): number[] {
  return readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/environ`, 'utf8').includes(marker);
      } catch {
        return false;
      }
    })
    .map(Number);
}

/** nats-server processes of test stacks: pid and config file. */
function testBrokers(): Map<number, string> {
  const out = new Map<number, string>();
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      const conf = cmd[cmd.indexOf('-c') + 1];
      if (cmd[0]?.endsWith('nats-server') && conf?.includes('memstream-e2e-')) out.set(Number(pid), conf);
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

describe('a test stack that cannot start', () => {
  it('stops what it started (services and broker) before it throws', async () => {
    const marker = unique('stack-cleanup');
    const before = testBrokers();
    // The chunker starts; the embedder refuses its configuration and exits.
    await expect(startTestStack({ services: ['chunker', 'embedder'], env: { MEMSTREAM_TEST_MARKER: marker, EMBEDDER: 'no-such-embedder' } })).rejects.toThrow(/embedder/);
    expect(withMarker(marker)).toEqual([]);
    // A broker started meanwhile by this file is gone; other files' brokers (their config still there) are not ours to judge.
    for (const [pid, conf] of testBrokers()) if (!before.has(pid)) expect(existsSync(conf), `nats-server ${pid} runs on a removed store (${conf})`).toBe(true);
  }, 120_000);
});
