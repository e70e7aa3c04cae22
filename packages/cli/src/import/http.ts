import type { LifecycleEvent } from '@memstream/contracts';

/** A memstream answer that was not 2xx, with the server's `{error, details}` and its Retry-After. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly error: string,
    readonly details: string,
    /** From retry-after-ms or Retry-After (seconds); null when the answer named none. */
    readonly retryAfterMs: number | null,
  ) {
    super(`${status} ${error}${details ? `: ${details}` : ''}`);
  }
}

function retryAfter(h: Headers): number | null {
  const ms = Number(h.get('retry-after-ms'));
  if (Number.isFinite(ms) && ms > 0) return ms;
  const s = h.get('retry-after');
  if (!s) return null;
  const secs = Number(s);
  if (Number.isFinite(secs)) return Math.max(0, secs * 1000);
  const at = Date.parse(s);
  return Number.isFinite(at) ? Math.max(0, at - Date.now()) : null;
}

/** memstream over HTTP, as any client sees it: the importer uses nothing else. */
export class MemstreamHttp {
  constructor(
    readonly baseUrl: string,
    private readonly apiKey: string,
  ) {}

  private headers(extra: Record<string, string> = {}): Record<string, string> {
    return { authorization: `Bearer ${this.apiKey}`, ...extra };
  }

  async request<T>(method: string, path: string, body?: unknown): Promise<T> {
    const init: RequestInit = { method, headers: this.headers(body === undefined ? {} : { 'content-type': 'application/json' }) };
    if (body instanceof FormData) {
      init.body = body;
      init.headers = this.headers();
    } else if (body !== undefined) {
      init.body = JSON.stringify(body);
    }
    const res = await fetch(this.baseUrl + path, init);
    const text = await res.text();
    if (!res.ok) {
      let error = res.statusText || 'HTTP error';
      let details = text.slice(0, 500);
      try {
        const j = JSON.parse(text) as { error?: unknown; details?: unknown };
        if (typeof j.error === 'string') error = j.error;
        details = j.details === undefined ? '' : typeof j.details === 'string' ? j.details : JSON.stringify(j.details);
      } catch {
        // Not JSON (a proxy's page): keep the start of the text as the details.
      }
      throw new ApiError(res.status, error, details, retryAfter(res.headers));
    }
    return (text ? JSON.parse(text) : null) as T;
  }

  /**
   * GET /v3/events as an async iterable of lifecycle events. Reconnects with Last-Event-ID when
   * the connection drops, until `signal` aborts. `onOpen` runs once the first connection answered.
   */
  async *events(query: string, signal: AbortSignal, onOpen?: () => void): AsyncGenerator<LifecycleEvent> {
    let lastId: string | null = null;
    let opened = false;
    while (!signal.aborted) {
      let res: Response;
      try {
        res = await fetch(`${this.baseUrl}/v3/events${query}`, {
          headers: this.headers({ accept: 'text/event-stream', ...(lastId ? { 'last-event-id': lastId } : {}) }),
          signal,
        });
      } catch {
        if (signal.aborted) return;
        await new Promise((r) => setTimeout(r, 1000));
        continue;
      }
      if (!res.ok || !res.body) {
        const text = await res.text().catch(() => '');
        throw new ApiError(res.status, 'event stream refused', text.slice(0, 300), retryAfter(res.headers));
      }
      if (!opened) {
        opened = true;
        onOpen?.();
      }
      const decoder = new TextDecoder();
      let buf = '';
      try {
        for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
          buf += decoder.decode(chunk, { stream: true });
          let cut: number;
          while ((cut = buf.indexOf('\n\n')) >= 0) {
            const block = buf.slice(0, cut);
            buf = buf.slice(cut + 2);
            let data = '';
            for (const line of block.split('\n')) {
              if (line.startsWith('id: ')) lastId = line.slice(4);
              else if (line.startsWith('data: ')) data += line.slice(6);
            }
            if (data) yield JSON.parse(data) as LifecycleEvent;
          }
        }
      } catch {
        // The connection dropped (or we aborted): reconnect below unless aborted.
      }
      if (signal.aborted) return;
      await new Promise((r) => setTimeout(r, 500));
    }
  }
}
