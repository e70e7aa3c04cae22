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

/**
 * One process, several services (a worker host): a signal stops every one of them, each in its
 * own order, and the process exits when the last has stopped. The script's services write what
 * they do to stdout; the test reads the order back.
 */
describe('onShutdown with several services in one process', () => {
  const run = async (body: string, signalAfterMs = 300) => {
    const script = `
      const { onShutdown } = await import(${JSON.stringify(LIFECYCLE)});
      const { pino } = await import('pino');
      const say = (s) => process.stdout.write(s + '\\n');
      const wait = (ms) => new Promise((r) => setTimeout(r, ms));
      const logger = (name) => pino({ name, level: 'silent' });
      ${body}
      say('started');
      setInterval(() => {}, 1000);`;
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'], cwd: path.dirname(LIFECYCLE) });
    let out = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString('utf8');
      if (out.includes('started\n') && !child.killed) setTimeout(() => child.kill('SIGTERM'), signalAfterMs);
    });
    const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
    return { code, lines: out.split('\n').filter(Boolean) };
  };

  it('stops them all, each in its order, at once; exits 0 once the slowest is done', async () => {
    const { code, lines } = await run(`
      onShutdown(logger('a'), [['stop a', async () => { say('a: stop consuming'); await wait(200); say('a: stopped consuming'); }], ['close a', () => say('a: close')]]);
      onShutdown(logger('b'), [['stop b', () => say('b: stop consuming')], ['close b', async () => { await wait(50); say('b: close'); }]]);`);
    expect(code).toBe(0);
    expect(lines).toEqual(['started', 'a: stop consuming', 'b: stop consuming', 'b: close', 'a: stopped consuming', 'a: close']);
  }, 60_000);

  it('exits 1 when a step of any of them failed, after the others have stopped', async () => {
    const { code, lines } = await run(`
      onShutdown(logger('a'), [['fail', () => { throw new Error('no'); }], ['after', () => say('a: after the failed step')]]);
      onShutdown(logger('b'), [['slow', async () => { await wait(200); say('b: stopped'); }]]);`);
    expect(code).toBe(1);
    expect(lines).toEqual(['started', 'a: after the failed step', 'b: stopped']);
  }, 60_000);

  it('a service that finishes starting after the signal is stopped too, before the process exits', async () => {
    const { code, lines } = await run(
      `
      onShutdown(logger('a'), [['stop a', async () => { say('a: stopping'); await wait(300); say('a: stopped'); }]]);
      setTimeout(() => onShutdown(logger('late'), [['stop late', () => say('late: stopped')]]), 400);`,
      250,
    );
    expect(code).toBe(0);
    expect(lines).toEqual(['started', 'a: stopping', 'late: stopped', 'a: stopped']);
  }, 60_000);
});
