import Supermemory from 'supermemory';
import { waitFor } from './stack.js';

/** One HTTP exchange the SDK made, as the server answered it. */
export interface Exchange {
  method: string;
  url: string;
  status: number;
  contentType: string | null;
  /** The body as text ('' for none). */
  body: string;
}

/**
 * The official client pointed at a memstream, with a fetch that records every answer, so a suite
 * can check afterwards that each JSON answer said it was JSON (the SDK itself does not care).
 */
export function recordingClient(stack: { baseUrl: string; apiKey: string }, opts: { apiKey?: string } = {}) {
  const exchanges: Exchange[] = [];
  const recordingFetch = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const res = await fetch(input, init);
    const body = await res.clone().text();
    const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    // The SDK also fetches 'data:,' once to probe the runtime; only the server's answers count.
    if (url.startsWith(stack.baseUrl)) exchanges.push({ method: init?.method ?? 'GET', url, status: res.status, contentType: res.headers.get('content-type'), body });
    return res;
  };
  const client = new Supermemory({ apiKey: opts.apiKey ?? stack.apiKey, baseURL: stack.baseUrl, maxRetries: 0, fetch: recordingFetch });
  return { client, exchanges };
}

type Client = Supermemory;
type Doc = Awaited<ReturnType<Client['documents']['get']>>;

/** Poll GET until `pred` holds for the document; returns it. */
export function waitForDoc(client: Client, id: string, what: string, pred: (d: Doc) => boolean, timeoutMs = 20_000): Promise<Doc> {
  return waitFor(`${id} ${what}`, async () => {
    const d = await client.documents.get(id);
    return pred(d) ? d : undefined;
  }, timeoutMs, 25);
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** A tag, customId or name no other test (or run) uses. */
export function unique(prefix: string): string {
  return `${prefix}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
}
