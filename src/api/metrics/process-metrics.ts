/**
 * This process's own metrics: counters and histograms of what happens here (assignments, passes,
 * completions, GraphQL operations), its open WebSockets and Node's process metrics. Each server
 * process serves its own; Prometheus sums them across processes. Every label is bounded: assignment
 * paths, pass reasons, results and viewer kinds are fixed lists, task names come from the task
 * registry, and operation names are capped (operationLabel).
 */
import { getOperationAST, type DocumentNode } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { AssignmentVia } from '../../scheduler/scheduler-metrics.js';
import type { LifecycleRecorder, ProvisionerRecorder, SchedulerRecorder } from '../../services/metrics-recorder.js';

/** Distinct operation names this process labels by name; later new ones are counted as OTHER_OPERATION. */
export const MAX_OPERATION_NAMES = 100;
/** Longer operation names are counted as OTHER_OPERATION. */
export const MAX_OPERATION_NAME_LENGTH = 64;
/** The label value of unnamed operations. */
export const ANONYMOUS_OPERATION = '(anonymous)';
/** The label value of operation names past the cap, too long, or sent by anonymous callers and not seen before. */
export const OTHER_OPERATION = '(other)';

/** Seconds from PENDING to ASSIGNED: from a few milliseconds (a free worker) to hours (a backlog). */
const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 14400];
/** Seconds a run takes: from a noop to a day-long build. */
const RUN_BUCKETS = [1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400, 28800, 86400];
/** Peak memory and disk of a run, in bytes: 16 MiB to 256 GiB by fours. */
const BYTES_BUCKETS = [2 ** 24, 2 ** 26, 2 ** 28, 2 ** 30, 2 ** 32, 2 ** 34, 2 ** 36, 2 ** 38];
const GRAPHQL_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** Who holds a WebSocket: a viewer kind. */
export type ConnectionKind = 'anonymous' | 'user' | 'worker' | 'activation';

/** The metrics of one server process, and the hooks that feed them. */
export interface ProcessMetrics extends SchedulerRecorder, LifecycleRecorder, ProvisionerRecorder {
  readonly registry: Registry;
  /** A yoga plugin timing every query and mutation (over HTTP and WebSocket). */
  graphqlPlugin(): Plugin;
  connectionOpened(kind: ConnectionKind): void;
  connectionClosed(kind: ConnectionKind): void;
  /** Reads, at each scrape, which duties this process follows and whether it leads each (loops/leadership.ts). */
  trackLeadership(read: () => readonly { duty: string; leads: boolean }[]): void;
}

const seconds = (from: Date | null | undefined, to: Date): number | null =>
  from ? Math.max(0, (to.getTime() - from.getTime()) / 1000) : null;

