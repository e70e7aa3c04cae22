/**
 * Every worker of the pipeline in one Node process, each still its own durable consumer, NATS
 * connection and ops port: the layout `./memstream bench ingest --layout one-process` measures
 * against one process per service. Not a way to run memstream (each worker still installs its own
 * signal handlers, and the first to finish its shutdown ends the process): a measurement only.
 */
import path from 'node:path';
import { REPO_ROOT, SERVICES } from '@memstream/cli';

process.env.MEMSTREAM_OPS_PORT = '0';
for (const s of SERVICES.filter((x) => x !== 'gateway')) await import(path.join(REPO_ROOT, 'services', s, 'src', 'main.ts'));
