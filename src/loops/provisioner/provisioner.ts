/**
 * The provisioner of one server process (docs/design.md: pools and instances): it runs a cycle (cycle.ts) when the demand may
 * have changed (the events the scheduler hears, debounced) and every TAGSCHED_PROVISIONER_INTERVAL_SECONDS
 * (those cycles also reconcile with every provider's list). With TAGSCHED_PROVISIONER=off it runs on
 * the same schedule, and a cycle is only the retirements (no provider is called). Across server processes one cycle runs at
 * a time: a cycle holds a transaction-scoped advisory lock, and a process that cannot take it skips
 * its turn (the one holding it is doing the work). The embedded database serves one process: no lock.
 */
import type { MikroORM } from '@mikro-orm/postgresql';
import type { Config } from '../../core/config/config.js';
import { tryLockForTransaction } from '../../storage/db/advisory-locks.js';
import type { Events } from '../../storage/events.js';
import type { Logger } from '../../core/log.js';
import type { Scheduler } from '../../scheduler/scheduler.js';
import type { SecretBox } from '../../services/identity/secrets.js';
import type { CycleConfig, CycleContext } from './context.js';
import { decide, runCycleBody, type CycleReport } from './cycle.js';
import type { Provider } from '../../providers/provider.js';
import { NO_PROVISIONER_METRICS, type ProvisionerMetrics } from './provisioner-metrics.js';
import { providerFactory } from '../../providers/registry.js';

/** The provisioner module of a server process. */
export interface Provisioner {
  /** Runs one cycle now (after any running one; with the provisioner off, its retirements); null when another process held the lock. */
  runCycle(options?: { reconcile?: boolean }): Promise<CycleReport | null>;
  /** The decisions a cycle would take now, no provider called (the bench). */
  decide(): ReturnType<typeof decide>;
  /** Asks for a cycle soon; calls close together share one. */
  trigger(): void;
  /** Starts the periodic and event-driven cycles (with the provisioner off: of retirements only); `listeningUrl` is the server's own GraphQL URL. */
  start(listeningUrl: string): void;
  stop(): Promise<void>;
  /** The provider of a type, made once per process; null when this server has none of that type. */
  provider(type: string): Provider | null;
}

export interface ProvisionerDeps {
  readonly orm: MikroORM;
  /** The sections of a cycle, and the server's (its port and database; the local and qemu providers read its address too). */
  readonly config: CycleConfig & Pick<Config, 'server'>;
  readonly log: Logger;
  readonly events: Events;
  readonly secrets: SecretBox;
  readonly scheduler: Pick<Scheduler, 'classes' | 'workers'>;
  /** Launches, failures and ends, for /metrics; none recorded when absent. */
  readonly metrics?: ProvisionerMetrics;
}

/** Creates the provisioner of one server process (it does nothing until start() or runCycle()). */
export function createProvisioner(deps: ProvisionerDeps): Provisioner {
  const { orm, config, events } = deps;
  const log = deps.log.child({ module: 'provisioner' });
  const providers = new Map<string, Provider>();
  const stopping = new AbortController();
  let agentServerUrl = config.provisioner.agentServerUrl;
  let timer: NodeJS.Timeout | null = null;
  let debounce: NodeJS.Timeout | null = null;
  let chain: Promise<unknown> = Promise.resolve();
  let queued: { reconcile: boolean } | null = null;
  let stopped = false;
  const streams: AsyncIterator<unknown>[] = [];

  function provider(type: string): Provider | null {
    let p = providers.get(type);
    if (!p) {
      const factory = providerFactory(type);
      if (!factory) return null;
      providers.set(
        type,
        (p = factory({ config, log: log.child({ provider: type }), instanceEnded: () => soon(true) })),
      );
    }
    return p;
  }

  const context = (): CycleContext => ({
    orm,
    config,
    log: log,
    events,
    secrets: deps.secrets,
    classes: deps.scheduler.classes,
    workers: deps.scheduler.workers,
    stopping: stopping.signal,
    // Set by start(); runCycle() before it (tests) falls back to the configured port on this machine.
    agentServerUrl: agentServerUrl ?? `http://127.0.0.1:${config.server.port}/graphql`,
    provider,
    metrics: deps.metrics ?? NO_PROVISIONER_METRICS,
  });

  /** One cycle under the lock (none in embedded mode). */
  async function locked(options: { reconcile: boolean }): Promise<CycleReport | null> {
    if (!config.server.databaseUrl) return runCycleBody(context(), options);
    // The lock's transaction sits idle while the cycle works on other connections, and ends with it.
    return orm.em.fork().transactional(async (tx) => {
      return (await tryLockForTransaction(tx, 'PROVISIONER')) ? runCycleBody(context(), options) : null;
    });
  }

  function runCycle(options: { reconcile?: boolean } = {}): Promise<CycleReport | null> {
    const run = chain.then(() => locked({ reconcile: options.reconcile ?? false }));
    chain = run.catch(() => undefined);
    return run.then((report) => {
      if (
        report &&
        (report.launched ||
          report.launchFailures ||
          report.stopped ||
          report.lost ||
          report.adopted ||
          report.strays ||
          report.failed)
      ) {
        log.info({ ...report }, 'provisioner cycle');
      }
      return report;
    });
  }

  /** Queues a cycle; a reconciling one covers a plain one. */
  function soon(reconcile: boolean): void {
    if (stopped) return;
    if (queued) {
      queued.reconcile ||= reconcile;
      return;
    }
    queued = { reconcile };
    void chain.then(() => {
      const next = queued!;
      queued = null;
      if (stopped) return;
      return runCycle(next).catch((err: unknown) => log.error({ err }, 'provisioner cycle failed'));
    });
  }

  return {
    runCycle,
    decide: () => decide(context(), new Date()),
    provider,
    trigger() {
      if (debounce || stopped) return;
      debounce = setTimeout(() => {
        debounce = null;
        soon(false);
      }, config.provisioner.cycleDebounceMs);
    },
    start(listeningUrl) {
      agentServerUrl = config.provisioner.agentServerUrl ?? listeningUrl;
      // What changes the demand: new or finished work, workers coming, going or changing, pools created or
      // changed (here or in another process).
      const workers = events.subscribe('workerChanged')[Symbol.asyncIterator]();
      const requests = events.subscribe('workRequestChanged')[Symbol.asyncIterator]();
      const pools = events.subscribe('poolChanged')[Symbol.asyncIterator]();
      streams.push(workers, requests, pools);
      for (const stream of [workers, requests, pools]) {
        void (async () => {
          while (!stopped && !(await stream.next()).done) this.trigger();
        })();
      }
      timer = setInterval(() => soon(true), config.provisioner.cycleIntervalMs);
      timer.unref();
      soon(true); // at start: reconcile what a previous process left
      if (config.provisioner.enabled)
        log.info({ agentServerUrl, intervalMs: config.provisioner.cycleIntervalMs }, 'provisioner started');
      else
        log.info(
          { intervalMs: config.provisioner.cycleIntervalMs },
          'provisioner off: only retirements (a site’s own script launches and stops instances)',
        );
    },
    async stop() {
      stopped = true;
      if (timer) clearInterval(timer);
      if (debounce) clearTimeout(debounce);
      await Promise.all(streams.map((it) => it.return?.()));
      stopping.abort();
      await chain;
      await Promise.all(
        [...providers.values()].map((p) =>
          p.close?.().catch((err: unknown) => log.warn({ err }, 'a provider did not close cleanly')),
        ),
      );
    },
  };
}
