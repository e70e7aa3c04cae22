/**
 * One value per process under `key`, made by the first caller: what several services of one
 * process share (a worker host's shutdown, ops port and broker connection). Kept on globalThis,
 * so two copies of a module in one process (a bundle and a test's import) still share it.
 */
export function processWide<T>(key: string, make: () => T): T {
  const g = globalThis as Record<symbol, T | undefined>;
  const slot = Symbol.for(`memstream.${key}`);
  return (g[slot] ??= make());
}
