import type { EntityManager } from '@mikro-orm/postgresql';
import type { Config } from './config.js';
import type { Events } from './events.js';
import type { Loaders } from './loaders.js';
import type { Logger } from './log.js';
import type { Scheduler } from './scheduler/scheduler.js';
import type { Viewer } from './services/auth.js';
import type { SecretBox } from './services/secrets.js';

/**
 * What every resolver gets: its own EntityManager fork, the viewer, and the process-wide services.
 * The fork and the loaders are made on first use; renew() drops them, so that the next use gets new
 * ones: a subscription renews before each event it sends (fresh data, no stale loader cache) and
 * after it (an idle subscription holds no database session state).
 */
export interface Context {
  readonly em: EntityManager;
  renew(): void;
  readonly viewer: Viewer;
  readonly config: Config;
  readonly secrets: SecretBox;
  readonly events: Events;
  readonly log: Logger;
  readonly loaders: Loaders;
  readonly scheduler: Scheduler;
}
