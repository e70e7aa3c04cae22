/** Run at most `n` of the functions given at once, the others waiting their turn in the order given. */
export function limiter(n: number): <T>(run: () => Promise<T>) => Promise<T> {
  let active = 0;
  const queue: Array<() => void> = [];
  return async (run) => {
    if (active >= n) await new Promise<void>((r) => queue.push(r));
    active++;
    try {
      return await run();
    } finally {
      active--;
      queue.shift()?.();
    }
  };
}
