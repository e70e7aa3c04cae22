import { headers as natsHeaders, type MsgHdrs } from '@nats-io/nats-core';
import type { PubAck } from '@nats-io/jetstream';
import {
  CLAIM_CHECK_BYTES,
  BLOB_BUCKET,
  DocumentEvent,
  EVENT_KIND_OF,
  WireEnvelope,
  docSubject,
  type DataOf,
  type EventKind,
  type EventOf,
  type EventType,
  STREAM_DOCS,
  TASK_TYPE_HEADER,
} from '@memstream/contracts';
import { derivedEventId } from '@memstream/kit';
import { z } from 'zod';
import type { Bus } from './connect.js';
import { blobKey, blobStore } from './blobs.js';

const enc = new TextEncoder();
const dec = new TextDecoder();

/** One message as the runner hands it to tracing: where it is in the stream, and the headers it came with. */
export interface ConsumeInfo {
  consumer: string;
  subject: string;
  documentId: string;
  /** The event kind from the subject (submitted, extracted, ...). */
  kind: string;
  seq: number;
  deliveryCount: number;
  headers: Record<string, string>;
}

/** How the runner disposed of one message (the span's status and the metrics' labels). */
export interface ConsumeResult {
  outcome: 'handled' | 'skipped-stale' | 'retried' | 'failed' | 'dead-lettered';
  /** Set when the outcome is failed or dead-lettered: permanent, poison, exhausted, or undecodable. */
  failureClass?: string;
  reason?: string;
  eventType?: string;
  revision?: number;
}

/** A consumer's backlog as the server sees it. */
export interface ConsumerBacklog {
  /** Messages matching the filter not yet delivered. */
  pending: number;
  /** Delivered and not yet acked. */
  ackPending: number;
  redelivered: number;
}

/**
 * Where the bus reports to tracing and metrics. The bus cannot depend on @memstream/telemetry
 * (telemetry depends on kit, and services choose whether to load it), so telemetry installs its
 * implementation in a global slot when a service imports it, and the bus does nothing without one.
 */
export interface BusTelemetry {
  /** Publish inside a producer span: `send` gets the headers to publish with, carrying the span's trace context. */
  publish<T>(info: { subject: string; eventType: string; documentId: string; headers: Record<string, string> }, send: (headers: Record<string, string>) => Promise<T>): Promise<T>;
  /** Handle one message inside a consumer span continued from its headers; `handle` gets the headers that carry that span on. */
  consume<R extends ConsumeResult>(info: ConsumeInfo, handle: (headers: Record<string, string>) => Promise<R>): Promise<R>;
  /**
   * The trace ids a message's log lines carry, from the headers its handler got, when no active
   * context puts them there (tracing without spans). Absent or undefined: the logger's own mixin does.
   */
  logBindings?(headers: Record<string, string>): Record<string, string> | undefined;
  /** Read a consumer's backlog on every scrape; the returned function stops it. */
  watchConsumer(consumer: string, read: () => Promise<ConsumerBacklog>): () => void;
  /** The Prometheus exposition of this process for a scrape with this Authorization header. */
  metrics(authorization: string | undefined): Promise<{ status: number; contentType: string; body: string }>;
  /** Export buffered spans: the last step of shutdown. */
  flush(): Promise<void>;
}

const TELEMETRY_SLOT = Symbol.for('memstream.bus.telemetry');

/** Without telemetry: headers pass through unchanged (the incoming traceparent goes on), nothing is measured. */
const NO_TELEMETRY: BusTelemetry = {
  publish: (info, send) => send(info.headers),
  consume: (info, handle) => handle(info.headers),
  watchConsumer: () => () => {},
  metrics: async () => ({ status: 404, contentType: 'application/json', body: JSON.stringify({ error: 'Not found', details: 'this process keeps no metrics (@memstream/telemetry is not loaded)' }) }),
  flush: async () => {},
};

