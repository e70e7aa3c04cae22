import { defineConfig } from 'vitest/config';

// One runner for every tier. The tier is in the file name: *.unit.test.ts (pure, fast),
// *.contract.test.ts (a port's adapter against its shared suite), *.e2e.test.ts (real
// nats-server and service processes). End-to-end files run one at a time: each starts its own
// broker and six processes, and 2 cores cannot run several such stacks without timing noise.
export default defineConfig({
  test: {
    include: ['packages/*/src/**/*.test.ts', 'services/*/src/**/*.test.ts', 'test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    reporters: ['default'],
  },
});
