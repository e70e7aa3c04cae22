import { describe, expect, it } from 'vitest';
import { BULK_ADMISSION } from '@memstream/contracts';
import { createLogger } from '@memstream/kit';
import { admitBulkByBacklog, type AdmissionReading } from './admission.js';
import type { Bus } from './connect.js';
import { LaneBudget } from './pull-loop.js';

const silent = createLogger('test', { level: 'silent' });

/**
 * The bulk lane's admission from scripted readings: each tick waits for the test's next reading,
 * and the test reads the budget once the tick after it is waiting (real timers, 1 ms apart).
 */
function scripted(capacity = 16) {
  const budget = new LaneBudget(capacity);
  let next: ((r: AdmissionReading | Error) => void) | null = null;
  let taken = 0;
  const stop = admitBulkByBacklog({} as Bus, budget, silent, {
    normalDurable: 'extractor',
    pollMs: 1,
    // Each tick waits here for the test's next reading.
    read: () =>
      new Promise<AdmissionReading>((resolve, reject) => {
        next = (r) => {
          next = null;
          taken++;
          if (r instanceof Error) reject(r);
          else resolve(r);
        };
      }),
  });
  /** The bulk lane's room once a tick has taken `r` and the next tick is waiting for its reading. */
  const after = async (r: AdmissionReading | Error): Promise<number> => {
    while (!next) await new Promise((res) => setTimeout(res, 1));
    const want = taken + 1;
    next(r);
    while (taken < want || !next) await new Promise((res) => setTimeout(res, 1));
    return budget.room('bulk');
  };
  return { after, stop };
}

describe('admitBulkByBacklog: the bulk lane admitted while the later stages have a short backlog and the normal lane is not far behind', () => {
  it('opens with a short backlog and little ahead of the normal lane; one message at a time when either is over its bound', async () => {
    const { maxBacklog, maxNormalAhead } = BULK_ADMISSION;
    const s = scripted();
    try {
      expect(await s.after({ backlog: 0, normalAhead: 0 })).toBe(16);
      expect(await s.after({ backlog: maxBacklog + 1, normalAhead: 0 })).toBe(1);
      expect(await s.after({ backlog: maxBacklog, normalAhead: maxNormalAhead })).toBe(16);
      // Other tenants' documents, or a run of bulk ones the normal lane has not yet passed over.
      expect(await s.after({ backlog: 0, normalAhead: maxNormalAhead + 1 })).toBe(1);
      expect(await s.after({ backlog: maxBacklog + 1, normalAhead: maxNormalAhead + 1 })).toBe(1);
      expect(await s.after({ backlog: 5, normalAhead: 3 })).toBe(16);
    } finally {
      s.stop();
    }
  });

  it('keeps its last answer while the consumers cannot be read', async () => {
    const s = scripted();
    try {
      expect(await s.after({ backlog: 0, normalAhead: BULK_ADMISSION.maxNormalAhead + 1 })).toBe(1);
      expect(await s.after(new Error('timeout'))).toBe(1);
      expect(await s.after({ backlog: 0, normalAhead: 0 })).toBe(16);
      expect(await s.after(new Error('no responders'))).toBe(16);
    } finally {
      s.stop();
    }
  });
});
