import { anonymousRateMessage, type AnonymousLimits } from '../limits/anonymous.js';
import type { IncomingMessage, Server } from 'node:http';
import type { BlockList } from 'node:net';
import { DriverException, type MikroORM } from '@mikro-orm/postgresql';
import { getOperationAST, GraphQLError } from 'graphql';
import type { YogaServerInstance } from 'graphql-yoga';
import type { Context as WsContext } from 'graphql-ws';
import { useServer, type Extra } from 'graphql-ws/use/ws';
import { WebSocketServer, type WebSocket } from 'ws';
import { ClientRefusal, type ClientAuth } from '../client-auth.js';
import { clientAddress } from '../http/client-address.js';
import type { Config } from '../../core/config/config.js';
import type { ConnectionHandle, Context } from '../context.js';
import type { ContextFactory } from '../context-factory.js';
import type { Events } from '../../storage/events.js';
import type { Logger } from '../../core/log.js';
import { identityOf, tokenIdOf, viewerIn, type Viewer, type ViewerIdentity } from '../../services/identity/auth.js';
import { createConnectionPresence } from '../../services/workers/connection-presence.js';
import { runsOnConnectionIdentity } from './connection-identity.js';
import { CLOSE_CODES, closeSocket, createConnectionRegistry } from './connections.js';
import type { TokenGuard } from './token-guard.js';

/** What one graphql-ws connection keeps: who it is, its token, and the handle its subscriptions check. */
interface ConnectionState {
  identity: ViewerIdentity;
  handle: ConnectionHandle;
  /** Where it comes from (an anonymous connection counts against its address). */
  address: string;
}

/** What the connections gauge is told. */
export interface ConnectionRecorder {
  connectionOpened(kind: Viewer['kind']): void;
  connectionClosed(kind: Viewer['kind']): void;
}

/**
 * The address a socket's client connects from: that of its upgrade request (its peer, or past trusted
 * proxies its X-Forwarded-For: api/http/client-address.ts), as over HTTP.
 */
const addressOf = (socket: WebSocket, request: IncomingMessage, trusted: BlockList) =>
  clientAddress(
    request.socket?.remoteAddress ??
      (socket as unknown as { _socket?: { remoteAddress?: string } })._socket?.remoteAddress,
    request.headers ?? {},
    trusted,
  );

/**
 * The graphql-ws server on the HTTP server's GraphQL path (docs/design.md: interfaces and limits and tokens): a connection
 * authenticates once (throttled like HTTP), counts against its token's connections, is closed when
 * its token is revoked (in any process: `tokensRevoked`) or expires, and runs each operation through
 * yoga's envelop (the same parse, validation and cost limits as HTTP). Messages are bounded
 * (`maxPayload`), and so are the operations of one connection. An anonymous connection counts against
 * its address (api/limits/anonymous.ts: connections open at once, and each operation as a request). A
 * worker connection's opening and end are told to its worker's presence (services/workers/connection-presence.ts).
 */
