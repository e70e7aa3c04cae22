/**
 * Every worker of the pipeline in one Node process, each still its own durable consumer, NATS
 * connection and ops port (or those MEMSTREAM_BENCH_WORKERS names): the layouts `./memstream bench
 * ingest --layout one-process|two-processes` measure
 * against one process per service. Not a way to run memstream (each worker still installs its own
 * signal handlers, and the first to finish its shutdown ends the process): a measurement only.
 */
import path from 'node:path';
import { REPO_ROOT, SERVICES } from '@memstream/cli';

process.env.MEMSTREAM_OPS_PORT = '0';
// MEMSTREAM_BENCH_WORKERS (comma-separated): only these workers (`--layout two-processes` starts two such processes).
const only = process.env.MEMSTREAM_BENCH_WORKERS?.split(',');
for (const s of SERVICES.filter((x) => x !== 'gateway' && (!only || only.includes(x)))) await import(path.join(REPO_ROOT, 'services', s, 'src', 'main.ts'));
