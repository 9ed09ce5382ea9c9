import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    pool: 'forks',
    // Vitest's default is cores - 1, one worker on this 2-core machine; database tests wait on I/O.
    maxWorkers: 3,
    // Files share a worker process: MikroORM and yoga are imported once per worker, not per file.
    isolate: false,
    testTimeout: 30_000,
    hookTimeout: 120_000,
  },
});
