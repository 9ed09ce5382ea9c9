import { defineConfig } from 'vitest/config';

export default defineConfig({
  resolve: {
    // graphql ships both CommonJS (`main`) and ESM (`module`) builds. Node, and so every dependency
    // vitest leaves external (Pothos, yoga), loads the CommonJS one; without this alias vite would
    // give our own sources the ESM one, and a GraphQLError or schema from one copy is not recognised
    // by the other ("Cannot use GraphQLUnionType from another module or realm", masked errors).
    alias: [{ find: /^graphql$/, replacement: 'graphql/index.js' }],
  },
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
