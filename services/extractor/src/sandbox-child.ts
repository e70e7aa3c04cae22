/**
 * The child side of extractIsolated: run one extractor on one file and write the outcome.
 * Started as `node --max-old-space-size=N --import tsx sandbox-child.ts '<json args>'`.
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { PermanentError, createLogger, errorMessage, whenParentDies } from '@memstream/kit';
import type { ExtractLimits, Kind, SourceFile } from './kinds.js';
import { extractFile } from './registry.js';
import type { ChildOutcome } from './sandbox.js';

const args = JSON.parse(process.argv[2] ?? '{}') as { file: SourceFile; kind: Kind; limits: ExtractLimits; workDir: string };
const log = createLogger('extractor-child', { level: process.env.LOG_LEVEL ?? 'warn' });
const write = (o: ChildOutcome) => writeFileSync(path.join(args.workDir, 'outcome.json'), JSON.stringify(o));

// An extractor killed with SIGKILL cannot kill this child: it leads its own process group (so the
// extractor's limits kill the tools it starts too), so it takes that group down itself.
whenParentDies(() => process.kill(-process.pid, 'SIGKILL'), Number(process.env.MEMSTREAM_SANDBOX_PARENT) || process.ppid);

try {
  const result = await extractFile(args.file, args.kind, { limits: args.limits, log, workDir: args.workDir, signal: new AbortController().signal });
  write({ ok: true, result });
  process.exit(0);
} catch (err) {
  write({ ok: false, permanent: err instanceof PermanentError, message: errorMessage(err) });
  process.exit(0);
}
