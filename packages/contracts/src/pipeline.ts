import type { EventKind } from './names.js';

/** A document's taskType (the submission's `taskType`). */
export type TaskType = 'memory' | 'superrag';

/**
 * The pipeline as data. Every stage of a document, in order, and every other consumer of the
 * document log. Consumer names and policies, statuses and their order, the re-drive order, what a
 * stalled document waits on, which kinds each reader decodes and the launcher's services are all
 * derived from these two tables (see docs/pipeline.md, "Adding a stage").
 */

/**
 * Delivery settings of a durable consumer, chosen on purpose:
 * - ackWaitMs: how long a message may be held without an ack before the server redelivers it.
 *   The pull loop keeps every message it holds alive (working() every ack_wait/5), so this bounds
 *   only a dead worker's hold: 5 s, so a killed worker's documents move again within seconds.
 * - maxDeliver: the server stops redelivering after this many attempts; the runner fails the
 *   document as `exhausted` on the last one, so nothing is dropped silently.
 * - maxAckPending: the most unacked messages in flight across all replicas of the service.
 */
export interface ConsumerPolicy {
  ackWaitMs: number;
  maxDeliver: number;
  maxAckPending: number;
}

const ACK_WAIT_MS = 5_000;

/** One stage: a service that consumes one event kind and emits the next. */
export interface StageRow {
  /** What a failure is blamed on (`document.failed.v1` data.stage, the API's error.stage). */
  stage: string;
  /** The service folder (services/<service>) and its durable consumer's name. */
  service: string;
  consumes: EventKind;
  emits: EventKind;
  /**
   * The document's status while this stage works, or null when the document keeps the status of
   * the stage before it. The arrival of the stage's input sets it (the stage before is done, this
   * one is next); only the entrance, whose input is the submission (the document is `queued` until
   * a worker takes it), announces its status with `stage-started` when it starts (see
   * announcesStart and STATUS_ON_ARRIVAL).
   */
  status: string | null;
  /** `memstream replay redrive --from <redrive>` starts here; the stages before it re-emit their earlier output. */
  redrive: string;
  /** The document is `done` once this stage's event is in the log. Exactly one row says so. */
  completes?: true;
  policy: ConsumerPolicy;
}

export const PIPELINE = [
  {
    stage: 'extracting',
    service: 'extractor',
    consumes: 'submitted',
    emits: 'extracted',
    status: 'extracting',
    redrive: 'extract',
    policy: { ackWaitMs: ACK_WAIT_MS, maxDeliver: 6, maxAckPending: 64 },
  },
  {
    stage: 'chunking',
    service: 'chunker',
    consumes: 'extracted',
    emits: 'chunked',
    status: 'chunking',
    redrive: 'chunk',
    policy: { ackWaitMs: ACK_WAIT_MS, maxDeliver: 6, maxAckPending: 256 },
  },
  {
    stage: 'embedding',
    service: 'embedder',
    consumes: 'chunked',
    emits: 'embedded',
    status: 'embedding',
    redrive: 'embed',
    policy: { ackWaitMs: ACK_WAIT_MS, maxDeliver: 6, maxAckPending: 256 },
  },
  {
    stage: 'indexing',
    service: 'indexer',
    consumes: 'embedded',
    emits: 'indexed',
    status: null,
    redrive: 'index',
    completes: true,
    policy: { ackWaitMs: ACK_WAIT_MS, maxDeliver: 6, maxAckPending: 256 },
  },
] as const satisfies readonly StageRow[];

export type PipelineRow = (typeof PIPELINE)[number];

/** A consumer of the log that is not a stage: it reads some kinds and emits no next stage. */
export interface ReaderRow {
  /** The durable consumer's name. */
  durable: string;
  /** The service that runs it. */
  service: string;
  /**
   * Every event kind, and whether this reader decodes it. Exhaustive on purpose: a new kind does
   * not compile until every reader says whether it reads it, and the reader's tests check that a
   * kind it skips would not have changed its state (services/<service>: "reads every kind it must").
   */
  reads: Record<EventKind, boolean>;
  /** 'new': starts at the end of the log (history is never announced). Default: the whole log. */
  startAt?: 'new';
  /**
   * Only documents of these task types: a message whose TASK_TYPE_HEADER names another is acked
   * unread (one without the header is decoded and left to the handler). Default: every task type.
   */
  taskTypes?: readonly TaskType[];
  policy: ConsumerPolicy;
}

