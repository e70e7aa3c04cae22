import { headers as natsHeaders } from '@nats-io/nats-core';
import type { JetStreamManager } from '@nats-io/jetstream';
import { MEMORY_SUBJECTS, MemoryCommit, STREAM_MEMORY, memorySubject } from '@memstream/contracts';
import { ensureMemoryStreamExists, type Bus } from '@memstream/bus';
import { storageReplicas } from '@memstream/kit';
import type { MemoryStore } from './store/port.js';

const enc = new TextEncoder();
const dec = new TextDecoder();

/** The MEMORY stream (its settings: memoryStreamConfig in @memstream/bus). Idempotent; the memorizer, the gateway and the notifier call it at start. */
export async function ensureMemoryStream(jsm: JetStreamManager, replicas = storageReplicas()): Promise<void> {
  await ensureMemoryStreamExists(jsm, replicas);
}

/** The server refused a publish because another commit reached the tag first (JetStream error 10071). */
function isWrongLastSequence(err: unknown): boolean {
  const e = err as { code?: unknown; message?: unknown };
  return e?.code === 10071 || /wrong last sequence/i.test(String(e?.message ?? err));
}

/** Read every commit of the stream from `fromSeq` on (all tags, or one), in order. */
export async function* readCommits(bus: Bus, opts: { containerTag?: string; fromSeq?: number } = {}): AsyncGenerator<{ commit: MemoryCommit; seq: number }> {
  const subject = opts.containerTag ? memorySubject(opts.containerTag) : MEMORY_SUBJECTS;
  let seq = opts.fromSeq ?? 1;
  for (;;) {
    // Direct get of the next message on the subject: works on nats-server 2.9 and needs no consumer.
    const m = await bus.jsm.direct.getMessage(STREAM_MEMORY, { seq, next_by_subj: subject });
    if (!m) return;
    yield { commit: MemoryCommit.parse(JSON.parse(dec.decode(m.data))), seq: m.seq };
    seq = m.seq + 1;
  }
}

/**
 * Writes to the memory log for one process. Every decision about a tag is made against the
 * store at the tag's last applied sequence and published expecting exactly that sequence on the
 * tag's subject: so decisions about one tag are serial across every process (memorizer replicas,
 * gateways), and one made on a stale view is refused, the store catches up from the log, and the
 * decision is made again. After publishing, the writer applies its own commit. A writer that dies
 * between publishing and applying loses nothing: the next writer for the tag catches up first.
 */
export class MemoryLog {
  /** Per-tag chains of work in this process, so its own decisions do not race each other. */
  private readonly locks = new Map<string, Promise<unknown>>();

  constructor(
    private readonly bus: Bus,
    readonly store: MemoryStore,
  ) {}

  /** Apply every commit of the tag the store has not applied yet. */
  async catchUp(containerTag: string): Promise<number> {
    let applied = 0;
    const from = (await this.store.tagSeq(containerTag)) + 1;
    for await (const { commit, seq } of readCommits(this.bus, { containerTag, fromSeq: from })) {
      if (await this.store.apply(commit, seq)) applied++;
    }
    return applied;
  }

  /**
   * Decide and commit under the tag's lock: `decide` sees the store caught up to the tag's last
   * commit and returns the commit to make (null: nothing to do). Returns what was committed.
   */
  async commit(containerTag: string, decide: () => Promise<MemoryCommit | null>, headers: Record<string, string> = {}): Promise<{ commit: MemoryCommit; seq: number } | null> {
    const prev = this.locks.get(containerTag) ?? Promise.resolve();
    const run = prev.catch(() => undefined).then(() => this.commitNow(containerTag, decide, headers));
    this.locks.set(containerTag, run);
    try {
      return await run;
    } finally {
      if (this.locks.get(containerTag) === run) this.locks.delete(containerTag);
    }
  }

  private async commitNow(containerTag: string, decide: () => Promise<MemoryCommit | null>, headers: Record<string, string>): Promise<{ commit: MemoryCommit; seq: number } | null> {
    for (let attempt = 0; attempt < 8; attempt++) {
      const expected = await this.store.tagSeq(containerTag);
      const decided = await decide();
      if (!decided) return null;
      const commit = MemoryCommit.parse(decided);
      const h = natsHeaders();
      for (const [k, v] of Object.entries(headers)) h.set(k, v);
      h.set('Memstream-Event-Type', commit.type);
      try {
        const ack = await this.bus.js.publish(memorySubject(containerTag), enc.encode(JSON.stringify(commit)), {
          msgID: commit.id,
          headers: h,
          expect: { lastSubjectSequence: expected },
        });
        if (ack.duplicate) {
          // Committed before (a redelivery after a crash): apply what the log holds, not what was decided now.
          await this.catchUp(containerTag);
          const stored = await this.bus.jsm.direct.getMessage(STREAM_MEMORY, { seq: ack.seq });
          return stored ? { commit: MemoryCommit.parse(JSON.parse(dec.decode(stored.data))), seq: ack.seq } : null;
        }
        await this.store.apply(commit, ack.seq);
        return { commit, seq: ack.seq };
      } catch (err) {
        if (!isWrongLastSequence(err)) throw err;
        // Another writer committed to this tag first: catch up and decide again.
        await this.catchUp(containerTag);
      }
    }
    throw new Error(`memory commit for container tag ${JSON.stringify(containerTag)} kept conflicting with other writers`);
  }
}

/** Rebuild a store from the whole log (memstream replay memories); returns the commits applied. */
export async function replayMemories(bus: Bus, into: MemoryStore, onCommit?: (seq: number) => void): Promise<number> {
  let n = 0;
  for await (const { commit, seq } of readCommits(bus)) {
    if (await into.apply(commit, seq)) n++;
    onCommit?.(seq);
  }
  return n;
}
