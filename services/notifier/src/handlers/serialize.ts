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
