import { describe, expect, it } from 'vitest';
import { CONSUMERS, STATUS_ON_ARRIVAL, announcesStart, DOCUMENT_STATUSES, IN_PROGRESS_STATUSES, LIFECYCLE_TRANSITIONS, PIPELINE, REDRIVE_ORDER, SERVICE_NAMES, STAGES, STOP_ORDER, WORKER_HOSTS, recomputes, stageOfStatus, waitingOn } from './index.js';

// What the table derives, pinned: a new row must change these on purpose (and the API's statuses
// only with the spec).
describe('the pipeline table', () => {
  it('derives the statuses, their order and the failure stages', () => {
    expect(DOCUMENT_STATUSES).toEqual(['queued', 'extracting', 'chunking', 'embedding', 'done', 'failed']);
    expect(IN_PROGRESS_STATUSES).toEqual(['queued', 'extracting', 'chunking', 'embedding']);
    expect(LIFECYCLE_TRANSITIONS).toEqual([...DOCUMENT_STATUSES, 'deleted']);
    expect(STAGES).toEqual(['extracting', 'chunking', 'embedding', 'indexing']);
  });

  it('derives one durable consumer per stage on the kind it consumes, and one per reader', () => {
    expect(Object.fromEntries(Object.entries(CONSUMERS).map(([k, c]) => [k, `${c.durable} ${c.filter}${c.startAt ? ' new' : ''}`]))).toEqual({
      extractor: 'extractor doc.*.submitted',
      chunker: 'chunker doc.*.extracted',
      embedder: 'embedder doc.*.chunked',
      indexer: 'indexer doc.*.embedded',
      indexerMeta: 'indexer-meta doc.*.metadata-updated',
      projection: 'projection doc.>',
      memorizer: 'memorizer doc.*.indexed',
      memorizerDeleted: 'memorizer-deleted doc.*.deleted',
      notifier: 'notifier doc.> new',
    });
    for (const row of PIPELINE) expect(CONSUMERS[row.service].kinds).toEqual([row.consumes]);
  });

  it('chains: each stage consumes what the one before emits', () => {
    for (let i = 1; i < PIPELINE.length; i++) expect(PIPELINE[i]!.consumes).toBe(PIPELINE[i - 1]!.emits);
    expect(PIPELINE.filter((r) => 'completes' in r)).toHaveLength(1);
  });

  it('derives what a stalled document waits on, most advanced first, and where it fails', () => {
    expect(waitingOn('queued')).toEqual(['submitted']);
    expect(waitingOn('extracting')).toEqual(['submitted']);
    expect(waitingOn('chunking')).toEqual(['extracted']);
    expect(waitingOn('embedding')).toEqual(['embedded', 'chunked']);
    expect(waitingOn('done')).toEqual([]);
    expect(IN_PROGRESS_STATUSES.map(stageOfStatus)).toEqual(['extracting', 'extracting', 'chunking', 'embedding']);
  });

  it("derives which status an event sets: the entrance announces its own, a later stage's input sets that stage's", () => {
    expect(PIPELINE.map((r) => announcesStart(r.service))).toEqual([true, false, false, false]);
    expect(STATUS_ON_ARRIVAL).toEqual({ extracted: 'chunking', chunked: 'embedding' });
  });

  it('derives the re-drive order: stages before --from re-emit, the rest recompute', () => {
    expect(REDRIVE_ORDER).toEqual(['extract', 'chunk', 'embed', 'index']);
    expect(PIPELINE.map((r) => recomputes(r.service, 'embed'))).toEqual([false, false, true, true]);
    expect(PIPELINE.map((r) => recomputes(r.service, 'extract'))).toEqual([true, true, true, true]);
  });

  it("derives the launcher's services: start order and stop order", () => {
    expect(SERVICE_NAMES).toEqual(['projection', 'extractor', 'chunker', 'embedder', 'indexer', 'memorizer', 'notifier', 'gateway']);
    expect(STOP_ORDER).toEqual(['gateway', 'extractor', 'chunker', 'embedder', 'indexer', 'memorizer', 'notifier', 'projection']);
  });
});

describe("up's process layout", () => {
  it('hosts every worker exactly once: the stages before the last in one process, the last stage and the readers in the other', () => {
    expect(WORKER_HOSTS).toEqual({ stages: ['extractor', 'chunker', 'embedder'], stores: ['indexer', 'memorizer', 'notifier', 'projection'] });
    const hosted = Object.values(WORKER_HOSTS).flat();
    expect(hosted.sort()).toEqual(SERVICE_NAMES.filter((s) => s !== 'gateway').sort());
  });
});
