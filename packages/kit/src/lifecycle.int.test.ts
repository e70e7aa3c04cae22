import { describe, expect, it } from 'vitest';
import { execFileSync, spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const LIFECYCLE = path.join(path.dirname(fileURLToPath(import.meta.url)), 'lifecycle.ts');

describe('whenParentDies', () => {
  it('a process whose parent is no longer the one it was started by learns it within about a second', async () => {
    // The parent it expects is a process that has already exited: the situation of a service
    // whose launcher was killed while it was starting.
    const dead = Number(execFileSync('sh', ['-c', 'echo $$'], { encoding: 'utf8' }).trim());
    const script = `const { whenParentDies } = await import(${JSON.stringify(LIFECYCLE)}); whenParentDies(() => process.exit(0), ${dead}); setInterval(() => {}, 1000);`;
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { stdio: 'ignore' });
    const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
    expect(code).toBe(0);
  }, 60_000);

  it('and does nothing while the parent lives', async () => {
    const script = `const { whenParentDies } = await import(${JSON.stringify(LIFECYCLE)}); whenParentDies(() => process.exit(3)); setTimeout(() => process.exit(0), 2500);`;
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { stdio: 'ignore' });
    expect(await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)))).toBe(0);
  }, 60_000);
});
