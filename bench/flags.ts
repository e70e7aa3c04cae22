/** An integer flag from `min` to `max`; anything else ends the bench with exit code 2, saying which flag and what it got. */
export function intFlag(command: string, name: string, v: string | undefined, min: number, max: number): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < min || n > max) {
    process.stderr.write(`memstream bench ${command}: --${name} must be an integer from ${min} to ${max} (got ${JSON.stringify(v)})\n`);
    process.exit(2);
  }
  return n;
}
