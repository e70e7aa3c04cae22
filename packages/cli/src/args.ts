import { parseArgs, type ParseArgsConfig } from 'node:util';

/**
 * Parse one command's flags the same way for every memstream command: `--help`/`-h` prints its
 * usage and exits 0; an unknown flag, a missing value or a stray argument prints one line saying
 * which, and exits 2 — never a stack trace (node's parseArgs throws with one).
 */
export function commandArgs<T extends ParseArgsConfig>(command: string, usage: string, config: T): ReturnType<typeof parseArgs<T>> {
  const args = config.args ?? process.argv.slice(2);
  const end = args.indexOf('--');
  if ((end < 0 ? args : args.slice(0, end)).some((a) => a === '--help' || a === '-h')) {
    process.stdout.write(usage.trimEnd() + '\n');
    process.exit(0);
  }
  try {
    return parseArgs<T>({ strict: true, ...config, args });
  } catch (err) {
    process.stderr.write(`memstream ${command}: ${argError(err)} (./memstream ${command} --help shows the usage)\n`);
    process.exit(2);
  }
}

/** node's message, shortened to what was wrong. */
function argError(err: unknown): string {
  const msg = err instanceof Error ? err.message : String(err);
  const unknown = /^Unknown option '([^']+)'/.exec(msg);
  if (unknown) return `unknown option ${unknown[1]}`;
  const positional = /^Unexpected argument '([^']+)'/.exec(msg);
  if (positional) return `unexpected argument ${positional[1]}`;
  return msg.split('. ')[0]!.replace(/\.$/, '');
}
