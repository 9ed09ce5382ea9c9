import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { MikroORM } from '@mikro-orm/postgresql';
import { createYoga, type YogaServerInstance } from 'graphql-yoga';
import { createClientAuth } from '../api/client-auth.js';
import type { Config } from '../core/config/config.js';
import type { Context } from '../api/context.js';
import { createContextFactory } from '../api/context-factory.js';
import { databaseSessionUrl, openDatabase } from './database.js';
import { TokenSchema } from '../storage/entities/token.js';
import { createLocalEvents, createPgEvents, type Events } from '../storage/events.js';
import { GRAPHIQL_EXAMPLES } from '../api/graphiql-examples.js';
import { createHousekeeping } from '../loops/housekeeping.js';
import { createProcessTakeover } from '../loops/process-takeover.js';
import { createErrorMasking, useVariableErrors } from '../api/http/error-masking.js';
import { requestAddress } from '../api/http/client-address.js';
import { createHttpContext } from '../api/http/graphql-context.js';
import { createHttpRouter } from '../api/http/router.js';
import { trackOperationsInFlight } from '../api/http/operations-in-flight.js';
import { createAnonymousLimits } from '../api/limits/anonymous.js';
import { createAuthThrottle } from '../api/limits/auth-throttle.js';
import { graphqlLimitPlugins } from '../api/limits/graphql.js';
import { createLogger, type Logger } from '../core/log.js';
import { yogaLogging } from '../api/log-adapters.js';
import { createProcessMetrics, type ProcessMetrics } from '../api/metrics/process-metrics.js';
import { useParseGuard } from '../api/parse-guard.js';
import { createProvisioner, type Provisioner } from '../loops/provisioner/provisioner.js';
import { createLeadership, DUTIES, type Leadership } from '../loops/leadership.js';
import { createScheduler, type Scheduler } from '../scheduler/scheduler.js';
import { schema } from '../api/schema.js';
import { checkSharedSecretKey, loadSecretKey } from './secret-key.js';
import { createServerWorkers, type ServerWorkers } from '../loops/server-tasks/server-workers.js';
import { createProcessHeartbeat, registerProcess } from '../services/processes/registry.js';
import { ensureAdminAccess } from '../services/identity/bootstrap.js';
import { createSecretBox, type SecretBox } from '../services/identity/secrets.js';
import { announceRevoked } from '../services/identity/token-lifecycle.js';
import { hashToken } from '../services/identity/tokens.js';
import { startQuarantineProbes } from '../services/work/quarantine-probes.js';
import { resumeOrchestration } from '../services/workflows/resume-orchestration.js';
import { settleDependents } from '../services/workflows/settle-dependents.js';
import { CLOSE_CODES } from '../api/ws/connections.js';
import { startWsServer } from '../api/ws/server.js';
import { createTokenGuard } from '../api/ws/token-guard.js';

/** How long stop() waits for the GraphQL operations running when it begins (operations-in-flight.ts). */
const OPERATIONS_DRAIN_MS = 10_000;

/** The WebSocket close code for a missing, wrong, disabled, revoked or expired token. */
export const CLOSE_UNAUTHORIZED = CLOSE_CODES.unauthorized;

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
  /** The leases this process takes of what must happen once across the processes of its database. */
  readonly leadership: Leadership;
  /** The admin token created on the first start of an empty database (null otherwise). */
  readonly firstAdminToken: string | null;
  /** This process's id in the process registry (services/processes/registry.ts): the owner of the workers it holds. */
  readonly processId: number;
  start(): Promise<{ port: number; url: string }>;
  stop(): Promise<void>;
}

