import type { Request, RequestHandler } from 'express';
import { ContainerTag, EventName, LIFECYCLE_TRANSITIONS, eventNameOf, type OutboundEvent } from '@memstream/contracts';
import { AppError, ValidationError, errorMessage, type Logger } from '@memstream/kit';
import { readTags, tagScope, type Principal } from '../handlers/scope.js';
import { principalOf } from './auth.js';
import { requestLog } from './request-log.js';

/** The stream of transitions (LIFECYCLE), from now or from just after a sequence. */
export interface LifecycleSource {
  open(from: { afterSeq?: number }): Promise<AsyncIterable<{ seq: number; event: OutboundEvent }> & { close(): Promise<void> }>;
}

/** The open SSE responses, so shutdown can end them (server.close() waits for every open connection). */
export class EventStreams {
  private readonly open = new Set<() => void>();
  private readonly perKey = new Map<string, number>();
  /** Register a stream (of a scoped key, when `keyId` is given); returns its unregister. */
  add(end: () => void, keyId?: string): () => void {
    this.open.add(end);
    if (keyId !== undefined) this.perKey.set(keyId, (this.perKey.get(keyId) ?? 0) + 1);
    return () => {
      if (!this.open.delete(end) || keyId === undefined) return;
      const n = (this.perKey.get(keyId) ?? 1) - 1;
      if (n > 0) this.perKey.set(keyId, n);
      else this.perKey.delete(keyId);
    };
  }
  /** Open streams of one scoped key on this replica. */
  countFor(keyId: string): number {
    return this.perKey.get(keyId) ?? 0;
  }
  get size(): number {
    return this.open.size;
  }
  closeAll(): void {
    for (const end of [...this.open]) end();
  }
}

export interface EventsOptions {
  source: LifecycleSource;
  streams: EventStreams;
  log: Logger;
  /** Comment lines that keep proxies from closing an idle stream. */
  heartbeatMs?: number;
  /**
   * Is the caller's key still good (not revoked, not expired)? Asked every `revalidateMs` while a
   * scoped key's stream is open, so revocation and expiry end the stream, not only new requests.
   */
  keyValid?: (keyId: string) => Promise<boolean>;
  revalidateMs?: number;
  /** Open streams a scoped key may hold on one replica, and all callers together (each is a NATS consumer): past them, 429. */
  maxPerKey?: number;
  maxTotal?: number;
}

export const SSE_LIMITS = { perKey: 10, total: 1000 } as const;

function listParam(v: unknown): string[] {
  const items = Array.isArray(v) ? v : v === undefined ? [] : [v];
  return items.flatMap((x) => String(x).split(',')).map((s) => s.trim()).filter((s) => s !== '');
}

/**
 * The tags to stream: asked for (containerTag=, containerTags=a,b), and never beyond a scoped key's
 * (null: every tag). The events: those named (events=done,memory.created), else every document
 * transition; memory events only when named, as for webhooks.
 */
export function eventFilter(query: Record<string, unknown>, caller: Principal): { tags: string[] | null; types: EventName[] } {
  const asked = [...listParam(query.containerTag), ...listParam(query.containerTags)];
  for (const t of asked) {
    const r = ContainerTag.safeParse(t);
    if (!r.success) throw new ValidationError('Invalid request', `containerTags: ${JSON.stringify(t)}: ${r.error.issues[0]?.message ?? 'invalid'}`);
  }
  const types = listParam(query.events);
  for (const t of types) {
    if (!EventName.safeParse(t).success) throw new ValidationError('Invalid request', `events: ${JSON.stringify(t)} is not one of ${EventName.options.join(', ')}`);
  }
  const tags = readTags(tagScope(caller), asked.length > 0 ? [...new Set(asked)] : undefined) ?? null;
  return { tags, types: types.length > 0 ? (types as EventName[]) : [...LIFECYCLE_TRANSITIONS] };
}

export function matchesFilter(event: OutboundEvent, filter: { tags: string[] | null; types: EventName[] }): boolean {
  if (!filter.types.includes(eventNameOf(event))) return false;
  return filter.tags === null || filter.tags.some((t) => event.containerTags.includes(t));
}