/** The installed telemetry, or the pass-through one. */
export function busTelemetry(): BusTelemetry {
  return ((globalThis as Record<symbol, unknown>)[TELEMETRY_SLOT] as BusTelemetry | undefined) ?? NO_TELEMETRY;
}

/** Install the bus's telemetry (what @memstream/telemetry does on import). */
export function installBusTelemetry(t: BusTelemetry): void {
  (globalThis as Record<symbol, unknown>)[TELEMETRY_SLOT] = t;
}

export interface PublishOptions {
  /** Optimistic concurrency: the publish fails unless the last message on this event's subject has this sequence (0: none). */
  expectLastSubjectSequence?: number;
  /** W3C trace context and other headers to carry along; a traceparent here is the producer span's parent (else the active span). */
  headers?: Record<string, string>;
}

/**
 * Validate and publish one event. Its id is the Nats-Msg-Id, so a retried publish is
 * deduplicated by the server. Data too large for a message goes to the Object Store first and
 * the event carries a claim check instead.
 */
export async function publishEvent(bus: Bus, event: DocumentEvent, opts: PublishOptions = {}): Promise<PubAck> {
  const valid = DocumentEvent.parse(event);
  let body = enc.encode(JSON.stringify(valid));
  if (body.byteLength > CLAIM_CHECK_BYTES) {
    const data = enc.encode(JSON.stringify(valid.data));
    const key = blobKey(valid.documentId, 'events', valid.id);
    await blobStore(bus).put(key, data);
    const wire: WireEnvelope = { ...valid, data: undefined, claim: { bucket: BLOB_BUCKET, key, bytes: data.byteLength } };
    body = enc.encode(JSON.stringify(wire));
  }
  const subject = docSubject(valid.documentId, EVENT_KIND_OF[valid.type]);
  return busTelemetry().publish({ subject, eventType: valid.type, documentId: valid.documentId, headers: opts.headers ?? {} }, (headers) => {
    const h = natsHeaders();
    for (const [k, v] of Object.entries(headers)) h.set(k, v);
    h.set('Memstream-Event-Type', valid.type);
    if (valid.type === 'document.submitted.v1') h.set(TASK_TYPE_HEADER, valid.data.taskType);
    return bus.whileConnected(() =>
      bus.js.publish(subject, body, {
        msgID: valid.id,
        headers: h,
        ...(opts.expectLastSubjectSequence !== undefined ? { expect: { lastSubjectSequence: opts.expectLastSubjectSequence } } : {}),
      }),
    );
  });
}

/** An envelope's data: carried in it, or fetched from the Object Store by its claim check. */
async function dataOf(bus: Bus, wire: WireEnvelope): Promise<unknown> {
  if (!wire.claim) return wire.data;
  const blob = await blobStore(bus).get(wire.claim.key);
  if (!blob) throw new Error(`claim-checked data ${wire.claim.key} is missing from the object store`);
  return JSON.parse(dec.decode(blob));
}

/** Decode a message body into a validated event, fetching claim-checked data. Throws on a malformed event. */
export async function decodeEvent(bus: Bus, body: Uint8Array): Promise<DocumentEvent> {
  const wire = WireEnvelope.parse(JSON.parse(dec.decode(body)));
  if (!wire.claim) return DocumentEvent.parse(wire);
  const { claim: _claim, ...rest } = wire;
  return DocumentEvent.parse({ ...rest, data: await dataOf(bus, wire) });
}

/**
 * A document's last message of one kind on the log. A direct get (the stream has allow_direct):
 * lighter on the server than the JSON API, and a miss is a null rather than an error object built
 * with a stack trace on every call.
 */
function lastMessage(bus: Bus, documentId: string, kind: EventKind) {
  return bus.whileConnected(() => bus.jsm.direct.getMessage(STREAM_DOCS, { last_by_subj: docSubject(documentId, kind) }));
}