export function startWsServer(deps: {
  httpServer: Server;
  yoga: YogaServerInstance<Record<string, unknown>, Context>;
  orm: MikroORM;
  config: Pick<Config, 'limits'>;
  log: Logger;
  events: Events;
  contexts: ContextFactory;
  authenticateClient: ClientAuth;
  anonymous: AnonymousLimits;
  tokenGuard: TokenGuard;
  /** This process's id in the process registry: the owner of the workers whose sockets it holds. */
  processId: number;
  /** Told of every connection counted and closed (the connections gauge). */
  metrics?: ConnectionRecorder;
}) {
  const { yoga, orm, config, log, events, contexts, authenticateClient, tokenGuard } = deps;
  const { limits } = config;
  // The upgrades to the GraphQL path are handed over by hand (noServer): attached to the HTTP server,
  // the WebSocket server would also re-emit the HTTP server's own errors (a port in use at start-up)
  // and graphql-ws would print them as its own.
  const wss = new WebSocketServer({ noServer: true, maxPayload: limits.maxWsMessageBytes });
  deps.httpServer.on('upgrade', (req, socket, head) => {
    if (new URL(req.url ?? '/', 'http://upgrade').pathname !== yoga.graphqlEndpoint) {
      socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n');
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => wss.emit('connection', ws, req));
  });
  const registry = createConnectionRegistry({ maxPerToken: limits.maxConnectionsPerToken });
  const presence = createConnectionPresence({ fork: () => orm.em.fork(), events, log, processId: deps.processId });
  // The worker of each accepted worker connection.
  const workerOf = new WeakMap<object, number>();
  const states = new WeakMap<object, ConnectionState>();
  // Connections whose socket closed (onClose ran), which may still be in their init (onConnect).
  const closed = new WeakSet<object>();
  let stopping = false;

  // A revocation anywhere closes this process's sockets of those tokens at once.
  const revocations = events.subscribe('tokensRevoked')[Symbol.asyncIterator]();
  void (async () => {
    for (let r = await revocations.next(); !r.done; r = await revocations.next()) {
      const closed = registry.closeTokens(r.value.tokenIds, 'the bearer token was revoked');
      if (closed)
        log.info({ tokens: r.value.tokenIds, connections: closed }, 'closed the connections of revoked tokens');
    }
  })().catch((err: unknown) => log.error({ err }, 'revocation listener failed'));

  const authorizationOf = (params: Record<string, unknown> | undefined) => {
    const auth = params?.authorization ?? params?.Authorization;
    return typeof auth === 'string' ? auth : null;
  };

  /**
   * A connection's init: its client authenticated (refused with 4401 or 4429), counted against the
   * limits, and a worker recorded connected. False (the socket closed) when it is refused; an error
   * when the database did not answer.
   */
  const acceptConnection = async (ctx: WsContext<Record<string, unknown>, Extra>): Promise<boolean> => {
    const socket = ctx.extra.socket;
    const address = addressOf(socket, ctx.extra.request, limits.trustedProxies);
    let viewer: Viewer;
    let expiresAt: Date | null;
    try {
      ({ viewer, expiresAt } = await authenticateClient(orm.em.fork(), authorizationOf(ctx.connectionParams), address));
    } catch (err) {
      if (!(err instanceof ClientRefusal)) throw err;
      // 4401: the agent must not retry with the same token; 4429: it may, later.
      closeSocket(
        socket,
        err.status === 429 ? CLOSE_CODES.tooMany : CLOSE_CODES.unauthorized,
        `${err.status === 429 ? 'Too many requests' : 'Unauthorized'}: ${err.message}`,
      );
      return false;
    }
    // Closed while its token was looked up (onClose found nothing to undo): nothing is counted for it.
    if (closed.has(ctx)) return false;
    const tokenId = tokenIdOf(viewer);
    const handle: ConnectionHandle = {
      tokenId,
      stillValid: () => (tokenId === null ? Promise.resolve(true) : tokenGuard.isValid(tokenId)),
      refuse: (reason) => closeSocket(socket, CLOSE_CODES.unauthorized, `Unauthorized: ${reason}`),
    };
    if (viewer.kind === 'anonymous' && !deps.anonymous.openConnection(address)) {
      const limit = deps.anonymous.settings.connectionsPerAddress;
      log.info(
        { address, limit: 'TAGSCHED_ANONYMOUS_CONNECTIONS_PER_ADDRESS' },
        'connection refused: too many anonymous ones from its address',
      );
      closeSocket(
        socket,
        CLOSE_CODES.tooMany,
        `Too many requests: ${limit} connections without a token open from this address (TAGSCHED_ANONYMOUS_CONNECTIONS_PER_ADDRESS)`,
      );
      return false;
    }
    if (tokenId !== null && !registry.add(tokenId, socket, expiresAt)) {
      log.warn(
        { tokenId, address, limit: 'TAGSCHED_MAX_CONNECTIONS_PER_TOKEN' },
        'connection refused: too many for its token',
      );
      closeSocket(
        socket,
        CLOSE_CODES.tooMany,
        `Too many requests: this token has ${limits.maxConnectionsPerToken} open connections already (TAGSCHED_MAX_CONNECTIONS_PER_TOKEN)`,
      );
      return false;
    }
    states.set(ctx, { identity: identityOf(viewer), handle, address });
    deps.metrics?.connectionOpened(viewer.kind);
    if (viewer.kind === 'worker') {
      const id = viewer.worker.id;
      // A worker connecting while this process stops is turned away (it reconnects to another):
      // its "connected" would land after stop() recorded this process's workers disconnected.
      if (!(await presence.opened(id))) {
        closeSocket(socket, CLOSE_CODES.goingAway, 'Going away: this server is stopping');
        return false;
      }
      // Closed while it was being recorded (onClose ran): graphql-ws calls no onDisconnect for a
      // connection it had not acknowledged, so its end is recorded here.
      if (closed.has(ctx)) {
        presence.dropped(id);
        return false;
      }
      workerOf.set(ctx, id);
    }
    return true;
  };

  const server = useServer<Record<string, unknown>>(
    {
      execute: (args) => (args.rootValue as { execute: (a: unknown) => unknown }).execute(args) as never,
      subscribe: (args) => (args.rootValue as { subscribe: (a: unknown) => unknown }).subscribe(args) as never,
      onConnect: async (ctx) => {
        try {
          return await acceptConnection(ctx);
        } catch (err) {
          // The database failed a statement (an outage, a restart): the client is told to try again
          // later (1013, which graphql-ws clients retry), rather than graphql-ws's 4500 and its stack on
          // stderr. Anything else is a fault of the server's own, for graphql-ws to answer with 4500.
          if (!(err instanceof DriverException)) throw err;
          if (!stopping)
            log.warn(
              { err, address: addressOf(ctx.extra.socket, ctx.extra.request, limits.trustedProxies) },
              'could not accept a connection: its database failed',
            );
          closeSocket(
            ctx.extra.socket,
            CLOSE_CODES.tryAgainLater,
            'Try again later: the server could not reach its database',
          );
          return false;
        }
      },
      onClose: (ctx) => {
        closed.add(ctx);
        const state = states.get(ctx);
        if (state?.handle.tokenId != null) registry.remove(state.handle.tokenId, ctx.extra.socket);
        if (state?.identity.kind === 'anonymous') deps.anonymous.closeConnection(state.address);
        // Every close, acknowledged or not: only connections that were counted have a state.
        if (state) deps.metrics?.connectionClosed(state.identity.kind);
        states.delete(ctx);
      },
      onDisconnect: async (ctx) => {
        const id = workerOf.get(ctx);
        if (id !== undefined) await presence.closed(id);
      },
      onSubscribe: async (ctx, _id, params) => {
        if (Object.keys(ctx.subscriptions).length > limits.maxSubscriptionsPerConnection) {
          return [
            new GraphQLError(
              `this connection runs ${limits.maxSubscriptionsPerConnection} operations already (TAGSCHED_MAX_SUBSCRIPTIONS_PER_CONNECTION): complete one first`,
              {
                extensions: { code: 'LIMIT_EXCEEDED', limit: 'TAGSCHED_MAX_SUBSCRIPTIONS_PER_CONNECTION' },
              },
            ),
          ];
        }
        const { schema, execute, subscribe, parse, validate } = yoga.getEnveloped({
          ...ctx,
          req: ctx.extra.request,
          socket: ctx.extra.socket,
          params,
        });
        // The document limits throw (the token limit while parsing, the others from validation rules):
        // the client gets them as the operation's errors, as over HTTP.
        let document;
        let errors: readonly GraphQLError[];
        try {
          document = parse(params.query);
          errors = validate(schema, document);
        } catch (err) {
          if (err instanceof GraphQLError) return [err];
          throw err;
        }
        if (errors.length) return [...errors];
        const state = states.get(ctx);
        if (!state)
          return [new GraphQLError('the connection is not initialised', { extensions: { code: 'UNAUTHENTICATED' } })];
        if (state.identity.kind === 'anonymous') {
          const waitMs = await deps.anonymous.request(state.address);
          if (waitMs)
            return [
              new GraphQLError(anonymousRateMessage(waitMs), {
                extensions: { code: 'RATE_LIMITED', limit: 'TAGSCHED_ANONYMOUS_REQUESTS_PER_MINUTE' },
              }),
            ];
        }
        // A subscription lives as long as the connection: it uses the connection's viewer and opens a
        // database session only per event. A query or mutation looks the token up again, as over HTTP,
        // but for a worker's acknowledgements and reports (api/ws/connection-identity.ts).
        const isSubscription = getOperationAST(document, params.operationName)?.operation === 'subscription';
        let contextValue: Context;
        if (isSubscription) contextValue = contexts.forSubscription(state.identity, state.handle);
        else if (
          state.identity.kind === 'worker' &&
          state.handle.tokenId !== null &&
          runsOnConnectionIdentity(document, params.operationName)
        ) {
          // The agent's acknowledgement and report: the worker the connection authenticated as, its
          // token checked again (api/ws/connection-identity.ts).
          if (!(await tokenGuard.isValid(state.handle.tokenId))) {
            const reason =
              'the bearer token is no longer valid (revoked, disabled or expired, or its worker terminated)';
            log.info(
              { tokenId: state.handle.tokenId, workerId: state.identity.workerId },
              'a worker connection’s token is no longer valid: closed',
            );
            state.handle.refuse(reason);
            return [new GraphQLError(reason, { extensions: { code: 'UNAUTHENTICATED' } })];
          }
          const em = orm.em.fork();
          contextValue = contexts.forOperation(viewerIn(em, state.identity), em, state.handle);
        } else {
          const em = orm.em.fork();
          try {
            const { viewer } = await authenticateClient(em, authorizationOf(ctx.connectionParams), state.address);
            contextValue = contexts.forOperation(viewer, em, state.handle);
          } catch (err) {
            if (!(err instanceof ClientRefusal)) throw err;
            state.handle.refuse(err.message);
            return [new GraphQLError(err.message, { extensions: { code: 'UNAUTHENTICATED' } })];
          }
        }
        return {
          schema,
          operationName: params.operationName,
          document,
          variableValues: params.variables,
          contextValue,
          rootValue: { execute, subscribe },
        };
      },
    },
    wss,
  );

  return {
    /** Takes back the workers this process still holds connections of that a take-over marked disconnected (ConnectionPresence.reclaim). */
    reclaimConnections: (): Promise<number> => presence.reclaim(),
    /** Closes every connection and marks this process's workers disconnected (one statement). */
    async stop(): Promise<void> {
      stopping = true;
      presence.beginStop();
      await revocations.return?.();
      await server.dispose();
      await presence.finishStop();
    },
  };
}
