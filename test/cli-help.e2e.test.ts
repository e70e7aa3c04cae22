import { describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { REPO_ROOT } from '@memstream/cli';

/** Run a memstream entry point as the launcher script does (node + tsx), and see what a user sees. */
function run(file: string, args: string[], timeout = 60_000): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, ['--import', 'tsx', path.join(REPO_ROOT, file), ...args], { cwd: REPO_ROOT, timeout }, (err, stdout, stderr) => {
      resolve({ code: err ? Number((err as { code?: unknown }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

describe('every command: --help is its usage, an unknown flag one line', () => {
  it.each([
    ['packages/cli/src/main.ts', ['up'], 'memstream up'],
    ['packages/cli/src/main.ts', ['replay', 'redrive'], 'memstream replay redrive'],
    ['bench/ingest.ts', [], 'memstream bench'],
    ['bench/load.ts', [], 'memstream bench load'],
    ['bench/conversations.ts', [], 'memstream bench conversations'],
    ['bench/memorizer.ts', [], 'memstream bench memorizer'],
    ['packages/cli/src/main.ts', ['replay', 'memories'], 'memstream replay memories'],
  ] as const)('%s %s', async (file, cmd, name) => {
    const [help, bad] = await Promise.all([run(file, [...cmd, '--help']), run(file, [...cmd, '--no-such-flag'])]);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/^usage: \.\/memstream /);
    expect(bad.code).toBe(2);
    expect(bad.stderr.trim().split('\n')).toEqual([`${name}: unknown option --no-such-flag (./${name} --help shows the usage)`]);
    expect(bad.stderr).not.toMatch(/\bat .*\.(?:js|ts):\d+/);
  }, 120_000);
});

describe('bench load', () => {
  it('a tiny run (50 adds/s for 2 s) answers every add and prints its JSON line', async () => {
    const { code, stdout, stderr } = await run('bench/load.ts', ['--rate', '50', '--seconds', '2', '--ceiling-seconds', '1', '--json'], 280_000);
    expect(stderr, stderr).not.toMatch(/bench failed/);
    expect(code).toBe(0);
    const r = JSON.parse(stdout.trim().split('\n').at(-1)!) as {
      add: { ok: number; non2xx: number; errors: number; latencyMs: { p99: number } };
      pipeline: { accepted: number; drainSecs: number | null; done: number; failed: number };
      ceilingJetStreamPublish: { ok: number };
      ceilingAuthenticatedGet: { ok: number };
    };
    // How many are answered in 2 s depends on the machine's load (a figure, not asserted): some are, none fails.
    expect(r.add.ok).toBeGreaterThan(0);
    expect([r.add.non2xx, r.add.errors]).toEqual([0, 0]);
    expect(r.add.latencyMs.p99).toBeGreaterThan(0);
    // Every accepted document went through the pipeline: the backlog drained, nothing failed.
    expect(r.pipeline.drainSecs).not.toBeNull();
    expect([r.pipeline.done, r.pipeline.failed]).toEqual([r.pipeline.accepted, 0]);
    expect(r.ceilingJetStreamPublish.ok).toBe(50);
    expect(r.ceilingAuthenticatedGet.ok).toBeGreaterThan(0);
  }, 300_000);
});
