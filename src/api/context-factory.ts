import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import { contextCacheSymbol } from '@pothos/core';
import type { Config } from '../core/config/config.js';
import type { ConnectionHandle, Context } from './context.js';
import type { Events } from '../storage/events.js';
import { createLoaders, type Loaders } from './loaders.js';
import type { Logger } from '../core/log.js';
import type { LifecycleRecorder } from '../services/metrics-recorder.js';
import type { Scheduler } from '../scheduler/scheduler.js';
import { viewerIn, type Viewer, type ViewerIdentity } from '../services/identity/auth.js';
import type { SecretBox } from '../services/identity/secrets.js';
import { firstEstimateKeeper, type FirstEstimateKeeper } from '../services/work/start-estimate.js';

/** A database session and the loaders on it: one per HTTP operation, and one per subscription event in a process. */
interface Session {
  readonly em: EntityManager;
  readonly loaders: Loaders;
  /** The first start estimates its operation keeps, in one statement. */
  readonly keepFirstEstimate: FirstEstimateKeeper;
  /** Values computed once per session (an event's object, loaded once for all its subscribers). */
  readonly memo: Map<string, Promise<unknown>>;
  /** Pothos's loader caches, per viewer: loadable fields may depend on who asks (a role, the members). */
  readonly pothosCaches: Map<string, object>;
}

const identityKey = (viewer: Viewer | ViewerIdentity): string =>
  viewer.kind === 'anonymous'
    ? 'anonymous'
    : viewer.kind === 'user'
      ? `user:${'userId' in viewer ? viewer.userId : viewer.user.id}:${viewer.isAdmin}`
      : `${viewer.kind}:${viewer.tokenId}`;

/**
 * Makes the context of every operation (context.ts). An HTTP operation gets its own session. A
 * subscription keeps only its viewer's ids; each event it sends is read in the event's session,
 * which the first subscriber of this process to handle that event opens and the others share (the
 * event's payload object, the same for every listener of the process, is the key), so that 2,000
 * subscribers of one change read it once, not 2,000 times. Each subscriber's own viewer decides what
 * it is sent. Between events a subscription holds no session.
 */
export function createContextFactory(deps: {
  orm: MikroORM;
  config: Config;
  secrets: SecretBox;
  events: Events;
  log: Logger;
  scheduler: Scheduler;
  metrics: LifecycleRecorder;
  /** Whether the process is stopping (Context.serverStopping); never, when absent. */
  stopping?: () => boolean;
}) {
  const { orm, config, scheduler } = deps;
  const eventSessions = new WeakMap<object, Session>();
  const open = (em: EntityManager = orm.em.fork()): Session => ({
    em,
    loaders: createLoaders(em, config, scheduler.workers, scheduler),
    keepFirstEstimate: firstEstimateKeeper(em),
    memo: new Map(),
    pothosCaches: new Map(),
  });

  function build(
    who: Viewer | { identity: ViewerIdentity },
    session: () => Session,
    drop: () => void,
    enter: (event: object) => void,
    connection: ConnectionHandle | null,
  ): Context {
    const viewers = new WeakMap<Session, Viewer>();
    const viewerOf = (s: Session): Viewer => {
      if (!('identity' in who)) return who;
      let v = viewers.get(s);
      if (!v) viewers.set(s, (v = viewerIn(s.em, who.identity)));
      return v;
    };
    const key = identityKey('identity' in who ? who.identity : who);
    const context: Context = {
      get viewer() {
        return viewerOf(session());
      },
      config,
      secrets: deps.secrets,
      events: deps.events,
      log: deps.log,
      scheduler,
      metrics: deps.metrics,
      connection,
      serverStopping: deps.stopping ?? (() => false),
      get em() {
        return session().em;
      },
      get loaders() {
        return session().loaders;
      },
      get keepFirstEstimate() {
        return session().keepFirstEstimate;
      },
      renew: drop,
      enterEvent: enter,
      shared<T>(name: string, compute: () => Promise<T>): Promise<T> {
        const { memo } = session();
        let value = memo.get(name) as Promise<T> | undefined;
        if (!value) memo.set(name, (value = compute()));
        return value;
      },
    };
    // Pothos keys its loaders by this object when present: per session and viewer, not per context
    // (a long-lived subscription would otherwise keep one cache, stale and growing, for its whole life).
    Object.defineProperty(context, contextCacheSymbol, {
      get() {
        const s = session();
        let cache = s.pothosCaches.get(key);
        if (!cache) s.pothosCaches.set(key, (cache = {}));
        return cache;
      },
    });
    return context;
  }

  return {
    /** The context of one HTTP (or WebSocket query/mutation) operation; `em` is the fork the viewer was read with. */
    forOperation(viewer: Viewer, em: EntityManager, connection: ConnectionHandle | null = null): Context {
      let current: Session | null = open(em);
      return build(
        viewer,
        () => (current ??= open()),
        () => (current = null),
        () => undefined,
        connection,
      );
    },
    /** The context of a subscription: its viewer as ids, a session only while it handles something. */
    forSubscription(identity: ViewerIdentity, connection: ConnectionHandle | null): Context {
      let current: Session | null = null;
      return build(
        { identity },
        () => (current ??= open()),
        () => (current = null),
        (event) => {
          let shared = eventSessions.get(event);
          if (!shared) eventSessions.set(event, (shared = open()));
          current = shared;
        },
        connection,
      );
    },
  };
}
export type ContextFactory = ReturnType<typeof createContextFactory>;
