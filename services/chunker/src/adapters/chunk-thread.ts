import { Worker } from 'node:worker_threads';
import type { Chunk } from '@memstream/contracts';
import { chunkText, type ChunkOptions, type TextFormat } from '../handlers/chunk.js';

/** Chunks a text: the handler's port, so where the CPU work runs is the adapter's business. */
export type ChunkFn = (text: string, format: TextFormat, opts: ChunkOptions) => Promise<Chunk[]>;

type Job = { id: number; text: string; format: TextFormat; opts: ChunkOptions };
type Reply = { id: number; chunks?: Chunk[]; error?: string };

/**
 * Texts up to `inlineChars` are chunked on the main thread; longer ones on one worker thread, one
 * at a time. Chunking is synchronous CPU work, and a few megabytes of it take seconds: on the main
 * thread that stalled every other document the process held (another tenant's small note waited
 * behind a 3 MB one) and the keep-alive of its own message (the ack wait ran out and the document
 * came back, again and again). The worker is started on the first long text and kept.
 */
export function threadedChunker(opts: { inlineChars: number }): ChunkFn & { close(): Promise<void> } {
  let worker: Worker | null = null;
  let next = 0;
  const waiting = new Map<number, { resolve(c: Chunk[]): void; reject(e: Error): void }>();

  const start = (): Worker => {
    // Services run TypeScript through tsx, whose loader a worker does not inherit: it registers it first.
    const tsx = import.meta.resolve('tsx/esm/api');
    const entry = new URL('./chunk-thread-main.ts', import.meta.url).href;
    const w = new Worker(`import(${JSON.stringify(tsx)}).then((m) => { m.register(); return import(${JSON.stringify(entry)}); })`, { eval: true });
    w.on('message', (r: Reply) => {
      const p = waiting.get(r.id);
      if (!p) return;
      waiting.delete(r.id);
      if (r.chunks) p.resolve(r.chunks);
      else p.reject(new Error(r.error ?? 'the chunking thread gave no answer'));
    });
    // A thread that died fails what it held (the runner retries those) and is started afresh next time.
    const failAll = (err: Error) => {
      if (worker !== w) return;
      worker = null;
      for (const p of waiting.values()) p.reject(err);
      waiting.clear();
    };
    w.on('error', (err) => failAll(err));
    w.on('exit', (code) => failAll(new Error(`the chunking thread exited (code ${code})`)));
    // An idle worker does not keep the process alive at shutdown.
    w.unref();
    return w;
  };

  const chunk: ChunkFn = async (text, format, o) => {
    if (text.length <= opts.inlineChars) return chunkText(text, format, o);
    worker ??= start();
    const id = next++;
    const job: Job = { id, text, format, opts: o };
    return new Promise<Chunk[]>((resolve, reject) => {
      waiting.set(id, { resolve, reject });
      worker!.postMessage(job);
    });
  };
  return Object.assign(chunk, {
    async close() {
      const w = worker;
      worker = null;
      if (w) await w.terminate();
    },
  });
}
