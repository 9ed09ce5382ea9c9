import type { MikroORM } from '@mikro-orm/postgresql';
import type { Config } from './config.js';
import type { Logger } from './log.js';
import { purgeIdempotencyKeys } from './services/work/idempotency.js';

/** The periodic chores of a server process: started with the service, stopped with it. */
export interface Housekeeping {
  start(): void;
  stop(): void;
}

/** Idempotency keys past their lifetime are deleted hourly (and a lookup never answers with one). */
export function createHousekeeping(orm: MikroORM, config: Config, log: Logger): Housekeeping {
  let timer: NodeJS.Timeout | null = null;
  return {
    start() {
      timer ??= setInterval(
        () => {
          purgeIdempotencyKeys(orm.em.fork(), config.idempotencyKeyTtlMs).catch((err: unknown) => log.warn({ err }, 'could not delete expired idempotency keys'));
        },
        60 * 60 * 1000,
      ).unref();
    },
    stop() {
      clearInterval(timer ?? undefined);
    },
  };
}
