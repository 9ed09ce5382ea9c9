import type { MikroORM } from '@mikro-orm/postgresql';
import type { Config } from '../core/config/config.js';
import type { Logger } from '../core/log.js';
import { takeOverDeadProcesses } from '../services/processes/registry.js';
import type { Events } from '../storage/events.js';

/** The take-over of dead processes' workers and work, run by the chores' leader; see {@link createProcessTakeover}. */
export interface ProcessTakeover {
  start(): void;
  /** Runs one take-over now (also when this process does not lead the chores: tests and the cluster suite). */
  runOnce(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * Every TAGSCHED_PROCESS_HEARTBEAT_SECONDS, in the process that does the chores (loops/leadership.ts): the
 * workers and server workers of processes whose heartbeat is older than TAGSCHED_PROCESS_TIMEOUT_SECONDS
 * are marked disconnected and their unacknowledged work re-queued (services/processes/registry.ts). A
 * take-over still running when the next is due is not doubled.
 */
export function createProcessTakeover(deps: {
  orm: MikroORM;
  events: Events;
  config: Pick<Config, 'server' | 'leases' | 'tags' | 'statistics'>;
  log: Logger;
  leadsChores: () => boolean;
}): ProcessTakeover {
  const { orm, events, config, leadsChores } = deps;
  const log = deps.log.child({ module: 'process-takeover' });
  let timer: NodeJS.Timeout | null = null;
  let running: Promise<void> | null = null;

  const once = async (): Promise<void> => {
    const done = await takeOverDeadProcesses(orm.em.fork(), events, config, new Date());
    if (done.processes || done.deleted)
      log.info({ ...done }, 'took over the workers of processes that stopped heartbeating');
  };
  const runOnce = (): Promise<void> => {
    running ??= once()
      .catch((err: unknown) => log.warn({ err }, 'the take-over of dead processes failed'))
      .finally(() => (running = null));
    return running;
  };

  return {
    start() {
      timer ??= setInterval(() => {
        if (leadsChores()) void runOnce();
      }, config.server.processHeartbeatMs);
      timer.unref();
    },
    runOnce,
    async stop() {
      if (timer) clearInterval(timer);
      timer = null;
      await running;
    },
  };
}
