import type { EntityManager } from '@mikro-orm/postgresql';
import type { Config } from '../core/config/config.js';
import type { Events } from '../storage/events.js';
import type { Loaders } from './loaders.js';
import type { Logger } from '../core/log.js';
import type { LifecycleRecorder } from '../services/metrics-recorder.js';
import type { Scheduler } from '../scheduler/scheduler.js';
import type { Viewer } from '../services/identity/auth.js';
import type { SecretBox } from '../services/identity/secrets.js';
import type { FirstEstimateKeeper } from '../services/work/start-estimate.js';

/** The WebSocket an operation came over: its token is checked again before each event it is sent. */
export interface ConnectionHandle {
  /** The token the connection authenticated with (null: anonymous). */
  readonly tokenId: number | null;
  /** Whether that token may still be used (one statement per event for all the subscribers of the process). */
  stillValid(): Promise<boolean>;
  /** Closes the connection because its token was refused (4401). */
  refuse(reason: string): void;
}

/**
 * What every resolver gets: an EntityManager fork, the viewer, and the process-wide services.
 * The fork and the loaders are made on first use; renew() drops them. A subscription calls
 * enterEvent(payload) before it handles an event: it then reads in that event's session, shared by
 * every subscriber of the process (context-factory.ts), and renew() once the event is sent (an idle
 * subscription holds no database session state).
 */
export interface Context {
  readonly em: EntityManager;
  renew(): void;
  /** Takes the session of this event (its payload object), opened by the first subscriber that handles it. */
  enterEvent(event: object): void;
  /** `compute()` once per session: an event's object loaded once for all the subscribers that share it. */
  shared<T>(name: string, compute: () => Promise<T>): Promise<T>;
  readonly viewer: Viewer;
  readonly config: Config;
  readonly secrets: SecretBox;
  readonly events: Events;
  readonly log: Logger;
  readonly loaders: Loaders;
  /** Keeps the first start estimate of the pending requests the operation diagnoses (one statement for all: services/work/start-estimate.ts). */
  readonly keepFirstEstimate: FirstEstimateKeeper;
  readonly scheduler: Scheduler;
  /** The WebSocket of a subscription (null over HTTP). */
  readonly connection: ConnectionHandle | null;
  /** This process's metrics of the work lifecycle. */
  readonly metrics: LifecycleRecorder;
  /**
   * Whether this server process is stopping: a worker's calls then mark it seen but no longer
   * connected (stop() records this process's workers disconnected; a call answered meanwhile must not
   * undo that).
   */
  serverStopping(): boolean;
}