export const READERS = {
  /** The document view. embedded carries every chunk's vector but changes nothing in the view; chunked moves it to embedding. */
  projection: {
    durable: 'projection',
    service: 'projection',
    reads: { submitted: true, 'stage-started': true, extracted: true, chunked: true, embedded: false, indexed: true, failed: true, 'metadata-updated': true, deleted: true },
    policy: { ackWaitMs: ACK_WAIT_MS, maxDeliver: 10, maxAckPending: 1024 },
  },
  /** The indexer's second consumer: tag and metadata changes of indexed chunks. */
  indexerMeta: {
    durable: 'indexer-meta',
    service: 'indexer',
    reads: { submitted: false, 'stage-started': false, extracted: false, chunked: false, embedded: false, indexed: false, failed: false, 'metadata-updated': true, deleted: false },
    policy: { ackWaitMs: ACK_WAIT_MS, maxDeliver: 6, maxAckPending: 256 },
  },
  /**
   * Memories (docs/memory.md): made from a document once it is indexed (taskType memory), into
   * the MEMORY stream. The document's status keeps meaning "searchable", so the memorizer is a
   * reader, not a stage: it emits no document event.
   */
  memorizer: {
    durable: 'memorizer',
    service: 'memorizer',
    reads: { submitted: false, 'stage-started': false, extracted: false, chunked: false, embedded: false, indexed: true, failed: false, 'metadata-updated': false, deleted: false },
    taskTypes: ['memory'],
    policy: { ackWaitMs: ACK_WAIT_MS, maxDeliver: 6, maxAckPending: 256 },
  },
  /** The memorizer's second consumer: what a deleted document alone taught is forgotten. */
  memorizerDeleted: {
    durable: 'memorizer-deleted',
    service: 'memorizer',
    reads: { submitted: false, 'stage-started': false, extracted: false, chunked: false, embedded: false, indexed: false, failed: false, 'metadata-updated': false, deleted: true },
    policy: { ackWaitMs: ACK_WAIT_MS, maxDeliver: 6, maxAckPending: 256 },
  },
  /** Lifecycle transitions for webhooks and SSE: the transitions and the tag changes. */
  notifier: {
    durable: 'notifier',
    service: 'notifier',
    reads: { submitted: true, 'stage-started': true, extracted: true, chunked: true, embedded: false, indexed: true, failed: true, 'metadata-updated': true, deleted: true },
    startAt: 'new',
    policy: { ackWaitMs: ACK_WAIT_MS, maxDeliver: 10, maxAckPending: 1024 },
  },
} as const satisfies Record<string, ReaderRow>;

export type ReaderName = keyof typeof READERS;
export type StageService = PipelineRow['service'];
export type ConsumerName = StageService | ReaderName;

/** The kinds a reader decodes, in EVENT_KINDS order. */
export function kindsRead(reader: ReaderName): EventKind[] {
  return (Object.entries(READERS[reader].reads) as Array<[EventKind, boolean]>).filter(([, r]) => r).map(([k]) => k);
}

/** The stage row of a service. */
export function stageOf<S extends StageService>(service: S): Extract<PipelineRow, { service: S }> {
  return PIPELINE.find((r) => r.service === service) as Extract<PipelineRow, { service: S }>;
}

/** Whether a consumer is a pipeline stage (rather than a reader). */
export function isStage(name: ConsumerName): name is StageService {
  return PIPELINE.some((r) => r.service === name);
}

/**
 * One durable pull consumer per stage and per reader; replicas of a service share it
 * (work-queue style). A consumer of one kind filters on it (nats-server 2.9 allows one filter
 * subject per consumer); one of several kinds takes doc.> and skips the others unread.
 */
export interface ConsumerSpec {
  durable: string;
  filter: string;
  policy: ConsumerPolicy;
  startAt?: 'new';
  /** The kinds the consumer decodes; others are acked unread. */
  kinds: readonly EventKind[];
  /** The task types it reads (ReaderRow.taskTypes); absent: every one. */
  taskTypes?: readonly TaskType[];
  /**
   * The entrance's second durable consumer, for its bulk lane: the same filter and policy, reading
   * the messages whose lane header says bulk (the first reads the others). Only the first stage has
   * one (see BULK_ADMISSION); the later stages and the readers have none.
   */
  bulkDurable?: string;
}

/** The bulk-lane durable of a stage: `<service>-bulk`. */
export function bulkDurableOf(service: StageService): string {
  return `${service}-bulk`;
}

