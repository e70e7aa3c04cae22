import { commandArgs } from '../args.js';
import { ContainerTag, Metadata } from '@memstream/contracts';
import type { Config } from '../config.js';
import { apiTarget } from '../target.js';
import { MemstreamHttp } from './http.js';
import { collectItems } from './sources.js';
import { runImport, type ImportProgress, type ImportSummary } from './run.js';

export const IMPORT_USAGE = `./memstream import PATH... [--tag T] [--metadata JSON] [--wait] [--concurrency N] [--url URL] [--key KEY]
  PATH: a file (uploaded as it is), a folder (every file in it, recursively), a .jsonl file (one
  {content, customId?, containerTag?, metadata?} per line), a .urls file (one URL per line), or a URL.
  A second run sends only what is new, changed or failed.`;

function fmtSecs(ms: number): string {
  const s = Math.round(ms / 1000);
  return s < 90 ? `${s}s` : `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
}

/** One line of progress: a bar over the items that reached their end, the counts, the rate and the ETA. */
export function progressLine(p: ImportProgress): string {
  const pending = p.pending;
  const resolved = p.handled - pending;
  const w = 24;
  const fill = p.total ? Math.round((resolved / p.total) * w) : w;
  const secs = Math.max(0.001, p.elapsedMs / 1000);
  const sending = p.phase === 'sending';
  const rate = (sending ? p.handled : resolved) / secs;
  const left = sending ? p.total - p.handled : pending;
  const eta = rate > 0 && left > 0 ? ` · ETA ${fmtSecs((left / rate) * 1000)}` : '';
  const throttle = p.throttled ? ` · 429×${p.throttled} (${p.concurrency} at once)` : '';
  return (
    `import [${'#'.repeat(fill)}${'.'.repeat(w - fill)}] ${resolved}/${p.total}` +
    ` · accepted ${p.accepted} · unchanged ${p.skipped} · done ${p.done} · failed ${p.failed}` +
    ` · ${rate.toFixed(1)}/s${eta}${throttle}`
  );
}

export function summaryText(s: ImportSummary, wait: boolean): string {
  const lines = [
    `imported ${s.total} item${s.total === 1 ? '' : 's'} in ${(s.elapsedMs / 1000).toFixed(1)} s: ${s.accepted} sent, ${s.skipped} unchanged since an earlier run (not sent), ${s.done} done, ${s.failed} failed` +
      (s.pending ? `, ${s.pending} still processing${wait ? ' (gave up waiting)' : ' (add --wait to wait for them)'}` : ''),
  ];
  if (s.throttled) lines.push(`the server asked to slow down ${s.throttled} times (429); the importer waited out each Retry-After`);
  if (s.failures.length) {
    lines.push(`failures (${s.failures.length}):`);
    for (const f of s.failures.slice(0, 100)) lines.push(`  ${f.label} — ${f.reason}${f.documentId ? ` (document ${f.documentId})` : ''}`);
    if (s.failures.length > 100) lines.push(`  … and ${s.failures.length - 100} more`);
  }
  return lines.join('\n');
}

/** `./memstream import`: exit code 0 when everything sent is done (or accepted, without --wait), 1 when anything failed, 2 for bad usage. */
export async function importCommand(config: Config, dataDir: string, argv: string[]): Promise<number> {
  // --help prints the usage (exit 0); an unknown flag is one line (exit 2): see ../args.ts.
  const parsed = commandArgs('import', IMPORT_USAGE, {
    args: argv,
    allowPositionals: true,
    options: {
      tag: { type: 'string' },
      metadata: { type: 'string' },
      wait: { type: 'boolean', default: false },
      concurrency: { type: 'string', default: '4' },
      url: { type: 'string' },
      key: { type: 'string' },
    },
  });
  const { values, positionals } = parsed;
  const usage = (msg: string) => {
    process.stderr.write(`import: ${msg}\n${IMPORT_USAGE}\n`);
    return 2;
  };
  if (positionals.length === 0) return usage('name at least one file, folder, .jsonl, .urls or URL');
  const concurrency = Number(values.concurrency);
  if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 64) return usage('--concurrency must be a whole number from 1 to 64');
  if (values.tag !== undefined && !ContainerTag.safeParse(values.tag).success) return usage(`--tag ${JSON.stringify(values.tag)}: letters, digits and _ : . @ - only, at most 100 characters`);
  let metadata: Metadata | undefined;
  if (values.metadata !== undefined) {
    let raw: unknown;
    try {
      raw = JSON.parse(values.metadata);
    } catch {
      return usage('--metadata must be a JSON object, e.g. \'{"source":"wiki"}\'');
    }
    const m = Metadata.safeParse(raw);
    if (!m.success) return usage(`--metadata: ${m.error.issues[0]?.message} (flat: string, number, boolean or string[] values)`);
    metadata = m.data;
  }
  const target = apiTarget(config, dataDir, { url: values.url, key: values.key });
  const items = await collectItems(positionals, config.MEMSTREAM_INVOKE_CWD ?? process.cwd());
  const http = new MemstreamHttp(target.baseUrl, target.apiKey);
  // Fail fast on a wrong URL or key, before the first of hundreds of requests.
  await http.request('POST', '/v3/documents/list', { limit: 1 });

  const tty = process.stderr.isTTY;
  const summary = await runImport(http, items, {
    concurrency,
    wait: values.wait,
    ...(values.tag ? { tag: values.tag } : {}),
    ...(metadata ? { metadata } : {}),
    progressEveryMs: tty ? 200 : 2000,
    onProgress: (p) => {
      const line = progressLine(p);
      process.stderr.write(tty ? `\r\x1b[2K${line}${p.phase === 'finished' ? '\n' : ''}` : line + '\n');
    },
  });
  process.stdout.write(summaryText(summary, values.wait) + '\n');
  return summary.failed > 0 || (values.wait && summary.pending > 0) ? 1 : 0;
}
