import fs from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import type { MikroORM } from '@mikro-orm/postgresql';
import { GraphQLError } from 'graphql';
import { createYoga, type YogaServerInstance } from 'graphql-yoga';
import { ClientRefusal, createClientAuth } from './client-auth.js';
import type { Config } from './config.js';
import type { Context } from './context.js';
import { createContextFactory } from './context-factory.js';
import { AppError } from './errors.js';
import { GRAPHIQL_EXAMPLES } from './graphiql-examples.js';
import { startEmbeddedPg, type EmbeddedPg } from './embedded-pg.js';
import { createLocalEvents, createPgEvents, type Events } from './events.js';
import { createAuthThrottle } from './limits/auth-throttle.js';
import { graphqlLimitPlugins } from './limits/graphql.js';
import { refuseLargeBody } from './limits/http.js';
import { capText, createLogger, serializeError, type Logger } from './log.js';
import { createOrm, migrate, type DbTarget } from './orm.js';
import { createProvisioner, type Provisioner } from './provisioner/provisioner.js';
import { createScheduler, type Scheduler } from './scheduler/scheduler.js';
import { useParseGuard } from './parse-guard.js';
import { schema } from './schema.js';
import { ensureAdminAccess } from './services/identity/bootstrap.js';
import { hashToken } from './services/identity/tokens.js';
import { TokenSchema } from './entities/token.js';
import { purgeIdempotencyKeys } from './services/work/idempotency.js';
import { announceRevoked } from './services/identity/token-lifecycle.js';
import { settleDependents } from './services/workflows/settle-dependents.js';
import { startQuarantineProbes } from './services/work/quarantine-probes.js';
import { resumeOrchestration } from './services/workflows/resume-orchestration.js';
import { createServerWorkers, type ServerWorkers } from './server-tasks/server-workers.js';
import { createSecretBox, type SecretBox } from './services/identity/secrets.js';
import { handleStatusPage, isStatusPath } from './status/router.js';
import { handleProbe } from './health.js';
import { serveMetrics } from './metrics/endpoint.js';
import { createProcessMetrics, type ProcessMetrics } from './metrics/process-metrics.js';
import { CLOSE_CODES } from './ws/connections.js';
import { startWsServer } from './ws/server.js';
import { createTokenGuard } from './ws/token-guard.js';

/** The WebSocket close code for a missing, wrong, disabled, revoked or expired token. */
export const CLOSE_UNAUTHORIZED = CLOSE_CODES.unauthorized;

/** A value yoga logs, as a log line may carry it. */
const loggable = (value: unknown) => (value instanceof Error ? serializeError(value) : capText(typeof value === 'string' ? value : (JSON.stringify(value) ?? String(value))));

/** A built service: start() listens, stop() closes everything in order. */
export interface App {
  readonly config: Config;
  readonly orm: MikroORM;
  readonly yoga: YogaServerInstance<Record<string, unknown>, Context>;
  readonly log: Logger;
  readonly events: Events;
  readonly scheduler: Scheduler;
  /** This process's metrics (served at /metrics with the database gauges). */
  readonly metrics: ProcessMetrics;
  /** The built-in server workers of this process (started by start()). */
  readonly serverWorkers: ServerWorkers;
  /** Launches and stops pool instances; started with the service unless TAGSCHED_PROVISIONER=off. */
  readonly provisioner: Provisioner;
  /** The admin token created on the first start of an empty database (null otherwise). */
  readonly firstAdminToken: string | null;
  start(): Promise<{ port: number; url: string }>;
  stop(): Promise<void>;
}

/** The key that seals provider accounts: configured, or generated once next to the embedded database. */
function loadSecretKey(config: Config, log: Logger): string {
  if (config.secretKey) return config.secretKey;
  const file = path.join(config.dataDir, 'secret.key');
  if (!fs.existsSync(file)) {
    fs.mkdirSync(config.dataDir, { recursive: true });
    fs.writeFileSync(file, randomBytes(32).toString('base64url'), { mode: 0o600, flag: 'wx' });
  }
  if (config.databaseUrl) {
    log.warn({ file }, 'TAGSCHED_SECRET_KEY is not set: provider accounts are sealed with a key kept in the data directory; set the same key on every server process');
  }
  return fs.readFileSync(file, 'utf8').trim();
}

