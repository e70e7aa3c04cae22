import { parentPort } from 'node:worker_threads';
import { errorMessage } from '@memstream/kit';
import { chunkText, type ChunkOptions, type TextFormat } from '../handlers/chunk.js';

// The worker side of chunk-thread.ts: one job at a time, in the order they came.
parentPort!.on('message', (job: { id: number; text: string; format: TextFormat; opts: ChunkOptions }) => {
  try {
    parentPort!.postMessage({ id: job.id, chunks: chunkText(job.text, job.format, job.opts) });
  } catch (err) {
    parentPort!.postMessage({ id: job.id, error: errorMessage(err) });
  }
});
