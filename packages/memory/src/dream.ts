import type { DocumentToMemorize, MemorizeOutcome } from './memorize.js';

export interface DreamGroupOptions {
  /** How long the first document of a tag's group waits for more (`dreaming: "dynamic"`). */
  windowMs: number;
  /** A group this large is memorized at once. */
  maxDocs: number;
  /**
   * How many documents the process holds at once (the consumer's concurrency): when that many
   * are waiting, no other can arrive, so the oldest group is memorized at once instead of waiting.
   */
  capacity: number;
  /** One pass over a tag's group, in the order the documents arrived (memorizeGroup). */
  run: (tag: string, docs: DocumentToMemorize[]) => Promise<MemorizeOutcome>;
  setTimer?: (fn: () => void, ms: number) => unknown;
  clearTimer?: (t: unknown) => void;
}

interface Pending {
  tag: string;
  docs: DocumentToMemorize[];
  waiters: Array<{ resolve: (o: MemorizeOutcome) => void; reject: (e: unknown) => void }>;
  timer: unknown;
}

/**
 * `dreaming: "dynamic"`: documents of one container tag that arrive within a short window are
 * memorized in one pass (one extraction context, one resolution, one commit). A tag's group
 * starts with its first document and is memorized when the window ends, when it holds `maxDocs`,
 * when an `instant` document of the tag arrives (it joins the group and nothing waits), or when
 * every document the process can hold is waiting. Passes of one tag run one after another in the
 * order their groups closed, so resolution stays serial and in arrival order per tag; tags are
 * independent. A document's `submit` settles when every tag has committed it: its message is
 * acknowledged only then, so a process killed mid-group loses nothing (the broker redelivers
 * every document of the group, and the store's memorized marks skip what was committed).
 */
export class DreamGroups {
  private readonly pending = new Map<string, Pending>();
  /** Per tag, the last pass started: the next waits for it. */
  private readonly chains = new Map<string, Promise<unknown>>();
  private waiting = 0;
  private readonly setTimer: (fn: () => void, ms: number) => unknown;
  private readonly clearTimer: (t: unknown) => void;

  constructor(private readonly opts: DreamGroupOptions) {
    this.setTimer = opts.setTimer ?? ((fn, ms) => setTimeout(fn, ms));
    this.clearTimer = opts.clearTimer ?? ((t) => clearTimeout(t as ReturnType<typeof setTimeout>));
  }

  /** Documents waiting in open groups (for tests and metrics). */
  get waitingDocuments(): number {
    return this.waiting;
  }

  /** Memorize a document in each of its tags, grouped per its `dreaming`; settles when all have committed it. */
  async submit(doc: DocumentToMemorize): Promise<MemorizeOutcome[]> {
    if (doc.taskType !== 'memory') return [];
    const tags = [...new Set(doc.containerTags)];
    const instant = doc.dreaming === 'instant' || this.opts.windowMs <= 0 || this.opts.maxDocs <= 1;
    const outcomes = tags.map(
      (tag) =>
        new Promise<MemorizeOutcome>((resolve, reject) => {
          let g = this.pending.get(tag);
          if (!g) {
            g = { tag, docs: [], waiters: [], timer: null };
            this.pending.set(tag, g);
            if (!instant) {
              const group = g;
              g.timer = this.setTimer(() => this.close(group), this.opts.windowMs);
            }
          }
          g.docs.push(doc);
          g.waiters.push({ resolve, reject });
          this.waiting++;
          if (instant || g.docs.length >= this.opts.maxDocs) this.close(g);
        }),
    );
    // Every slot holds a waiting document: nothing more can arrive, so waiting longer is pointless.
    while (this.waiting >= this.opts.capacity && this.pending.size) this.close(this.pending.values().next().value!);
    return Promise.all(outcomes);
  }

  /** Memorize what is waiting now (at shutdown: the documents are settled rather than handed back). */
  flushAll(): void {
    for (const g of [...this.pending.values()]) this.close(g);
  }

  private close(g: Pending): void {
    if (this.pending.get(g.tag) !== g) return;
    this.pending.delete(g.tag);
    if (g.timer !== null) this.clearTimer(g.timer);
    this.waiting -= g.docs.length;
    const prev = this.chains.get(g.tag) ?? Promise.resolve();
    const run = prev.then(
      () => this.opts.run(g.tag, g.docs),
      () => this.opts.run(g.tag, g.docs),
    );
    this.chains.set(g.tag, run);
    run.then(
      (o) => g.waiters.forEach((w) => w.resolve(o)),
      (e) => g.waiters.forEach((w) => w.reject(e)),
    ).finally(() => {
      if (this.chains.get(g.tag) === run) this.chains.delete(g.tag);
    });
  }
}
