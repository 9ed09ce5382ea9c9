/**
 * The provisioner of one server process (docs/design.md: pools and instances): it runs a cycle (cycle.ts) when the demand may
 * have changed (the events the scheduler hears, debounced) and every TAGSCHED_PROVISIONER_INTERVAL_SECONDS
 * (those cycles also reconcile with every provider's list). With TAGSCHED_PROVISIONER=off it runs on
 * the same schedule, and a cycle is only the retirements (no provider is called). Across server processes,
 * a cycle runs only in the process that leads its duty (loops/leadership.ts): the cloud pools' duty, and
 * each host's duty for the host-bound pools of that host (scheduler/rules/pool-host.ts). A process that
 * does not lead a duty skips its turn; one that becomes its leader runs a reconciling cycle at once. The
 * cycle checks the lease before each provider call and fences the writes that come before one by its term.
 */
import type { MikroORM } from '@mikro-orm/postgresql';
import type { Config } from '../../core/config/config.js';
import { DUTIES, hostProvisionerDuty, type LeaseHold, type Leadership } from '../leadership.js';
import type { Events } from '../../storage/events.js';
import type { Logger } from '../../core/log.js';
import type { Scheduler } from '../../scheduler/scheduler.js';
import type { SecretBox } from '../../services/identity/secrets.js';
import type { CycleConfig, CycleContext } from './context.js';
import { decide, runCycleBody, type CycleReport } from './cycle.js';
import type { Provider } from '../../providers/provider.js';
import type { WorkerPool } from '../../storage/entities/worker-pool.js';
import { NO_PROVISIONER_METRICS, type ProvisionerMetrics } from './provisioner-metrics.js';
import { hostBound, providerFactory } from '../../providers/registry.js';

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
  /** The leases of its duties. */
  readonly leadership: Leadership;
}

/**
 * The duty a pool is provisioned under: a host-bound pool that names its host, that host's duty (which
 * only the processes of that host follow: scheduler/rules/pool-host.ts, poolRunsOn); any other pool, the
 * cloud pools' duty.
 */
export function provisionerDutyOf(pool: Pick<WorkerPool, 'providerType' | 'host'>): string {
  return hostBound(pool.providerType) && pool.host != null ? hostProvisionerDuty(pool.host) : DUTIES.PROVISIONER;
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

  const duties = [DUTIES.PROVISIONER, hostProvisionerDuty(config.server.hostName)];

  const context = (lease: LeaseHold): CycleContext => ({
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
    lease,
    runsHere: (pool) => provisionerDutyOf(pool) === lease.duty,
  });

  /** A cycle of each duty this process leads (its lease renewed, or taken if it is free, first); null when it leads none. */
  async function led(options: { reconcile: boolean }): Promise<CycleReport | null> {
    let total: CycleReport | null = null;
    for (const duty of duties) {
      const lease = await deps.leadership.claim(duty);
      if (!lease) continue;
      const report = await runCycleBody(context(lease), options);
      if (!total) total = report;
      else
        for (const [k, v] of Object.entries(report))
          if (typeof v === 'number') (total as unknown as Record<string, number>)[k] += v;
    }
    return total;
  }

  function runCycle(options: { reconcile?: boolean } = {}): Promise<CycleReport | null> {
    const run = chain.then(() => led({ reconcile: options.reconcile ?? false }));
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
    // The bench's decisions: no provider is called, so no lease is needed.
    decide: () =>
      decide(
        context({
          duty: DUTIES.PROVISIONER,
          holder: deps.leadership.holder,
          term: 0,
          since: new Date(),
          lost: new AbortController().signal,
          valid: () => false,
        }),
        new Date(),
      ),
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
      // A new term of a duty starts with a reconciling cycle: what the previous leader left is finished.
      for (const duty of duties) deps.leadership.follow(duty, () => soon(true));
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