/**
 * Fairness between tenants (docs/pipeline.md, "Fairness"). The lanes exist at the entrance, the
 * first stage, only: it reads its input with two durables, one per lane, and takes bulk work only
 * while the stages after it hold a short backlog. A tenant's burst then waits at the entrance
 * instead of filling every later stage's queue, and a document of the normal lane passes the
 * burst at the entrance and finds at most `maxBacklog` documents ahead of it further on — without
 * every stage input being delivered twice (once per lane's durable), which cost about a quarter of
 * the pipeline's throughput when every stage had two lanes.
 */
export const BULK_ADMISSION = {
  /** The stages whose backlog (messages not yet delivered plus delivered and not yet acked) gates the bulk lane. */
  downstream: PIPELINE.slice(1).map((r) => r.service) as StageService[],
  /**
   * Above this many documents waiting or in work after the entrance, the bulk lane holds at most
   * one message (it slows, never stops). 256, not 128, since the stages after the entrance hold up
   * to 64, 64 and 128 (batches of 64): bench ingest --memory-docs 0, order 256, 128, 256, 128
   * (2026-12-01), 482 and 461 documents/s against 456 and 422; bench load, 256 then 128: drained
   * in 36.1 s against 41.8 s, small tenants done in p50 0.66 s / p99 1.57 s against 0.46 / 1.96 s.
   */
  maxBacklog: 256,
  /**
   * Above this many messages not yet delivered to the entrance's normal-lane durable, the bulk
   * lane holds at most one message too: the normal lane is far behind (documents of its own
   * waiting, or a long run of bulk submissions to pass over before it reaches one), and bulk work
   * would take the entrance's time from it. Loose on purpose: a busy worker often falls a few
   * dozen messages behind a steady stream of adds for a moment (docs/pipeline.md, "Fairness").
   */
  maxNormalAhead: 256,
  /** How often the entrance reads that backlog. */
  pollMs: 100,
};

/** Bulk-lane durables of an earlier layout (every stage had two lanes): removed at start, so nothing accumulates on them. */
export const RETIRED_DURABLES = PIPELINE.slice(1).map((r) => bulkDurableOf(r.service));

function readerSpec(name: ReaderName): ConsumerSpec {
  const r: ReaderRow = READERS[name];
  const kinds = kindsRead(name);
  return {
    durable: r.durable,
    filter: kinds.length === 1 ? `doc.*.${kinds[0]}` : 'doc.>',
    policy: r.policy,
    kinds,
    ...(r.startAt ? { startAt: r.startAt } : {}),
    ...(r.taskTypes ? { taskTypes: r.taskTypes } : {}),
  };
}

export const CONSUMERS = Object.fromEntries([
  ...PIPELINE.map((r, i): [string, ConsumerSpec] => [
    r.service,
    { durable: r.service, filter: `doc.*.${r.consumes}`, policy: r.policy, kinds: [r.consumes], ...(i === 0 ? { bulkDurable: bulkDurableOf(r.service) } : {}) },
  ]),
  ...(Object.keys(READERS) as ReaderName[]).map((n): [string, ConsumerSpec] => [n, readerSpec(n)]),
]) as Record<ConsumerName, ConsumerSpec>;

export const CONSUMER_NAMES = Object.keys(CONSUMERS) as ConsumerName[];

type StatusOf<R> = R extends { status: infer S } ? (S extends string ? S : never) : never;
/** The statuses a stage announces, in pipeline order. */
export type StageStatus = StatusOf<PipelineRow>;
export const STAGE_STATUSES = PIPELINE.flatMap((r) => (r.status === null ? [] : [r.status])) as StageStatus[];

/** The statuses of a document still in the pipeline, in order. */
export const IN_PROGRESS_STATUSES = ['queued', ...STAGE_STATUSES] as Array<'queued' | StageStatus>;

/**
 * Whether a stage announces its status with `stage-started` when it takes a document: only the
 * entrance. Its input is the submission, which leaves the document `queued` (waiting for a
 * worker), so "extracting" is news. A later stage's status follows from its input's arrival
 * (STATUS_ON_ARRIVAL): announcing it again cost a publish, and a delivery to every reader of the
 * log, per stage and document, for no news.
 */
export function announcesStart(service: StageService): boolean {
  const row: StageRow = stageOf(service);
  return row.status !== null && row === PIPELINE[0];
}