/** Opens the database (embedded when no URL), migrates, and builds the HTTP + WebSocket GraphQL service. */
export async function buildApp(config: Config, options: { log?: Logger; events?: Events } = {}): Promise<App> {
  const log = options.log ?? createLogger(config.server.logLevel);
  const { orm, embedded, migrations } = await openDatabase(config.server, log);
  const secretKey = loadSecretKey(config.server, log);
  const secrets: SecretBox = createSecretBox(secretKey);
  // Every process of the database seals with one key: one with another is refused before it writes anything.
  await checkSharedSecretKey(orm.em.fork(), secretKey, secrets, config.server, log).catch(async (err: unknown) => {
    await orm.close(true);
    await embedded?.stop();
    throw err;
  });
  const { firstToken, revokedTokenIds, revokedConfigured } = await ensureAdminAccess(
    orm.em.fork(),
    config.server.adminToken,
  );
  // This process in the registry, before any worker connects: it owns the workers whose sockets it holds.
  const processId = await registerProcess(orm.em.fork(), config, log);
  const processHeartbeat = createProcessHeartbeat({ orm, config, log });
  // Several processes share one PostgreSQL server: events cross them through LISTEN/NOTIFY. The
  // embedded database is one process (and its single session cannot LISTEN across connections).
  const events =
    options.events ??
    (config.server.databaseUrl
      ? createPgEvents({ pool: config.server.databaseUrl, session: databaseSessionUrl(config.server)! }, log)
      : createLocalEvents(log));
  // The scheduler depends on the lifecycle through these functions, not on the services layer; they
  // read the sections of the configuration the scheduler does not.
  const metrics = createProcessMetrics();
  // What must happen once across the processes of this database is led (loops/leadership.ts).
  const leadership = createLeadership({
    orm,
    events,
    log,
    holder: config.server.processName,
    leaseMs: config.leases.leaderLeaseMs,
  });
  const leadsChores = () => leadership.held(DUTIES.CHORES) !== null;
  metrics.trackLeadership(() => leadership.leading());
  const scheduler = createScheduler({
    orm,
    config,
    log,
    events,
    settleDependents: (em, abortedIds) => settleDependents(em, config, abortedIds),
    startProbes: (em, now) => startQuarantineProbes(em, config, now),
    metrics,
    leadsChores,
  });
  const serverWorkers = createServerWorkers({ orm, config, log, events, scheduler, metrics, processId });
  const provisioner = createProvisioner({
    orm,
    config,
    log,
    events,
    secrets,
    scheduler,
    metrics,
    leadership,
  });

  const throttle = createAuthThrottle(config.limits.authFailuresPerMinute);
  const anonymous = createAnonymousLimits({
    requestsPerMinute: config.limits.anonymousRequestsPerMinute,
    connectionsPerAddress: config.limits.anonymousConnectionsPerAddress,
  });
  const authenticateClient = createClientAuth(throttle, log);
  /** Set when stop() begins: /readyz answers 503 from then on, and workers' calls no longer mark them connected. */
  let shuttingDown = false;
  const contexts = createContextFactory({
    orm,
    config,
    secrets,
    events,
    log,
    scheduler,
    metrics,
    stopping: () => shuttingDown,
  });

  const httpContext = createHttpContext(orm, contexts, authenticateClient);

  const operations = trackOperationsInFlight();
  const yoga = createYoga<Record<string, unknown>, Context>({
    schema,
    // Variables that do not fit are refused first, with a code (api/http/error-masking.ts). The parse guard
    // goes last: each onParse hook wraps the parser the ones before it set (the token limit brings its
    // own), so only the last one sees every stack overflow.
    plugins: [
      useVariableErrors(),
      ...graphqlLimitPlugins(config, log),
      metrics.graphqlPlugin(),
      operations.plugin,
      useParseGuard(),
    ],
    // A client-fixable error keeps its message and code; anything else is a bug: logged, masked.
    maskedErrors: { maskError: createErrorMasking(log) },
    // GraphiQL from this package, not from a CDN: build farms often have no way out to the internet.
    // Its bundle (some 49 MiB of heap) is loaded when someone first opens it, not in every process.
    graphiql: config.api.graphiql ? { subscriptionsProtocol: 'WS', defaultQuery: GRAPHIQL_EXAMPLES } : false,
    renderGraphiQL: async (options) => (await import('@graphql-yoga/render-graphiql')).renderGraphiQL(options),
    // Yoga's own lines go to the JSON log (log-adapters.ts).
    logging: yogaLogging(log),
    context: ({ request, req }: { request: Request; req?: IncomingMessage }) =>
      httpContext(
        request.headers.get('authorization'),
        req ? requestAddress(req, config.limits.trustedProxies) : 'unknown',
      ),
  });

  const httpServer: Server = createServer(
    createHttpRouter({
      orm,
      config,
      log,
      scheduler,
      metrics,
      yoga,
      authenticate: authenticateClient,
      anonymous,
      migrations,
      stopping: () => shuttingDown,
    }),
  );

  const housekeeping = createHousekeeping(orm, config, log, leadsChores);
  const takeover = createProcessTakeover({ orm, events, config, log, leadsChores });
  const ws = startWsServer({
    httpServer,
    yoga,
    orm,
    config,
    log,
    events,
    contexts,
    authenticateClient,
    anonymous,
    tokenGuard: createTokenGuard(orm),
    metrics,
    processId,
  });
  // Tokens an earlier TAGSCHED_ADMIN_TOKEN created, revoked by ensureAdminAccess: other processes close their sockets too.
  announceRevoked(events, revokedTokenIds);
  if (revokedConfigured)
    log.warn('TAGSCHED_ADMIN_TOKEN names a token that was revoked: it is refused; set a new value');

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
    leadership,
    firstAdminToken: firstToken,
    processId,
    async start() {
      // After a silence past its timeout, the workers still connected here are taken back from a take-over.
      processHeartbeat.start(() => ws.reclaimConnections());
      // Workflows and synchronization points an older version left PENDING run now.
      for (const change of await resumeOrchestration(orm.em.fork(), config))
        events.publish('workRequestChanged', change);
      // A new chores leader looks for dead processes at once.
      leadership.follow(DUTIES.CHORES, () => void takeover.runOnce());
      scheduler.start();
      housekeeping.start();
      takeover.start();
      try {
        await new Promise<void>((resolve, reject) => {
          httpServer.once('error', reject);
          httpServer.listen(config.server.port, config.server.host, () => resolve());
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
      const url = `http://${config.server.host === '0.0.0.0' ? '127.0.0.1' : config.server.host}:${port}/graphql`;
      await serverWorkers.start();
      if (firstToken) {
        // Printed on stderr, outside the JSON log, exactly once and only once the service listens: it is
        // the only copy. Before the "listening" line, which is what scripts (and tests) wait for.
        process.stderr.write(
          `\nFirst start: an admin token was created. It is shown only this once:\n\n    ${firstToken}\n\n`,
        );
      }
      log.info({ port, url }, 'tagsched is listening');
      // Off (TAGSCHED_PROVISIONER=off), it still runs the retirements, which call no provider.
      provisioner.start(url);
      return { port, url };
    },
    async stop() {
      shuttingDown = true;
      housekeeping.stop();
      await takeover.stop();
      // The provisioner before the scheduler and the connections: local agents it stops can still
      // report what they finish.
      await provisioner.stop();
      await serverWorkers.stop();
      await scheduler.stop();
      // Its leases given up: the other processes take its duties at once.
      await leadership.stop();
      // Calls that began before the stop (and so may still mark their worker connected) end first.
      await operations.drain(OPERATIONS_DRAIN_MS);
      // The workers connected here are marked disconnected before the database closes: one statement
      // instead of each socket's onDisconnect, which would race the ORM's close and leave them
      // "connected" for the other processes' passes to give work they cannot receive.
      await ws.stop();
      const closed = new Promise<void>((resolve) => httpServer.close(() => resolve()));
      httpServer.closeAllConnections();
      await closed;
      // Operations still running (their sockets are closed) end before the database closes under them.
      await operations.drain(OPERATIONS_DRAIN_MS);
      await events.close?.();
      // Recorded stopped last: it holds no connection any more.
      await processHeartbeat.stop();
      await orm.close(true);
      await embedded?.stop();
    },
  };
}
