import type { DocumentResponse, LifecycleEvent } from '@memstream/contracts';
import type { Metadata } from '@memstream/contracts';
import { ApiError, type MemstreamHttp } from './http.js';
import { MAX_FILE_BYTES, readForUpload, type ImportItem } from './sources.js';

export interface ImportOptions {
  /** Applied to every item that does not name its own (.jsonl lines may). */
  tag?: string;
  /** Merged under each item's own metadata. */
  metadata?: Metadata;
  /** Requests in flight at most; halved on every 429, grown back by one after a run of successes. */
  concurrency: number;
  /** Wait until every sent document is done or failed. */
  wait: boolean;
  /** Called about every `progressEveryMs` with the counts so far, and once at the end. */
  onProgress?: (p: ImportProgress) => void;
  progressEveryMs?: number;
  /** Give up waiting after this long (the summary then lists what is still in progress). */
  waitTimeoutMs?: number;
}

export interface ImportProgress {
  phase: 'sending' | 'waiting' | 'finished';
  total: number;
  /** Items handled so far: sent, skipped or failed before they could be sent. */
  handled: number;
  accepted: number;
  /** Unchanged since an earlier run and not failed: nothing sent. */
  skipped: number;
  done: number;
  failed: number;
  /** 429 answers so far, and the concurrency now. */
  throttled: number;
  concurrency: number;
  /** Sent (or in progress since an earlier run) and not yet done or failed. */
  pending: number;
  elapsedMs: number;
}

export interface ImportFailure {
  label: string;
  customId: string;
  documentId?: string;
  reason: string;
}

export interface ImportSummary extends ImportProgress {
  failures: ImportFailure[];
}

type Tracked = { item: ImportItem; status: string; sentAt: number };

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const TERMINAL = new Set(['done', 'failed']);

/**
 * Sends every item to memstream with bounded concurrency, skips what an earlier run already
 * imported unchanged (same customId, same metadata.importHash, not failed), follows statuses on
 * GET /v3/events, and, with `wait`, returns only when every sent document is done or failed.
 */
