import type { EntityManager } from '@mikro-orm/postgresql';
import type { Config } from './config.js';
import type { Events } from './events.js';
import type { Loaders } from './loaders.js';
import type { Logger } from './log.js';
import type { Scheduler } from './scheduler/scheduler.js';
import type { Viewer } from './services/auth.js';
import type { SecretBox } from './services/secrets.js';

/** What every resolver gets: its own EntityManager fork, the viewer, and the process-wide services. */
export interface Context {
  readonly em: EntityManager;
  readonly viewer: Viewer;
  readonly config: Config;
  readonly secrets: SecretBox;
  readonly events: Events;
  readonly log: Logger;
  readonly loaders: Loaders;
  readonly scheduler: Scheduler;
}
