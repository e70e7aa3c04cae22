/**
 * A worker host: several of the pipeline's workers in one Node process, each still its own
 * durable consumers and handler (`./memstream up` runs two: WORKER_HOSTS in
 * packages/contracts/src/pipeline.ts; docs/pipeline.md, "Process layout").
 *
 * MEMSTREAM_WORKERS names them (comma-separated); each is its service's own entry
 * (services/<name>/src/main), loaded as it would be alone. What they share is the process: one
 * broker connection and one ops port whose /readyz waits for all of them (packages/bus
 * worker.ts), one shutdown that stops
 * them all on a signal, each in its house order (packages/kit lifecycle.ts), and one fate: a
 * worker that fails to start, or a crash, ends the process, and the launcher starts it again
 * whole. MEMSTREAM_PROCESS names the process (its telemetry's service name and metrics label).
 *
 * This file is run, never imported: as the bundle's packages/cli/src/host.mjs beside the
 * services' own bundled entries (whose shared code it then loads once), or through tsx beside
 * their TypeScript.
 */
import path from 'node:path';
import { pathToFileURL } from 'node:url';
// The pipeline table only (no I/O, nothing the telemetry must load before): each service's own entry starts the telemetry.
import { SERVICE_NAMES } from '@memstream/contracts';

const HOSTABLE: readonly string[] = SERVICE_NAMES.filter((s) => s !== 'gateway');

const names = (process.env.MEMSTREAM_WORKERS ?? '')
  .split(',')
  .map((s) => s.trim())
  .filter(Boolean);
const unknown = names.filter((n) => !HOSTABLE.includes(n));
if (names.length === 0 || unknown.length > 0 || new Set(names).size !== names.length) {
  process.stderr.write(
    `memstream worker host: MEMSTREAM_WORKERS must name each of its workers once, of ${HOSTABLE.join(', ')}` +
      `${unknown.length > 0 ? ` (unknown: ${unknown.join(', ')})` : ''}; got "${process.env.MEMSTREAM_WORKERS ?? ''}"\n`,
  );
  process.exit(2);
}

// Where this file runs from tells where the services' entries are: <root>/packages/cli/src/host.<ext>
// → <root>/services/<name>/src/main.<ext> (the repository under tsx, the bundle dir on plain node).
const self = process.argv[1]!;
const root = path.resolve(path.dirname(self), '../../..');
const ext = path.extname(self);
await Promise.all(names.map((n) => import(pathToFileURL(path.join(root, 'services', n, 'src', `main${ext}`)).href)));