/** The last event of one kind for a document (a direct read of the stream), with its stream sequence. */
export async function lastEvent(bus: Bus, documentId: string, kind: EventKind): Promise<{ event: DocumentEvent; seq: number } | null> {
  const m = await lastMessage(bus, documentId, kind);
  if (!m) return null;
  return { event: await decodeEvent(bus, m.data), seq: m.seq };
}

/**
 * Part of a document's last event of one kind: the envelope with its data validated by `schema`
 * alone, not the whole event (a submission's content, a chunk list), for readers that need a few
 * fields of it on every message. Claim-checked data is fetched as decodeEvent does.
 */
export async function lastEventPart<T extends z.ZodType>(bus: Bus, documentId: string, kind: EventKind, schema: T): Promise<{ seq: number; revision: number; data: z.infer<T> } | null> {
  const m = await lastMessage(bus, documentId, kind);
  if (!m) return null;
  const wire = WireEnvelope.parse(JSON.parse(dec.decode(m.data)));
  return { seq: m.seq, revision: wire.revision, data: schema.parse(await dataOf(bus, wire)) };
}

/**
 * The revision and stream sequence of a document's last event of one kind, read without decoding
 * the event (no validation, no claim-checked data): every runner asks it for every message.
 */
export async function lastRevisionOf(bus: Bus, documentId: string, kind: EventKind): Promise<{ revision: number; seq: number } | null> {
  const m = await lastMessage(bus, documentId, kind);
  if (!m) return null;
  const { revision } = RevisionOnly.parse(JSON.parse(dec.decode(m.data)));
  return { revision, seq: m.seq };
}
const RevisionOnly = z.object({ revision: z.number().int().nonnegative() });

/** The newest revision the log knows for a document, and whether its latest state is deleted. */
export async function latestRevision(bus: Bus, documentId: string): Promise<{ revision: number; deleted: boolean; submittedSeq: number }> {
  const [sub, del] = await Promise.all([lastRevisionOf(bus, documentId, 'submitted'), lastRevisionOf(bus, documentId, 'deleted')]);
  const subRev = sub?.revision ?? 0;
  const delRev = del?.revision ?? 0;
  return { revision: Math.max(subRev, delRev), deleted: del !== null && delRev >= subRev, submittedSeq: sub?.seq ?? 0 };
}

/**
 * Build the event that `cause` leads to: same document, revision and correlation; an id derived
 * from the cause, so a redelivered message emits the same event (and the server drops the copy).
 */
export function follow<T extends EventType>(cause: DocumentEvent, type: T, data: DataOf<T>, n = 0, now: () => Date = () => new Date()): EventOf<T> {
  return {
    id: derivedEventId(cause.id, type, n),
    type,
    documentId: cause.documentId,
    revision: cause.revision,
    occurredAt: now().toISOString(),
    correlationId: cause.correlationId,
    causationId: cause.id,
    data,
  } as EventOf<T>;
}

export function headersToRecord(h: MsgHdrs | undefined, keys: string[] = ['traceparent', 'tracestate']): Record<string, string> {
  const out: Record<string, string> = {};
  if (!h) return out;
  for (const k of keys) {
    const v = h.get(k);
    if (v) out[k] = v;
  }
  return out;
}

/** The data a stage emitted for one revision of a document, by event kind. */
export interface StageOutput {
  extracted: DataOf<'document.extracted.v1'>;
  chunked: DataOf<'document.chunked.v1'>;
  embedded: DataOf<'document.embedded.v1'>;
}

/**
 * The data a stage emitted for one revision of a document: its last event of `kind`, if that
 * event belongs to `revision`. A re-drive re-emits it rather than compute it again.
 */
export async function dataOfRevision<K extends keyof StageOutput>(bus: Bus, documentId: string, kind: K, revision: number): Promise<StageOutput[K] | null> {
  const last = await lastEvent(bus, documentId, kind);
  if (!last || last.event.revision !== revision || last.event.type !== `document.${kind}.v1`) return null;
  return last.event.data as StageOutput[K];
}
