import type { MikroORM } from '@mikro-orm/postgresql';
import type { Config } from '../core/config/config.js';
import type { Logger } from '../core/log.js';
import { pruneInstanceLogs } from '../providers/instance-logs.js';
import { pruneTaskStatistics } from '../scheduler/storage/task-statistics.js';
import { purgeIdempotencyKeys } from '../services/work/idempotency.js';

/** The periodic chores of a server process: started with the service, stopped with it. */
export interface Housekeeping {
  start(): void;
  stop(): void;
}

/**
 * Hourly, in every process: its host's instance logs not written to for TAGSCHED_INSTANCE_LOG_RETENTION_DAYS
 * (providers/instance-logs.ts). And in the process that does the chores: idempotency keys past their
 * lifetime are deleted (and a lookup never answers with one), and the task statistics' histogram rows
 * older than their window (scheduler/storage/task-statistics.ts).
 */
export function createHousekeeping(
  orm: MikroORM,
  config: Pick<Config, 'input' | 'providers'>,
  log: Logger,
  /** Whether this process does the chores now (the chores duty's leader: loops/leadership.ts); always when absent. */
  leadsChores: () => boolean = () => true,
): Housekeeping {
  let timer: NodeJS.Timeout | null = null;
  return {
    start() {
      timer ??= setInterval(
        () => {
          const pruned = pruneInstanceLogs(config.providers.instanceLogDir, config.providers.instanceLogRetentionMs);
          if (pruned) log.info({ pruned }, 'deleted instance logs past their retention');
          if (!leadsChores()) return;
          purgeIdempotencyKeys(orm.em.fork(), config.input.idempotencyKeyTtlMs).catch((err: unknown) =>
            log.warn({ err }, 'could not delete expired idempotency keys'),
          );
          pruneTaskStatistics(orm.em.fork()).catch((err: unknown) =>
            log.warn({ err }, 'could not delete old task statistics'),
          );
        },
        60 * 60 * 1000,
      ).unref();
    },
    stop() {
      clearInterval(timer ?? undefined);
    },
  };
}
