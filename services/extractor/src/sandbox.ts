import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { PermanentError, RetryableError, limiter } from '@memstream/kit';
import type { ExtractContext, ExtractResult, Kind, SourceFile } from './kinds.js';

const CHILD = path.join(path.dirname(fileURLToPath(import.meta.url)), 'sandbox-child.ts');

/** What the child writes back. */
export type ChildOutcome = { ok: true; result: ExtractResult } | { ok: false; permanent: boolean; message: string };

/** Resident memory of a process and all its descendants (parsers often run tools of their own). */
export function treeRss(pid: number): number {
  let total = 0;
  const stack = [pid];
  const seen = new Set<number>();
  while (stack.length) {
    const p = stack.pop()!;
    if (seen.has(p)) continue;
    seen.add(p);
    try {
      const status = readFileSync(`/proc/${p}/status`, 'utf8');
      const m = /VmRSS:\s+(\d+) kB/.exec(status);
      if (m) total += Number(m[1]) * 1024;
      for (const t of readdirSafe(`/proc/${p}/task`)) {
        for (const c of readFileSafe(`/proc/${p}/task/${t}/children`).split(/\s+/)) if (c) stack.push(Number(c));
      }
    } catch {
      // exited meanwhile
    }
  }
  return total;
}

function readdirSafe(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}
function readFileSafe(f: string): string {
  try {
    return readFileSync(f, 'utf8');
  } catch {
    return '';
  }
}

/**
 * Extract in a child process, so a file that crashes a parser, loops, or eats memory takes down
 * only that child. The child's JS heap is capped by --max-old-space-size; the whole process tree
 * is watched for resident memory and wall time, and killed past either limit. Such a file fails
 * permanently with the reason (class poison): retrying the same bytes cannot help.
 */
export function extractIsolated(file: SourceFile, kind: Kind, ctx: ExtractContext): Promise<ExtractResult & { peakRssBytes: number }> {
  return oneSandboxSlot(() => extractInChild(file, kind, ctx));
}

/**
 * At most 4 children at once per process, whatever EXTRACTOR_CONCURRENCY is: each may use up to
 * EXTRACT_MAX_RSS_MB, while plain text (no child) is worth taking in larger batches.
 */
const oneSandboxSlot = limiter(4);

async function extractInChild(file: SourceFile, kind: Kind, ctx: ExtractContext): Promise<ExtractResult & { peakRssBytes: number }> {
  const { limits } = ctx;
  const heapMb = Math.max(64, Math.floor((limits.maxRssBytes * 0.6) / (1024 * 1024)));
  const args = JSON.stringify({ file, kind, limits, workDir: ctx.workDir });
  const child = spawn(process.execPath, [`--max-old-space-size=${heapMb}`, '--import', 'tsx', CHILD, args], {
    stdio: ['ignore', 'ignore', 'pipe'],
    env: { ...process.env, MEMSTREAM_LOG_PRETTY: '0', MEMSTREAM_SANDBOX_PARENT: String(process.pid) },
    // Its own process group, so a kill takes the tools it started (pdftotext, ffmpeg, pocketsphinx) with it.
    detached: true,
  });
  let stderr = '';
  child.stderr!.setEncoding('utf8');
  child.stderr!.on('data', (d: string) => {
    stderr = (stderr + d).slice(-4000);
  });
  let peak = 0;
  let killedFor: string | null = null;
  const kill = (why: string) => {
    if (killedFor) return;
    killedFor = why;
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      child.kill('SIGKILL');
    }
  };
  const watch = setInterval(() => {
    if (!child.pid) return;
    const rss = treeRss(child.pid);
    peak = Math.max(peak, rss);
    if (rss > limits.maxRssBytes) kill(`used more than ${Math.round(limits.maxRssBytes / 1048576)} MB of memory`);
  }, 100);
  const timer = setTimeout(() => kill(`took longer than ${Math.round(limits.timeoutMs / 1000)} s`), limits.timeoutMs);
  const onAbort = () => kill('was cancelled');
  ctx.signal.addEventListener('abort', onAbort);
  const code: number | null = await new Promise((resolve) => child.once('exit', (c) => resolve(c)));
  clearInterval(watch);
  clearTimeout(timer);
  ctx.signal.removeEventListener('abort', onAbort);
  if (killedFor) throw new PermanentError(`extracting ${file.filename ?? 'the file'} ${killedFor}`, 'poison');
  let outcome: ChildOutcome;
  try {
    outcome = JSON.parse(await readFile(path.join(ctx.workDir, 'outcome.json'), 'utf8')) as ChildOutcome;
  } catch {
    // No outcome: the child died on its own (a parser crash, or the heap cap).
    if (/heap out of memory|Allocation failed/i.test(stderr)) throw new PermanentError(`extracting ${file.filename ?? 'the file'} ran out of memory`, 'poison');
    throw new PermanentError(`the ${kind} parser crashed (exit ${code}): ${stderr.trim().split('\n').slice(-3).join(' ').slice(0, 300)}`, 'poison');
  }
  if (!outcome.ok) {
    if (outcome.permanent) throw new PermanentError(outcome.message);
    throw new RetryableError(outcome.message);
  }
  return { ...outcome.result, peakRssBytes: peak };
}
