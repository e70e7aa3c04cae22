import { PermanentError } from '@memstream/kit';
import { announcesStart, carriesRedrive, recomputes, stageOf, type DataOf, type DocumentEvent, type EventOf, type EventType, type PipelineRow, type Redrive, type StageService } from '@memstream/contracts';
import { follow } from './events.js';
import type { BatchHandler, Handler, HandlerContext } from './runner.js';

type RowOf<S extends StageService> = Extract<PipelineRow, { service: S }>;
/** The event type a stage consumes. */
export type ConsumedType<S extends StageService> = `document.${RowOf<S>['consumes']}.v1` & EventType;
/** The event type a stage emits. */
export type EmittedType<S extends StageService> = `document.${RowOf<S>['emits']}.v1` & EventType;

/**
 * A stage's own work: given its event (already the right type, of the newest revision), the
 * events to emit. The runner publishes what it returns (and, at the entrance, `stage-started` before it).
 */
export type StageHandler<S extends StageService> = (event: EventOf<ConsumedType<S>>, ctx: HandlerContext) => Promise<DocumentEvent[] | void>;

export interface StageDefinition<S extends StageService> {
  handle: StageHandler<S>;
  /**
   * The output of the re-driven revision, read from the log, or null when it has none. Given,
   * a re-drive from a later stage re-emits it instead of calling `handle`.
   */
  outputOf?: (documentId: string, revision: number) => Promise<DataOf<EmittedType<S>> | null>;
  /**
   * What to re-emit of an earlier output, or null to compute again (the embedder: only vectors of
   * the model in use now). Default: the output as it was.
   */
  reuse?: (prior: DataOf<EmittedType<S>>, event: EventOf<ConsumedType<S>>) => Promise<DataOf<EmittedType<S>> | null> | DataOf<EmittedType<S>> | null;
}

/** A stage's work on a batch at once (one model call, one store transaction): one settled result per event, in order. */
export type StageBatchHandler<S extends StageService> = (
  items: Array<{ event: EventOf<ConsumedType<S>>; ctx: HandlerContext }>,
) => Promise<Array<PromiseSettledResult<DocumentEvent[] | void>>>;

/**
 * What every stage does the same way before its own work, once: check the event's type,
 * announce `stage-started(<status>)` at the entrance (announcesStart), and apply the re-drive rule —
 * a stage before the re-drive's `from` re-emits what it emitted for the re-driven revision
 * (with the re-drive carried on, when its event has the field) rather than compute it again.
 * Returns the event to work on, or the events that answer it without work.
 */
function stagePrelude<S extends StageService>(service: S, def: Omit<StageDefinition<S>, 'handle'>) {
  const row = stageOf(service) as PipelineRow;
  const consumed = `document.${row.consumes}.v1` as ConsumedType<S>;
  const emitted = `document.${row.emits}.v1` as EmittedType<S>;
  const announces = announcesStart(service);
  return async (event: DocumentEvent, ctx: HandlerContext): Promise<{ own: EventOf<ConsumedType<S>> } | { out: DocumentEvent[] }> => {
    // The consumer filters on the kind; another version of it needs an upcaster, not a guess.
    if (event.type !== consumed) throw new PermanentError(`${service} consumes ${consumed}, got ${event.type}`, 'poison');
    const own = event as EventOf<ConsumedType<S>>;
    // Only the entrance announces its start (a later stage's status follows from its input's
    // arrival). Sent now and awaited by the runner with the stage's output, before the ack.
    if (announces) void ctx.emit(follow(event, 'document.stage-started.v1', { stage: row.status! }));
    const redrive = (own.data as { redrive?: Redrive }).redrive;
    if (redrive && def.outputOf && !recomputes(service, redrive.from)) {
      const prior = await def.outputOf(event.documentId, redrive.ofRevision);
      const out = prior && (def.reuse ? await def.reuse(prior, own) : prior);
      if (out) {
        ctx.log.info({ redrive }, `re-drive from ${redrive.from}: re-emitting the ${row.emits} output of revision ${redrive.ofRevision}`);
        const data = (carriesRedrive(emitted) ? { ...out, redrive } : out) as DataOf<EmittedType<S>>;
        return { out: [follow(event, emitted, data)] };
      }
      ctx.log.info({ redrive }, `re-drive from ${redrive.from}: no reusable ${row.emits} output of revision ${redrive.ofRevision} in the log, computing again`);
    }
    return { own };
  };
}

/** A stage's handler, wrapped with what every stage does the same way (see stagePrelude). */
export function stageHandler<S extends StageService>(service: S, def: StageDefinition<S>): Handler {
  const prelude = stagePrelude(service, def);
  return async (event, ctx) => {
    const p = await prelude(event, ctx);
    return 'out' in p ? p.out : def.handle(p.own, ctx);
  };
}

/** A stage's batch handler, wrapped with what every stage does the same way (see stagePrelude): the events that need work go to `handleBatch` together. */
export function stageBatchHandler<S extends StageService>(service: S, def: Omit<StageDefinition<S>, 'handle'> & { handleBatch: StageBatchHandler<S> }): BatchHandler {
  const prelude = stagePrelude(service, def);
  return async (items) => {
    const results = await Promise.allSettled(items.map(({ event, ctx }) => prelude(event, ctx)));
    const work: number[] = [];
    const out: Array<PromiseSettledResult<DocumentEvent[] | void>> = results.map((r, k) => {
      if (r.status === 'rejected') return r;
      if ('out' in r.value) return { status: 'fulfilled', value: r.value.out };
      work.push(k);
      return { status: 'fulfilled', value: [] };
    });
    if (work.length === 0) return out;
    const done = await def.handleBatch(work.map((k) => ({ event: (results[k] as PromiseFulfilledResult<{ own: EventOf<ConsumedType<S>> }>).value.own, ctx: items[k]!.ctx })));
    work.forEach((k, i) => (out[k] = done[i] ?? { status: 'rejected', reason: new Error(`${service}: the batch handler returned no result for this event`) }));
    return out;
  };
}