/** Opens the database (embedded when no URL), migrates, and builds the HTTP + WebSocket GraphQL service. */
export async function buildApp(config: Config, options: { log?: Logger; events?: Events } = {}): Promise<App> {
  const log = options.log ?? createLogger(config.logLevel);
  let embedded: EmbeddedPg | null = null;
  let target: DbTarget;
  if (config.databaseUrl) {
    target = { clientUrl: config.databaseUrl };
  } else {
    embedded = await startEmbeddedPg(config.dataDir);
    target = embedded.target;
    log.info({ dataDir: embedded.dataDir }, 'no DATABASE_URL: using the embedded PostgreSQL (PGlite); set DATABASE_URL to use a PostgreSQL server');
  }
  // PGlite serves one session: one pooled connection, or transactions on two connections deadlock.
  const orm = await createOrm(target, {
    pool: embedded ? { min: 0, max: 1 } : { min: 0, max: 10 },
    // At debug level every SQL statement is logged (without its parameters, which may hold secrets),
    // so that an operator, or a test counting the statements of an operation, sees them all.
    debug: log.isLevelEnabled('debug') ? ['query'] : false,
    logger: (message) => log.debug({ orm: true }, message),
    // The query builder's own warnings ("Connection Error: …" when PostgreSQL drops a pooled
    // connection) go to the JSON log instead of bare lines on the console.
    driverOptions: {
      log: {
        warn: (message: unknown) => log.warn({ knex: true }, capText(message)),
        error: (message: unknown) => log.error({ knex: true }, capText(message)),
        deprecate: (method: unknown, alternative: unknown) => log.debug({ knex: true, method, alternative }, 'deprecated'),
        debug: (message: unknown) => log.debug({ knex: true }, capText(typeof message === 'string' ? message : JSON.stringify(message))),
      },
    },
  });
  const applied = await migrate(orm, config.databaseUrl);
  if (applied.length) log.info({ migrations: applied }, 'database migrated');
  // What /readyz checks is still applied: every migration there is now.
  const migrations = (await orm.migrator.getExecutedMigrations()).map((m) => m.name);
  const { firstToken, revokedTokenIds, revokedConfigured } = await ensureAdminAccess(orm.em.fork(), config.adminToken);
  const secrets: SecretBox = createSecretBox(loadSecretKey(config, log));
  // Several processes share one PostgreSQL server: events cross them through LISTEN/NOTIFY. The
  // embedded database is one process (and its single session cannot LISTEN across connections).
  const events = options.events ?? (config.databaseUrl ? createPgEvents(config.databaseUrl, log) : createLocalEvents());
  // The scheduler depends on the lifecycle through these functions, not on the services layer.
  const metrics = createProcessMetrics();
  const scheduler = createScheduler({ orm, config, log, events, settleDependents, startProbes: startQuarantineProbes, metrics });
  const serverWorkers = createServerWorkers({ orm, config, log, events, scheduler, metrics });
  const provisioner = createProvisioner({ orm, config, log, events, secrets, scheduler });

  const throttle = createAuthThrottle(config.limits.authFailuresPerMinute);
  const authenticateClient = createClientAuth(throttle, log);
  const contexts = createContextFactory({ orm, config, secrets, events, log, scheduler, metrics });

  async function httpContext(authorization: string | null, address: string): Promise<Context> {
    const em = orm.em.fork();
    try {
      return contexts.forOperation((await authenticateClient(em, authorization, address)).viewer, em);
    } catch (err) {
      if (err instanceof ClientRefusal) {
        throw new GraphQLError(err.message, { extensions: { code: err.status === 429 ? 'RATE_LIMITED' : 'UNAUTHENTICATED', http: { status: err.status } } });
      }
      throw err;
    }
  }

  const yoga = createYoga<Record<string, unknown>, Context>({
    schema,
    // The parse guard goes last: each onParse hook wraps the parser the ones before it set (the token
    // limit brings its own), so only the last one sees every stack overflow.
    plugins: [...graphqlLimitPlugins(config, log), metrics.graphqlPlugin(), useParseGuard()],
    maskedErrors: {
      // A client-fixable error thrown outside a result union (a query argument, a cursor) keeps its
      // message and code; anything else is a bug: logged in full, masked to the client.
      maskError(error, message) {
        // Unwrap: graphql-js wraps what a resolver throws in a located GraphQLError (compare by name,
        // not instanceof: test runners may load two copies of graphql).
        let inner: unknown = error;
        while (inner instanceof Error && inner.name === 'GraphQLError' && (inner as GraphQLError).originalError) inner = (inner as GraphQLError).originalError;
        const located = error as GraphQLError;
        if (inner instanceof AppError) {
          return new GraphQLError(inner.message, { nodes: located.nodes, path: located.path, extensions: { code: inner.code } });
        }
        if (inner instanceof Error && inner.name === 'GraphQLError') return inner as GraphQLError; // meant for the client
        log.error({ err: inner }, 'unexpected error');
        return new GraphQLError(message, { nodes: located.nodes, path: located.path, extensions: { code: 'INTERNAL_SERVER_ERROR' } });
      },
    },
    // GraphiQL from this package, not from a CDN: build farms often have no way out to the internet.
    // Its bundle (some 49 MiB of heap) is loaded when someone first opens it, not in every process.
    graphiql: config.graphiql ? { subscriptionsProtocol: 'WS', defaultQuery: GRAPHIQL_EXAMPLES } : false,
    renderGraphiQL: async (options) => (await import('@graphql-yoga/render-graphiql')).renderGraphiQL(options),
    // Yoga's own lines: errors go through the same serializer as ours (no SQL, no parameters) and a
    // bug was already logged at error by maskError, so yoga's echo of it, like its notes on requests
    // it could not parse (client mistakes), stays at warn.
    logging: {
      debug: (...args) => log.debug({ args: args.map(loggable) }, 'yoga'),
      info: (...args) => log.info({ args: args.map(loggable) }, 'yoga'),
      warn: (...args) => log.warn({ args: args.map(loggable) }, 'yoga'),
      error: (...args) => log.warn({ args: args.map(loggable) }, 'yoga'),
    },
    context: ({ request, req }: { request: Request; req?: IncomingMessage }) => httpContext(request.headers.get('authorization'), req?.socket.remoteAddress ?? 'unknown'),
  });

  /** Set when stop() begins: /readyz answers 503 from then on. */
  let shuttingDown = false;
  const httpServer: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const url = req.url ?? '/';
    const pathname = url.split('?')[0];
    if (handleProbe(pathname, res, { orm, migrations, stopping: () => shuttingDown })) return;
    if (pathname === '/metrics') {
      serveMetrics(req, res, { orm, config, scheduler, metrics, log }).catch((err: unknown) => {
        log.error({ err }, '/metrics failed');
        if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
        res.end('internal error');
      });
      return;
    }
    if (isStatusPath(pathname)) {
      handleStatusPage({ em: orm.em.fork(), config, scheduler, authenticate: authenticateClient }, req, res).catch((err: unknown) => {
        log.error({ err }, 'status page failed');
        if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
        res.end('internal error');
      });
      return;
    }
    if (refuseLargeBody(req, res, config.limits.maxBodyBytes)) return;
    void yoga(req, res);
  });

  let housekeeping: NodeJS.Timeout | null = null;
  const ws = startWsServer({ httpServer, yoga, orm, config, log, events, contexts, authenticateClient, tokenGuard: createTokenGuard(orm), metrics });
  // Tokens an earlier TAGSCHED_ADMIN_TOKEN created, revoked by ensureAdminAccess: other processes close their sockets too.
  announceRevoked(events, revokedTokenIds);
  if (revokedConfigured) log.warn('TAGSCHED_ADMIN_TOKEN names a token that was revoked: it is refused; set a new value');

  return {
    config,
    orm,
    yoga,
    log,
    events,
    scheduler,
    metrics,
    serverWorkers,
    provisioner,
    firstAdminToken: firstToken,
    async start() {
      // Workflows and synchronization points an older version left PENDING run now.
      for (const change of await resumeOrchestration(orm.em.fork(), config)) events.publish('workRequestChanged', change);
      scheduler.start();
      // Idempotency keys past their lifetime are deleted hourly (and a lookup never answers with one).
      housekeeping ??= setInterval(
        () => {
          purgeIdempotencyKeys(orm.em.fork(), config.idempotencyKeyTtlMs).catch((err: unknown) => log.warn({ err }, 'could not delete expired idempotency keys'));
        },
        60 * 60 * 1000,
      ).unref();
      try {
        await new Promise<void>((resolve, reject) => {
          httpServer.once('error', reject);
          httpServer.listen(config.port, config.host, () => resolve());
        });
      } catch (err) {
        // Not listening: the first admin token was never shown, so it must not stay either (the next
        // start of this database makes and shows another).
        if (firstToken)
          await orm.em
            .fork()
            .nativeDelete(TokenSchema, { hash: hashToken(firstToken) })
            .catch(() => undefined);
        throw err;
      }
      const { port } = httpServer.address() as AddressInfo;
      const url = `http://${config.host === '0.0.0.0' ? '127.0.0.1' : config.host}:${port}/graphql`;
      await serverWorkers.start(port);
      if (firstToken) {
        // Printed on stderr, outside the JSON log, exactly once and only once the service listens: it is
        // the only copy. Before the "listening" line, which is what scripts (and tests) wait for.
        process.stderr.write(`\nFirst start: an admin token was created. It is shown only this once:\n\n    ${firstToken}\n\n`);
      }
      log.info({ port, url }, 'tagsched is listening');
      if (config.provisioner) provisioner.start(url);
      return { port, url };
    },
    async stop() {
      shuttingDown = true;
      clearInterval(housekeeping ?? undefined);
      // The provisioner before the scheduler and the connections: local agents it stops can still
      // report what they finish.
      await provisioner.stop();
      await serverWorkers.stop();
      await scheduler.stop();
      // The workers connected here are marked disconnected before the database closes: one statement
      // instead of each socket's onDisconnect, which would race the ORM's close and leave them
      // "connected" for the other processes' passes to give work they cannot receive.
      await ws.stop();
      const closed = new Promise<void>((resolve) => httpServer.close(() => resolve()));
      httpServer.closeAllConnections();
      await closed;
      await events.close?.();
      await orm.close(true);
      await embedded?.stop();
    },
  };
}
