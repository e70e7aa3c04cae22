import { describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { REPO_ROOT } from '@memstream/cli';

/** Run a memstream entry point as the launcher script does (node + tsx), and see what a user sees. */
function run(file: string, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, ['--import', 'tsx', path.join(REPO_ROOT, file), ...args], { cwd: REPO_ROOT, timeout: 60_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? Number((err as { code?: unknown }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

describe('every command: --help is its usage, an unknown flag one line', () => {
  it.each([
    ['packages/cli/src/main.ts', ['up'], 'memstream up'],
    ['packages/cli/src/main.ts', ['replay', 'redrive'], 'memstream replay redrive'],
    ['bench/ingest.ts', [], 'memstream bench'],
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
