import { defineConfig } from 'vitest/config';

// One runner for every tier. The tier is in the file name: *.unit.test.ts (pure, fast),
// *.contract.test.ts (a port's adapter against its shared suite), *.int.test.ts (one package
// against a real nats-server), *.e2e.test.ts (a real nats-server and the service processes).
// Every broker-backed file starts its own nats-server on a free port with its own store, so
// files never share state.
//
// Two groups, one after the other: the packages' and services' own tests two files at a time
// (each is one process), then the files under test/ one at a time (an e2e file runs a stack of
// its own: the eight services in three processes as `up` lays them out, nine per service; two
// at once only fight over 2 cores: tried with nine, each ran ~2× slower), so the first group
// overlaps the idle moments of one-process files.
export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    reporters: ['default'],
    projects: [
      {
        extends: true,
        test: { name: 'units', include: ['packages/*/src/**/*.test.ts', 'services/*/src/**/*.test.ts'], maxWorkers: 2, sequence: { groupOrder: 0 } },
      },
      {
        extends: true,
        test: { name: 'system', include: ['test/**/*.test.ts'], maxWorkers: 1, sequence: { groupOrder: 1 } },
      },
    ],
  },
});