function resumeFrom(req: Request): number | undefined {
  const raw = req.header('last-event-id') ?? (typeof req.query.lastEventId === 'string' ? req.query.lastEventId : undefined);
  if (raw === undefined || raw === '') return undefined;
  if (!/^\d{1,15}$/.test(raw.trim())) throw new ValidationError('Invalid request', 'Last-Event-ID: must be the id of an event this stream sent (a sequence number)');
  return Number(raw.trim());
}

/**
 * GET /v3/events: Server-Sent Events of document transitions and memory events, the same payloads webhooks get.
 * `id:` is the LIFECYCLE sequence, so a client that reconnects with Last-Event-ID continues where
 * it stopped (within the stream's day of history). Heartbeat comments every 15 s; the consumer is
 * deleted when the client goes away.
 */
export function eventsHandler(opts: EventsOptions): RequestHandler {
  const heartbeatMs = opts.heartbeatMs ?? 15_000;
  return async (req, res) => {
    const filter = eventFilter(req.query as Record<string, unknown>, principalOf(res));
    const afterSeq = resumeFrom(req);
    const who = principalOf(res);
    const perKey = opts.maxPerKey ?? SSE_LIMITS.perKey;
    if (who.kind === 'scoped' && opts.streams.countFor(who.keyId) >= perKey) {
      throw new AppError('too_many_streams', 'Too many event streams', 429, `this API key already has ${perKey} open GET /v3/events streams; close one first (one stream with containerTags=a,b can follow several tags)`);
    }
    if (opts.streams.size >= (opts.maxTotal ?? SSE_LIMITS.total)) {
      throw new AppError('too_many_streams', 'Too many event streams', 429, 'the gateway holds as many open event streams as it allows; retry later');
    }
    // Opened before the headers go out, so a broker failure is still an ordinary JSON error.
    const sub = await opts.source.open(afterSeq !== undefined ? { afterSeq } : {});
    let ended = false;
    const end = () => {
      if (ended) return;
      ended = true;
      clearInterval(heartbeat);
      unregister();
      void sub.close();
      if (!res.writableEnded) res.end();
    };
    const unregister = opts.streams.add(end, who.kind === 'scoped' ? who.keyId : undefined);
    const heartbeat = setInterval(() => res.write(': ping\n\n'), heartbeatMs);
    const caller = principalOf(res);
    const log = requestLog(opts.log, res);
    if (caller.kind === 'scoped' && opts.keyValid) {
      const keyValid = opts.keyValid;
      const recheck = setInterval(() => {
        keyValid(caller.keyId)
          .then((ok) => {
            if (ok || ended) return;
            log.info({ keyId: caller.keyId }, 'event stream of a revoked or expired key: closed');
            res.write(`event: error\ndata: ${JSON.stringify({ error: 'API key revoked or expired' })}\n\n`);
            end();
          })
          .catch(() => undefined);
      }, opts.revalidateMs ?? 1_000);
      res.on('close', () => clearInterval(recheck));
    }
    res.on('close', end);
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache, no-transform',
      connection: 'keep-alive',
      // nginx and similar proxies would otherwise buffer the stream.
      'x-accel-buffering': 'no',
    });
    res.write(`retry: 3000\n: connected${afterSeq !== undefined ? ` after ${afterSeq}` : ''}\n\n`);
    try {
      for await (const { seq, event } of sub) {
        if (ended) break;
        if (!matchesFilter(event, filter)) continue;
        res.write(`id: ${seq}\nevent: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`);
        // A client that does not read: drop it rather than buffer without bound; it can resume.
        if (res.writableLength > 4 * 1024 * 1024) {
          log.warn({ buffered: res.writableLength }, 'event stream client too slow: closed');
          break;
        }
      }
    } catch (err) {
      if (!ended) log.warn({ err: errorMessage(err) }, 'event stream ended');
    } finally {
      end();
    }
  };
}
