import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

/** Clock ticks per second of /proc/<pid>/stat's CPU fields. */
const CLK_TCK = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
})();

/** CPU time (user + system) a process has used so far, in ms; NaN when it cannot be read (not Linux, gone). */
export function cpuMs(pid: number | undefined): number {
  if (!pid) return NaN;
  try {
    // The command name (field 2) may hold spaces; the fields after its closing parenthesis do not.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(f[11]) + Number(f[12])) / CLK_TCK) * 1000;
  } catch {
    return NaN;
  }
}

/** Write system calls (`syscw` of /proc/<pid>/io) a process has made so far; NaN when it cannot be read. */
export function writeSyscalls(pid: number | undefined): number {
  if (!pid) return NaN;
  try {
    const m = /^syscw: (\d+)$/m.exec(readFileSync(`/proc/${pid}/io`, 'utf8'));
    return m ? Number(m[1]) : NaN;
  } catch {
    return NaN;
  }
}
