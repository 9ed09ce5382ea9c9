import { configDefaults, defineConfig } from 'vitest/config';

/**
 * The process suites: real server processes and agents started, killed, cut off and restarted (the
 * fault tests, the pools' instances over their lifetimes, workflows end to end). They are slow and
 * heavy on two cores, so they run apart:
 * `npm run test:processes` (TAGSCHED_TEST_PROCESSES=1), two files at a time, after `npm test` in CI.
 */
const PROCESS_SUITES = [
  'test/faults/**/*.test.ts',
  'test/provisioner/{faults,instance-end,instance-logs,interruption,loop,retirement,rollout}.test.ts',
  'test/workflows/pipeline.test.ts',
];
const processes = process.env.TAGSCHED_TEST_PROCESSES === '1';
/**
 * The cluster suite (test/cluster/): etcd, Patroni, HAProxy, PgBouncer and three server processes, started
 * by the suite itself. It needs root and those packages, and takes the whole machine for several minutes:
 * `npm run test:cluster` (TAGSCHED_TEST_CLUSTER=1) alone, after the other suites in CI.
 */
const CLUSTER_SUITES = ['test/cluster/**/*.test.ts'];
const cluster = process.env.TAGSCHED_TEST_CLUSTER === '1';

export default defineConfig({
  resolve: {
    // graphql ships both CommonJS (`main`) and ESM (`module`) builds. Node, and so every dependency
    // vitest leaves external (Pothos, yoga), loads the CommonJS one; without this alias vite would
    // give our own sources the ESM one, and a GraphQLError or schema from one copy is not recognised
    // by the other ("Cannot use GraphQLUnionType from another module or realm", masked errors).
    alias: [{ find: /^graphql$/, replacement: 'graphql/index.js' }],
  },
  test: {
    include: cluster ? CLUSTER_SUITES : processes ? PROCESS_SUITES : ['test/**/*.test.ts'],
    exclude: cluster
      ? configDefaults.exclude
      : processes
        ? [...configDefaults.exclude, ...CLUSTER_SUITES]
        : [...configDefaults.exclude, ...PROCESS_SUITES, ...CLUSTER_SUITES],
    // The cluster suite makes its own databases (on its Patroni nodes), not the template's.
    globalSetup: cluster ? [] : ['test/global-setup.ts'],
    pool: 'forks',
    // Vitest's default is cores - 1, one worker on this 2-core machine; database tests wait on I/O.
    maxWorkers: processes ? 2 : 3,
    // Files share a worker process: MikroORM and yoga are imported once per worker, not per file.
    isolate: false,
    testTimeout: 30_000,
    hookTimeout: 120_000,
  },
});
