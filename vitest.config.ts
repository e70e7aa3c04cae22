import { defineConfig } from 'vitest/config';

// One runner for every tier. The tier is in the file name: *.unit.test.ts (pure, fast),
// *.contract.test.ts (a port's adapter against its shared suite), *.int.test.ts (one package
// against a real nats-server), *.e2e.test.ts (a real nats-server and the service processes).
// Files run in parallel, one per core; every broker-backed file starts its own nats-server on a
// free port with its own store, so they never share state.
export default defineConfig({
  test: {
    include: ['packages/*/src/**/*.test.ts', 'services/*/src/**/*.test.ts', 'test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    reporters: ['default'],
  },
});
