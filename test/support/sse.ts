import { waitFor } from './stack.js';

export interface SseEvent<T> {
  /** The event's `id:` field (the stream sequence). */
  id: number;
  /** The `event:` field. */
  type: string;
  data: T;
}

/**
 * Read an open `GET /v3/events` answer in the background: every event in the order it came, into
 * `events`. Resolves once the server's `: connected` comment arrived; `done` settles when the body
 * ends or the request is aborted.
 */
export async function readEvents<T>(res: Response): Promise<{ events: Array<SseEvent<T>>; done: Promise<void> }> {
  const events: Array<SseEvent<T>> = [];
  let connected = false;
  const done = (async () => {
    const dec = new TextDecoder();
    let buffer = '';
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      buffer += dec.decode(chunk, { stream: true });
      let i: number;
      while ((i = buffer.indexOf('\n\n')) >= 0) {
        const block = buffer.slice(0, i);
        buffer = buffer.slice(i + 2);
        if (block.includes(': connected')) connected = true;
        const f = Object.fromEntries(block.split('\n').filter((l) => !l.startsWith(':')).map((l) => [l.slice(0, l.indexOf(':')), l.slice(l.indexOf(':') + 1).trim()]));
        if (f.data) events.push({ id: Number(f.id), type: f.event!, data: JSON.parse(f.data) as T });
      }
    }
  })().catch(() => undefined);
  await waitFor('the event stream open', async () => (connected ? true : undefined), 10_000);
  return { events, done };
}
