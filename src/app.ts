import fs from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import { getOperationAST, GraphQLError } from 'graphql';
import { createYoga, type YogaServerInstance } from 'graphql-yoga';
import { useServer } from 'graphql-ws/use/ws';
import { WebSocketServer } from 'ws';
import type { Config } from './config.js';
import type { Context } from './context.js';
import { AppError } from './errors.js';
import { startEmbeddedPg, type EmbeddedPg } from './embedded-pg.js';
import { createLocalEvents, createPgEvents, type Events } from './events.js';
import { createLoaders, type Loaders } from './loaders.js';
import { createLogger, type Logger } from './log.js';
import { createOrm, migrate, type DbTarget } from './orm.js';
import { createScheduler, type Scheduler } from './scheduler/scheduler.js';
import { schema } from './schema.js';
import { BadTokenError, identityOf, resolveViewer, viewerIn, type Viewer, type ViewerIdentity } from './services/auth.js';
import { markConnected, markDisconnected, markManyDisconnected } from './services/presence.js';
import { ensureAdminAccess } from './services/bootstrap.js';
import { settleDependents } from './services/work-requests.js';
import { createSecretBox, type SecretBox } from './services/secrets.js';
import { handleStatusPage } from './status/pages.js';

/** The WebSocket close code for a missing, wrong or disabled token. */
export const CLOSE_UNAUTHORIZED = 4401;