export async function runImport(http: MemstreamHttp, items: ImportItem[], opts: ImportOptions): Promise<ImportSummary> {
  const t0 = Date.now();
  const failures: ImportFailure[] = [];
  const tracked = new Map<string, Tracked>();
  /** Terminal events seen before the add that caused them answered (the stream can be faster). */
  const early = new Map<string, LifecycleEvent>();
  const counts = { handled: 0, accepted: 0, skipped: 0, done: 0, failed: 0, throttled: 0 };
  let limit = Math.max(1, opts.concurrency);
  let active = 0;
  let pausedUntil = 0;
  let streak = 0;

  const pending = () => [...tracked.values()].filter((t) => !TERMINAL.has(t.status)).length;
  const progress = (phase: ImportProgress['phase']): ImportProgress => ({ phase, total: items.length, ...counts, concurrency: limit, pending: pending(), elapsedMs: Date.now() - t0 });

  const settle = (t: Tracked, id: string, ev: { status: string; reason?: string }) => {
    if (TERMINAL.has(t.status)) return;
    t.status = ev.status;
    if (ev.status === 'done') counts.done++;
    if (ev.status === 'failed') {
      counts.failed++;
      failures.push({ label: t.item.label, customId: t.item.customId, documentId: id, reason: ev.reason ?? 'failed (no reason given)' });
    }
  };

  // Statuses: the event stream is opened before the first add, so no transition is missed.
  const abort = new AbortController();
  const streamTags = opts.tag && !items.some((i) => i.containerTag && i.containerTag !== opts.tag) ? `?containerTag=${encodeURIComponent(opts.tag)}&events=done,failed` : '?events=done,failed';
  let opened!: () => void;
  const streamOpen = new Promise<void>((r) => (opened = r));
  let streamError: unknown = null;
  const follow = (async () => {
    try {
      for await (const ev of http.events(streamTags, abort.signal, opened)) {
        const t = tracked.get(ev.documentId);
        if (t) settle(t, ev.documentId, { status: ev.status, ...(ev.error ? { reason: `${ev.error.stage}: ${ev.error.reason}` } : {}) });
        else early.set(ev.documentId, ev);
      }
    } catch (err) {
      streamError = err;
      opened();
    }
  })();
  await Promise.race([streamOpen, sleep(10_000)]);

  /** One request, retried: 429 slows everyone down for Retry-After; 502/503/504 and network errors back off. */
  const call = async <T>(fn: () => Promise<T>): Promise<T> => {
    for (let attempt = 1; ; attempt++) {
      try {
        const out = await fn();
        if (++streak >= limit * 4 && limit < opts.concurrency) {
          limit++;
          streak = 0;
        }
        return out;
      } catch (err) {
        streak = 0;
        if (err instanceof ApiError && err.status === 429 && attempt <= 30) {
          counts.throttled++;
          limit = Math.max(1, Math.floor(limit / 2));
          pausedUntil = Math.max(pausedUntil, Date.now() + (err.retryAfterMs ?? 1000));
          await sleep(Math.max(0, pausedUntil - Date.now()));
          continue;
        }
        const transient = err instanceof ApiError ? [502, 503, 504].includes(err.status) : err instanceof TypeError;
        if (transient && attempt <= 6) {
          const ms = err instanceof ApiError && err.retryAfterMs !== null ? err.retryAfterMs : Math.min(30_000, 500 * 2 ** attempt);
          await sleep(ms);
          continue;
        }
        throw err;
      }
    }
  };

  const send = async (item: Exclude<ImportItem, { kind: 'invalid' }>, bytes: Buffer | null): Promise<string> => {
    const tag = item.containerTag ?? opts.tag;
    const metadata: Metadata = { ...opts.metadata, ...item.metadata, importHash: item.hash };
    if (item.kind === 'file') {
      const form = new FormData();
      form.set('file', new Blob([new Uint8Array(bytes!)]), item.file.split('/').pop() ?? 'file');
      form.set('customId', item.customId);
      form.set('metadata', JSON.stringify(metadata));
      form.set('filepath', item.file);
      if (tag) form.set('containerTags', JSON.stringify([tag]));
      return (await call(() => http.request<{ id: string }>('POST', '/v3/documents/file', form))).id;
    }
    const body = { content: item.content, customId: item.customId, metadata, ...(tag ? { containerTag: tag } : {}) };
    return (await call(() => http.request<{ id: string }>('POST', '/v3/documents', body))).id;
  };

  const track = (item: ImportItem, id: string, status: string) => {
    const t: Tracked = { item, status: 'queued', sentAt: Date.now() };
    tracked.set(id, t);
    const ev = early.get(id);
    if (ev) settle(t, id, { status: ev.status, ...(ev.error ? { reason: `${ev.error.stage}: ${ev.error.reason}` } : {}) });
    else if (TERMINAL.has(status)) settle(t, id, { status });
  };

  const one = async (item: ImportItem): Promise<void> => {
    if (item.kind === 'invalid') {
      counts.failed++;
      failures.push({ label: item.label, customId: item.customId, reason: item.reason });
      return;
    }
    if (item.kind === 'file' && item.size > MAX_FILE_BYTES) {
      counts.failed++;
      failures.push({ label: item.label, customId: item.customId, reason: `${item.size} bytes: over the 50 MB upload limit` });
      return;
    }
    try {
      const bytes = item.kind === 'file' ? await readForUpload(item) : null;
      // Resume: the same customId with the same importHash was imported before; only a failure is sent again.
      let existing: DocumentResponse | null = null;
      try {
        existing = await call(() => http.request<DocumentResponse>('GET', `/v3/documents/${item.customId}`));
      } catch (err) {
        if (!(err instanceof ApiError && err.status === 404)) throw err;
      }
      if (existing && existing.metadata?.importHash === item.hash && existing.status !== 'failed') {
        counts.skipped++;
        if (existing.status !== 'done') track(item, existing.id, existing.status);
        return;
      }
      const id = await send(item, bytes);
      counts.accepted++;
      track(item, id, 'queued');
    } catch (err) {
      counts.failed++;
      failures.push({ label: item.label, customId: item.customId, reason: err instanceof ApiError ? err.message : `could not send: ${(err as Error).message}` });
    }
  };

  // The pool: `opts.concurrency` workers, of which at most `limit` hold a request at once.
  let next = 0;
  const ticker = opts.onProgress ? setInterval(() => opts.onProgress!(progress(next < items.length ? 'sending' : 'waiting')), opts.progressEveryMs ?? 500) : null;
  const worker = async () => {
    for (;;) {
      while (active >= limit || Date.now() < pausedUntil) await sleep(Math.max(20, pausedUntil - Date.now()));
      const i = next++;
      if (i >= items.length) return;
      active++;
      try {
        await one(items[i]!);
      } finally {
        active--;
        counts.handled++;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, opts.concurrency) }, worker));

  if (opts.wait) {
    const deadline = Date.now() + (opts.waitTimeoutMs ?? 30 * 60_000);
    let lastPoll = Date.now();
    while (pending() > 0 && Date.now() < deadline) {
      await sleep(200);
      // A safety net under the stream (it may have dropped events while reconnecting): every 3 s,
      // documents that are no longer processing are read once.
      if (Date.now() - lastPoll < 3000 && streamError === null) continue;
      lastPoll = Date.now();
      const processing = await call(() => http.request<{ documents: { id: string }[]; totalCount: number }>('GET', '/v3/documents/processing')).catch(() => null);
      if (!processing || processing.documents.length < processing.totalCount) continue;
      const still = new Set(processing.documents.map((d) => d.id));
      const gone = [...tracked.entries()].filter(([id, t]) => !TERMINAL.has(t.status) && !still.has(id) && Date.now() - t.sentAt > 2000).slice(0, 50);
      for (const [id, t] of gone) {
        const d = await call(() => http.request<DocumentResponse>('GET', `/v3/documents/${id}`)).catch(() => null);
        if (d && TERMINAL.has(d.status)) settle(t, id, { status: d.status, ...(d.error ? { reason: `${d.error.stage}: ${d.error.reason}` } : {}) });
      }
    }
  }
  abort.abort();
  await follow;
  if (ticker) clearInterval(ticker);
  const final = progress('finished');
  opts.onProgress?.(final);
  return { ...final, failures };
}
