import { pullLoop, type Bus, type PullLoop } from '@memstream/bus';
import { MEMORY_EVENTS_CONSUMER, MemoryCommit, STREAM_MEMORY, deadLetterSubject } from '@memstream/contracts';
import { errorMessage, type Logger } from '@memstream/kit';

const enc = new TextEncoder();
const dec = new TextDecoder();

/**
 * The notifier's consumer of MEMORY (durable `notifier-memory`): each commit is handed to
 * `announce`, then acked. The pull loop starts messages in stream order and `announce` keeps one
 * tag's commits in that order, so a tag's memory events reach LIFECYCLE and the delivery queue in
 * log order. A commit that cannot be read is copied to DEAD_LETTERS and acked; a failure to
 * announce (broker away) naks it, and the redelivery is deduplicated downstream.
 */
export function runMemoryEvents(opts: { bus: Bus; log: Logger; concurrency: number; announce(commit: MemoryCommit, log: Logger): Promise<unknown> }): PullLoop {
  const { bus, log } = opts;
  return pullLoop({
    bus,
    stream: STREAM_MEMORY,
    durable: MEMORY_EVENTS_CONSUMER,
    capacity: opts.concurrency,
    batch: { size: opts.concurrency, waitMs: 5 },
    log,
    handle: async (batch, settled) => {
      await Promise.all(
        batch.map(async (m) => {
          try {
            let commit: MemoryCommit;
            try {
              commit = MemoryCommit.parse(JSON.parse(dec.decode(m.data)));
            } catch (err) {
              log.error({ seq: m.seq, err: errorMessage(err) }, 'unreadable memory commit: dead-lettered, not announced');
              await bus.js.publish(deadLetterSubject(MEMORY_EVENTS_CONSUMER, `seq-${m.seq}`), enc.encode(JSON.stringify({ raw: dec.decode(m.data), reason: errorMessage(err) })), {
                msgID: `dead:${MEMORY_EVENTS_CONSUMER}:seq:${m.seq}`,
              });
              await m.ackAck();
              return;
            }
            const mlog = log.child({ containerTag: commit.containerTag, commitId: commit.id, seq: m.seq });
            try {
              await opts.announce(commit, mlog);
              await m.ackAck();
            } catch (err) {
              mlog.warn({ err: errorMessage(err) }, 'memory events could not be announced: retrying');
              m.nak(Math.min(30_000, 1_000 * m.info.deliveryCount));
            }
          } finally {
            settled(m);
          }
        }),
      );
    },
  });
}