/** A built service: start() listens, stop() closes everything in order. */
export interface App {
  readonly config: Config;
  readonly orm: MikroORM;
  readonly yoga: YogaServerInstance<Record<string, unknown>, Context>;
  readonly log: Logger;
  readonly events: Events;
  readonly scheduler: Scheduler;
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
        warn: (message: unknown) => log.warn({ knex: true }, String(message)),
        error: (message: unknown) => log.error({ knex: true }, String(message)),
        deprecate: (method: unknown, alternative: unknown) => log.debug({ knex: true, method, alternative }, 'deprecated'),
        debug: (message: unknown) => log.debug({ knex: true }, typeof message === 'string' ? message : JSON.stringify(message)),
      },
    },
  });
  const applied = await migrate(orm, config.databaseUrl);
  if (applied.length) log.info({ migrations: applied }, 'database migrated');
  const { firstToken } = await ensureAdminAccess(orm.em.fork(), config.adminToken);
  if (firstToken) {
    // Printed on stderr, outside the JSON log, exactly once: it is the only copy.
    process.stderr.write(`\nFirst start: an admin token was created. It is shown only this once:\n\n    ${firstToken}\n\n`);
  }
  const secrets: SecretBox = createSecretBox(loadSecretKey(config, log));
  // Several processes share one PostgreSQL server: events cross them through LISTEN/NOTIFY. The
  // embedded database is one process (and its single session cannot LISTEN across connections).
  const events = options.events ?? (config.databaseUrl ? createPgEvents(config.databaseUrl, log) : createLocalEvents());
  // The scheduler depends on the lifecycle through this one function, not on the services layer.
  const scheduler = createScheduler({ orm, config, log, events, settleDependents });

  /**
   * A context for a viewer; `em`, when given, is the fork the viewer was read with. Given an identity
   * (a subscription's, kept by its connection), the viewer is made again in each new fork.
   */
  function contextFor(who: Viewer | { identity: ViewerIdentity }, em?: EntityManager): Context {
    let scope: { em: EntityManager; loaders: Loaders; viewer: Viewer } | null = null;
    const open = () => {
      if (!scope) {
        const fork = em ?? orm.em.fork();
        em = undefined;
        scope = { em: fork, loaders: createLoaders(fork, config, scheduler.workers), viewer: 'identity' in who ? viewerIn(fork, who.identity) : who };
      }
      return scope;
    };
    return {
      get viewer() {
        return 'identity' in who ? open().viewer : who;
      },
      config,
      secrets,
      events,
      log,
      scheduler,
      get em() {
        return open().em;
      },
      get loaders() {
        return open().loaders;
      },
      renew() {
        scope = null;
        em = undefined;
      },
    };
  }

  async function makeContext(authorization: string | null | undefined): Promise<Context> {
    const em = orm.em.fork();
    try {
      return contextFor(await resolveViewer(em, authorization), em);
    } catch (err) {
      if (err instanceof BadTokenError) {
        throw new GraphQLError(err.message, { extensions: { code: 'UNAUTHENTICATED', http: { status: 401 } } });
      }
      throw err;
    }
  }

  const yoga = createYoga<Record<string, unknown>, Context>({
    schema,
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
    graphiql: config.graphiql ? { subscriptionsProtocol: 'WS' } : false,
    renderGraphiQL: async (options) => (await import('@graphql-yoga/render-graphiql')).renderGraphiQL(options),
    logging: {
      debug: (...args) => log.debug({ args }, 'yoga'),
      info: (...args) => log.info({ args }, 'yoga'),
      warn: (...args) => log.warn({ args }, 'yoga'),
      error: (...args) => log.error({ args }, 'yoga'),
    },
    context: ({ request }) => makeContext(request.headers.get('authorization')),
  });

  const httpServer: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const url = req.url ?? '/';
    if (url === '/healthz') {
      orm.em
        .getConnection()
        .execute('select 1')
        .then(
          () => res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"ok"}'),
          () => res.writeHead(503, { 'content-type': 'application/json' }).end('{"status":"database unavailable"}'),
        );
      return;
    }
    if (url.startsWith('/-/status/')) {
      handleStatusPage(orm.em.fork(), config, url, res).catch((err: unknown) => {
        log.error({ err }, 'status page failed');
        if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
        res.end('internal error');
      });
      return;
    }
    void yoga(req, res);
  });

  const wss = new WebSocketServer({ server: httpServer, path: yoga.graphqlEndpoint });
  // Open worker connections of this process, to mark a worker disconnected when its last one closes.
  const connections = new Map<number, number>();
  const workerOf = new WeakMap<object, number>();
  // Who each connection is, resolved once when it opens: its subscriptions share it.
  const identityOfConnection = new WeakMap<object, ViewerIdentity>();
  let stopping = false;
  /** Disconnections being recorded: stop() records them too, in case the ORM closes under them. */
  const recording = new Map<number, Promise<void>>();
  const wsServer = useServer<{ authorization?: string; Authorization?: string }>(
    {
      execute: (args) => (args.rootValue as { execute: (a: unknown) => unknown }).execute(args) as never,
      subscribe: (args) => (args.rootValue as { subscribe: (a: unknown) => unknown }).subscribe(args) as never,
      onConnect: async (ctx) => {
        const auth = ctx.connectionParams?.authorization ?? ctx.connectionParams?.Authorization;
        let viewer: Viewer;
        try {
          viewer = await resolveViewer(orm.em.fork(), typeof auth === 'string' ? auth : null);
        } catch (err) {
          if (!(err instanceof BadTokenError)) throw err;
          // 4401: the agent must not retry with the same token.
          ctx.extra.socket.close(CLOSE_UNAUTHORIZED, `Unauthorized: ${err.message}`);
          return false;
        }
        identityOfConnection.set(ctx, identityOf(viewer));
        if (viewer.kind === 'worker') {
          const id = viewer.worker.id;
          workerOf.set(ctx, id);
          const n = (connections.get(id) ?? 0) + 1;
          connections.set(id, n);
          await markConnected(orm.em.fork(), events, id);
        }
        return true;
      },
      onDisconnect: async (ctx) => {
        const id = workerOf.get(ctx);
        if (id === undefined || stopping) return; // stop() records them all at once
        const n = (connections.get(id) ?? 1) - 1;
        if (n > 0) return void connections.set(id, n);
        connections.delete(id);
        const recorded = markDisconnected(orm.em.fork(), events, id).catch((err: unknown) => {
          if (!stopping) log.warn({ err, workerId: id }, 'could not record a disconnection');
        });
        recording.set(id, recorded);
        await recorded;
        if (recording.get(id) === recorded) recording.delete(id);
      },
      onSubscribe: async (ctx, _id, params) => {
        const { schema: s, execute, subscribe, parse, validate } = yoga.getEnveloped({ ...ctx, req: ctx.extra.request, socket: ctx.extra.socket, params });
        const document = parse(params.query);
        const errors = validate(s, document);
        if (errors.length) return errors;
        // A subscription lives as long as the connection: it uses the connection's viewer and opens a
        // database session only per event. A query or mutation checks the token again, as over HTTP.
        const identity = identityOfConnection.get(ctx);
        const isSubscription = getOperationAST(document, params.operationName)?.operation === 'subscription';
        const auth = ctx.connectionParams?.authorization ?? ctx.connectionParams?.Authorization;
        const contextValue = isSubscription && identity ? contextFor({ identity }) : await makeContext(typeof auth === 'string' ? auth : null);
        return { schema: s, operationName: params.operationName, document, variableValues: params.variables, contextValue, rootValue: { execute, subscribe } };
      },
    },
    wss,
  );

  return {
    config,
    orm,
    yoga,
    log,
    events,
    scheduler,
    firstAdminToken: firstToken,
    async start() {
      scheduler.start();
      await new Promise<void>((resolve, reject) => {
        httpServer.once('error', reject);
        httpServer.listen(config.port, config.host, () => resolve());
      });
      const { port } = httpServer.address() as AddressInfo;
      const url = `http://${config.host === '0.0.0.0' ? '127.0.0.1' : config.host}:${port}/graphql`;
      log.info({ port, url }, 'tagsched is listening');
      return { port, url };
    },
    async stop() {
      await scheduler.stop();
      // The workers connected here are marked disconnected before the database closes: one statement
      // instead of each socket's onDisconnect, which would race the ORM's close and leave them
      // "connected" for the other processes' passes to give work they cannot receive.
      stopping = true;
      await wsServer.dispose();
      const closed = new Promise<void>((resolve) => httpServer.close(() => resolve()));
      httpServer.closeAllConnections();
      await closed;
      const held = [...new Set([...connections.keys(), ...recording.keys()])];
      connections.clear();
      await markManyDisconnected(orm.em.fork(), events, held).catch((err: unknown) => log.warn({ err, workers: held.length }, 'could not record the disconnections'));
      await events.close?.();
      await orm.close(true);
      await embedded?.stop();
    },
  };
}