/** The status a document takes when an event of a kind arrives that is a later stage's input: chunking on extracted, embedding on chunked. */
export const STATUS_ON_ARRIVAL = Object.fromEntries(
  PIPELINE.slice(1).flatMap((r: StageRow) => (r.status === null ? [] : [[r.consumes, r.status]])),
) as Partial<Record<EventKind, StageStatus>>;

/**
 * What a document in `status` waits on, most advanced first: the events the stalled-document
 * detector publishes again (the first one of the document's revision that is in the log). A
 * status covers the input of the stage it names (which set it, or was in the log before the
 * entrance announced it) and the inputs of the stages after it that have no status, up to the
 * one that makes the document done.
 */
export function waitingOn(status: string): EventKind[] {
  if (status === 'queued') return [PIPELINE[0].consumes];
  const at = PIPELINE.findIndex((r) => r.status === status);
  if (at < 0) return [];
  const kinds: EventKind[] = [PIPELINE[at]!.consumes];
  for (let i = at + 1; i < PIPELINE.length; i++) {
    const row: StageRow = PIPELINE[i]!;
    // The arrival of a stage's input with a status of its own moves the document on.
    if (row.status !== null) break;
    kinds.push(row.consumes);
    if (row.completes) break;
  }
  return kinds.reverse();
}

/** The stage a stalled document in `status` is failed at. */
export function stageOfStatus(status: string): PipelineRow['stage'] | null {
  if (status === 'queued') return PIPELINE[0].stage;
  return PIPELINE.find((r) => r.status === status)?.stage ?? null;
}

/** The event kind whose arrival makes the document `done`. */
export const COMPLETING_KIND: EventKind = PIPELINE.find((r: StageRow) => r.completes)!.emits;

/** Re-drive names in pipeline order. */
export type RedriveName = PipelineRow['redrive'];
export const REDRIVE_ORDER = PIPELINE.map((r) => r.redrive) as RedriveName[];

/**
 * Whether a re-drive from `from` recomputes the stage of `service`: the stages before `from`
 * re-emit what they emitted for the re-driven revision instead.
 */
export function recomputes(service: StageService, from: RedriveName): boolean {
  return PIPELINE.findIndex((r) => r.service === service) >= REDRIVE_ORDER.indexOf(from);
}

/** The services `./memstream up` starts, in start order: readers that build state first, the stages, then the gateway (last, so it answers only when all are up). */
export const SERVICE_NAMES = [...new Set<string>(['projection', ...PIPELINE.map((r) => r.service), ...Object.values(READERS).map((r) => r.service), 'gateway'])] as Array<
  StageService | (typeof READERS)[ReaderName]['service'] | 'gateway'
>;

/** Stop order: the gateway first (no new work), the stages in pipeline order, then the readers, the view last (it records what the others finished). */
export const STOP_ORDER = ['gateway', ...PIPELINE.map((r) => r.service), ...SERVICE_NAMES.filter((s) => s !== 'gateway' && s !== 'projection' && !PIPELINE.some((r) => r.service === s)), 'projection'] as typeof SERVICE_NAMES;

/**
 * `./memstream up`'s process layout on one machine (the embedded default): the workers in two
 * Node processes, each still its own durable consumers and broker connection, each process one
 * event loop, one heap and one copy of the code they share (the NATS client, zod, the runner).
 * - `stages`: the stages before the completing one, whose work is the document's text and
 *   vectors in memory (extract, chunk, embed);
 * - `stores`: the completing stage and every reader of the log, the services that write the local
 *   stores (the chunk index, the view, the memories, the notifier's notes).
 * Measured against one process per service: about a quarter more documents a second with a
 * quarter less CPU per document (docs/pipeline.md, "Process layout"). Kubernetes keeps one
 * service per process (deploy/), and `MEMSTREAM_LAYOUT=per-service` does so under `up`.
 */
export const WORKER_HOSTS = {
  stages: PIPELINE.filter((r: StageRow) => !r.completes).map((r) => r.service),
  stores: [...new Set<string>([...PIPELINE.filter((r: StageRow) => r.completes).map((r) => r.service), ...STOP_ORDER.filter((s) => Object.values(READERS).some((r) => r.service === s))])],
} as Record<'stages' | 'stores', Array<Exclude<(typeof SERVICE_NAMES)[number], 'gateway'>>>;
export type WorkerHostName = keyof typeof WORKER_HOSTS;
