import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { buildApp, type App } from '../../src/server/app.js';
import { loadConfig, type Config, type ConfigOverrides } from '../../src/core/config/config.js';
import { createLogger, type Logger } from '../../src/core/log.js';
import { createTestDatabase } from './db.js';

/** The response of one GraphQL operation. */
export interface GqlResult<T = Record<string, any>> {
  status: number;
  data?: T;
  errors?: { message: string; extensions?: Record<string, unknown> }[];
}

/** A test harness: the real app on its own database, driven through yoga.fetch. */
export interface TestApp {
  app: App;
  adminToken: string;
  dbUrl: string;
  gql<T = Record<string, any>>(
    query: string,
    variables?: Record<string, unknown>,
    token?: string | null,
  ): Promise<GqlResult<T>>;
  /** Runs SQL directly, to check what was (not) written. */
  sql<T = Record<string, any>>(query: string, params?: unknown[]): Promise<T[]>;
}

export const ADMIN_TOKEN = 'tsk_admin_test-admin-token-0123456789';

/** `over` on top of `base`, section by section: a section both name gets the settings of both, those of `over` winning. */
export function layered(base: ConfigOverrides, over: ConfigOverrides): ConfigOverrides {
  const out: Record<string, object> = { ...base };
  for (const [name, section] of Object.entries(over)) out[name] = { ...out[name], ...section };
  return out as ConfigOverrides;
}

/** One GraphQL operation through `app`'s yoga, as the admin unless `token` says otherwise (null: anonymous). */
export async function gqlOn<T = Record<string, any>>(
  app: App,
  query: string,
  variables?: Record<string, unknown>,
  token: string | null = ADMIN_TOKEN,
): Promise<GqlResult<T>> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (token) headers.authorization = `Bearer ${token}`;
  const res = await app.yoga.fetch('http://test/graphql', {
    method: 'POST',
    headers,
    body: JSON.stringify({ query, variables }),
  });
  return { ...((await res.json()) as Omit<GqlResult<T>, 'status'>), status: res.status };
}

/** The harness `t` with its operations sent to another process's app (one started by startSecondApp). */
export const harnessOn = (t: TestApp, app: App): TestApp => ({
  ...t,
  app,
  gql: (query, variables, token) => gqlOn(app, query, variables, token),
});

let testApps = 0;
/**
 * A process name of its own for each test app: the apps of one test process would otherwise all be
 * `<host>:4000` (the name is made from PORT, which a test's environment leaves unset), one row of the
 * process registry and the same server worker names.
 */
const nextProcessName = () => `test-${process.pid}-${++testApps}`;

/**
 * The server section of every test app: its own database, a port and a process name of its own, the
 * test admin token and secret key.
 */
function testServer(databaseUrl: string, processName = nextProcessName()): ConfigOverrides['server'] {
  return {
    databaseUrl,
    processName,
    dataDir: path.join(os.tmpdir(), 'tagsched-test'),
    adminToken: ADMIN_TOKEN,
    secretKey: 'test-secret-key',
    port: 0,
    host: '127.0.0.1',
  };
}

/** Builds the app on a fresh database before the file's tests, and tears it down after; `log` replaces the silent logger. */
export function useTestApp(overrides: ConfigOverrides = {}, options: { log?: () => Logger } = {}): TestApp {
  const harness = {} as TestApp;
  let drop: () => Promise<void>;
  beforeAll(async () => {
    const db = await createTestDatabase();
    drop = db.drop;
    const config = loadConfig(
      {},
      layered(
        {
          server: testServer(db.url),
          // Tests run passes themselves (app.scheduler.runPass()), so that what they see is deterministic.
          scheduler: { automatic: false },
          // Nor does the provisioner run by itself when a test starts the app: a test of it runs its
          // cycles (app.provisioner.runCycle()) or says so.
          provisioner: { enabled: false },
          // Every in-process call comes from one "address": a file that tries many refused tokens on
          // purpose (terminated workers in the property test) would be throttled. The throttle's own
          // tests (test/security/limits.test.ts) set it.
          limits: { authFailuresPerMinute: 0 },
          // No built-in server worker, unless a test asks for one: it would be one more worker for every
          // test that counts or chooses workers. test/workflows/ turns them on.
          serverWorkers: { count: 0 },
        },
        overrides,
      ),
    );
    const app = await buildApp(config, {
      log: options.log?.() ?? createLogger(process.env.TEST_LOG_LEVEL ?? 'silent'),
    });
    Object.assign(harness, {
      app,
      adminToken: ADMIN_TOKEN,
      dbUrl: db.url,
      gql: (query: string, variables?: Record<string, unknown>, token?: string | null) =>
        gqlOn(app, query, variables, token),
      async sql(query: string, params: unknown[] = []) {
        return app.orm.em.getConnection().execute(query, params);
      },
    });
  });
  afterAll(async () => {
    await harness.app?.stop();
    await drop?.();
  });
  return harness;
}

/**
 * The configuration of a second server process on the database of `t`: the same admin token and
 * secret key, a port of its own, no built-in server workers; the service's defaults otherwise (the
 * limits among them), but for `overrides`.
 */
export function secondAppConfig(t: TestApp, overrides: ConfigOverrides = {}): Config {
  // Started again on its port, it has the same process name (and so the same server workers).
  const port = overrides.server?.port;
  const server = testServer(t.dbUrl, port ? `${os.hostname()}:${port}` : undefined);
  return loadConfig({}, layered({ server, serverWorkers: { count: 0 } }, overrides));
}

/**
 * Starts a second server process's app on the database of `t` (a port of its own, so that it can be
 * started again under the same server worker names); its caller stops it.
 */
export async function startSecondApp(
  t: TestApp,
  overrides: ConfigOverrides,
  options: { log?: Logger } = {},
): Promise<App> {
  const app = await buildApp(secondAppConfig(t, overrides), options.log ? { log: options.log } : {});
  await app.start();
  return app;
}