/** Creates the registry of this process (and starts Node's default metrics on it). */
export function createProcessMetrics(): ProcessMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const assignments = new Counter({
    name: 'tagsched_assignments_total',
    help: 'Work requests assigned by this process, by how: a worker pull, the placement of a new request, or a pass',
    labelNames: ['via'] as const,
    registers: [registry],
  });
  const passes = new Counter({
    name: 'tagsched_scheduler_passes_total',
    help: 'Full scheduling passes this process ran (there was pending work), by what triggered them',
    labelNames: ['reason'] as const,
    registers: [registry],
  });
  const latency = new Histogram({
    name: 'tagsched_assignment_latency_seconds',
    help: 'Time from a work request becoming PENDING (again, after a re-queue) to its assignment, for assignments made by this process',
    labelNames: ['via'] as const,
    buckets: LATENCY_BUCKETS,
    registers: [registry],
  });
  const runTime = new Histogram({
    name: 'tagsched_work_request_run_seconds',
    help: 'Time from start to completion of the work requests completed through this process, by task and result',
    labelNames: ['task', 'result'] as const,
    buckets: RUN_BUCKETS,
    registers: [registry],
  });
  // What the runs used, as their agents reported it (WorkRequest.statistics), labelled by task only.
  const phaseTime = new Histogram({
    name: 'tagsched_run_phase_seconds',
    help: 'Wall time of each phase of the runs completed through this process (setup, run, teardown), as their agents measured it, by task',
    labelNames: ['task', 'phase'] as const,
    buckets: RUN_BUCKETS,
    registers: [registry],
  });
  const cpuTime = new Histogram({
    name: 'tagsched_run_cpu_seconds',
    help: 'CPU time (user and system) of the runs completed through this process, as their agents measured it, by task',
    labelNames: ['task'] as const,
    buckets: RUN_BUCKETS,
    registers: [registry],
  });
  const peakMemory = new Histogram({
    name: 'tagsched_run_peak_memory_bytes',
    help: 'Peak memory of the handlers of the runs completed through this process, as their agents measured it, by task',
    labelNames: ['task'] as const,
    buckets: BYTES_BUCKETS,
    registers: [registry],
  });
  const peakDisk = new Histogram({
    name: 'tagsched_run_peak_disk_bytes',
    help: "Peak disk used in the run's directory of the runs completed through this process, as their agents measured it, by task",
    labelNames: ['task'] as const,
    buckets: BYTES_BUCKETS,
    registers: [registry],
  });
  const graphql = new Histogram({
    name: 'tagsched_graphql_request_duration_seconds',
    help: 'Execution time of GraphQL queries and mutations in this process, by operation name and type',
    labelNames: ['operation', 'type'] as const,
    buckets: GRAPHQL_BUCKETS,
    registers: [registry],
  });
  let leadership: () => readonly { duty: string; leads: boolean }[] = () => [];
  new Gauge({
    name: 'tagsched_leader',
    help: 'Whether this process leads a duty (1) or follows it (0): over the processes of one database, each duty sums to 1',
    labelNames: ['duty'] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const { duty, leads } of leadership()) this.set({ duty }, leads ? 1 : 0);
    },
  });
  const connections = new Gauge({
    name: 'tagsched_websocket_connections',
    help: 'Open GraphQL WebSocket connections of this process, by who holds them',
    labelNames: ['viewer'] as const,
    registers: [registry],
  });
  for (const kind of ['anonymous', 'user', 'worker', 'activation'] as const) connections.set({ viewer: kind }, 0);
  const launches = new Counter({
    name: 'tagsched_instance_launches_total',
    help: 'Instances whose launch a provider accepted, by pool (launched by this process)',
    labelNames: ['pool'] as const,
    registers: [registry],
  });
  const launchFailures = new Counter({
    name: 'tagsched_instance_launch_failures_total',
    help: "Launches that failed, by pool and the provider error's kind (quota, capacity, auth, timeout, invalid, unavailable)",
    labelNames: ['pool', 'reason'] as const,
    registers: [registry],
  });
  const ends = new Counter({
    name: 'tagsched_instance_ends_total',
    help: 'Instances stopped or found ended by this process, by pool and reason (idle, stopped, ended, lost, boot_timeout, interrupted_launch)',
    labelNames: ['pool', 'reason'] as const,
    registers: [registry],
  });

  const names = new Set<string>();
  /** The label of an operation name: bounded, and never grown by an anonymous caller. */
  const operationLabel = (name: string | undefined, anonymous: boolean): string => {
    if (!name) return ANONYMOUS_OPERATION;
    if (names.has(name)) return name;
    if (anonymous || name.length > MAX_OPERATION_NAME_LENGTH || names.size >= MAX_OPERATION_NAMES)
      return OTHER_OPERATION;
    names.add(name);
    return name;
  };

  return {
    registry,
    assigned(list: readonly { readonly pendingAt?: Date | null }[], via: AssignmentVia) {
      assignments.inc({ via }, list.length);
      const now = new Date();
      for (const a of list) {
        const s = seconds(a.pendingAt, now);
        if (s !== null) latency.observe({ via }, s);
      }
    },
    passRan(reason) {
      passes.inc({ reason });
    },
    completed(wr, statistics) {
      const s = seconds(wr.startedAt, wr.completedAt ?? new Date());
      if (s !== null) runTime.observe({ task: wr.taskName, result: wr.result ?? 'NONE' }, s);
      if (!statistics) return;
      const task = wr.taskName;
      phaseTime.observe({ task, phase: 'setup' }, statistics.setupSeconds);
      phaseTime.observe({ task, phase: 'run' }, statistics.runSeconds);
      phaseTime.observe({ task, phase: 'teardown' }, statistics.teardownSeconds);
      if (statistics.cpuSeconds !== null) cpuTime.observe({ task }, statistics.cpuSeconds);
      if (statistics.peakMemoryBytes !== null) peakMemory.observe({ task }, statistics.peakMemoryBytes);
      if (statistics.peakDiskBytes !== null) peakDisk.observe({ task }, statistics.peakDiskBytes);
    },
    graphqlPlugin(): Plugin {
      return {
        onExecute({ args }) {
          const operation = getOperationAST(args.document as DocumentNode, args.operationName);
          if (!operation || operation.operation === 'subscription') return;
          const viewer = (args.contextValue as { viewer?: { kind?: string } } | undefined)?.viewer;
          const labels = {
            operation: operationLabel(operation.name?.value, !viewer || viewer.kind === 'anonymous'),
            type: operation.operation,
          };
          const started = performance.now();
          return { onExecuteDone: () => graphql.observe(labels, (performance.now() - started) / 1000) };
        },
      };
    },
    launched(pool) {
      launches.inc({ pool });
    },
    launchFailed(pool, kind) {
      launchFailures.inc({ pool, reason: kind });
    },
    instanceEnded(pool, reason) {
      ends.inc({ pool, reason });
    },
    connectionOpened(kind) {
      connections.inc({ viewer: kind });
    },
    connectionClosed(kind) {
      connections.dec({ viewer: kind });
    },
    trackLeadership(read) {
      leadership = read;
    },
  };
}
