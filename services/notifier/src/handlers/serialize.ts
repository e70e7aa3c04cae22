/**
 * Run tasks of one key one after another, in the order they were submitted, and tasks of
 * different keys at once. The notifier keeps one document's transitions in log order with it
 * while it works on many documents concurrently.
 */
export function keyedSerializer(): <T>(key: string, task: () => Promise<T>) => Promise<T> {
  const tails = new Map<string, Promise<unknown>>();
  return (key, task) => {
    const prev = tails.get(key) ?? Promise.resolve();
    const run = prev.then(task, task);
    const tail = run.catch(() => undefined);
    tails.set(key, tail);
    void tail.then(() => {
      if (tails.get(key) === tail) tails.delete(key);
    });
    return run;
  };
}

/**
 * At most `max` tasks of one key at once; the rest wait their turn, in the order they came (none
 * is dropped). The notifier keeps one receiver host from taking every delivery slot with it: one
 * tenant's slow or flooded receiver holds at most `max` POSTs.
 */
export function keyedLimiter(max: number): <T>(key: string, task: () => Promise<T>) => Promise<T> {
  const keys = new Map<string, { active: number; waiting: Array<() => void> }>();
  return async (key, task) => {
    let k = keys.get(key);
    if (!k) {
      k = { active: 0, waiting: [] };
      keys.set(key, k);
    }
    const slot = k;
    if (slot.active < max) slot.active++;
    // Woken by a finishing task, which hands its slot over rather than freeing it.
    else await new Promise<void>((resolve) => slot.waiting.push(resolve));
    try {
      return await task();
    } finally {
      const next = slot.waiting.shift();
      if (next) next();
      else if (--slot.active === 0) keys.delete(key);
    }
  };
}
