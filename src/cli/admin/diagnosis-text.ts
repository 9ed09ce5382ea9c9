/**
 * A work request's diagnosis in words, for `tagsched-admin work why`: one summary line saying where
 * it stands and why, then detail lines (each group of workers or pool that cannot run it and what
 * is missing on which side, the unavailable workers by reason). Pure: tested table-driven.
 */

/** The diagnosis as the API answers it. */
export interface DiagnosisData {
  state: string;
  matchingWorkers: number;
  availableWorkers: number;
  busyWorkers: number;
  unavailableWorkers: { reason: string; count: number }[];
  matchingPools: string[];
  /** The matching pools' room to launch and launching instances (absent from older answers: then only `matchingPools` is used). */
  pools?: {
    pool: string;
    instances: number;
    maxActiveInstances: number;
    atLimit: string[];
    launching: { name: string; since: string }[];
  }[];
  /** When it is expected to start (absent from older answers; null unless it is PENDING). */
  startEstimate?: StartEstimateData | null;
  /** The tag lists are null for workers whose tags the caller may not see; the counts are always there. */
  mismatches: {
    pool: string | null;
    workerCount: number;
    workerNames: string[];
    missingOnWorker: string[] | null;
    missingOnTask: string[] | null;
    missingOnWorkerCount: number;
    missingOnTaskCount: number;
  }[];
}

/** A pending request's start estimate as the API answers it. */
export interface StartEstimateData {
  at: string | null;
  waitSeconds: number | null;
  basis: string;
  medianAbsoluteErrorSeconds: number | null;
  samples: number;
}

/** The fields of a work request `why` reads. */
export interface WhyData {
  id: string;
  status: string;
  result: string | null;
  statusReason: string | null;
  dependsOn: string[];
  hiddenDependencyCount: number;
  worker: { name: string } | null;
  /** Its required tags with their sources (absent from older selections): the learned minimums are named. */
  requiredTags?: { tag: string; source: string }[];
  diagnosis: DiagnosisData;
}

/** The selection of WhyData. */
export const WHY_FIELDS = `id status result statusReason dependsOn hiddenDependencyCount worker { name } requiredTags { tag source }
  diagnosis { state matchingWorkers availableWorkers busyWorkers unavailableWorkers { reason count } matchingPools
    pools { pool instances maxActiveInstances atLimit launching { name since } }
    startEstimate { at waitSeconds basis medianAbsoluteErrorSeconds samples }
    mismatches { pool workerCount workerNames missingOnWorker missingOnTask missingOnWorkerCount missingOnTaskCount } }`;

const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;
const names = (list: readonly string[], max = 3) =>
  list.length > max ? `${list.slice(0, max).join(', ')}, …` : list.join(', ');

/** Seconds as "45s", "4m 20s", "2h 5m". */
function span(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${s % 60 ? ` ${s % 60}s` : ''}`;
  return `${Math.floor(s / 3600)}h${Math.floor((s % 3600) / 60) ? ` ${Math.floor((s % 3600) / 60)}m` : ''}`;
}

/**
 * The start estimate in words: when, how it was computed, and how far off the estimates of its class
 * were (so that an operator knows how much to trust it); or why there is none.
 */
export function startEstimateText(e: StartEstimateData): string[] {
  if (e.at === null || e.waitSeconds === null) return [`no start estimate: ${e.basis}`];
  const trust =
    e.samples > 0 && e.medianAbsoluteErrorSeconds !== null
      ? `estimates of its class were off by ${span(e.medianAbsoluteErrorSeconds)} (median of the last ${e.samples})`
      : 'no estimate of its class has been checked yet';
  return [
    `expected to start ${e.waitSeconds < 1 ? 'now' : `in ${span(e.waitSeconds)}`} (${e.at}); ${trust}`,
    `estimated from: ${e.basis}`,
  ];
}

/** "worker build-1", "workers build-1, build-2 (5 in all)", "pool cloud". */
function who(m: DiagnosisData['mismatches'][number]): string {
  if (m.pool) return `pool ${m.pool}`;
  const shown = names(m.workerNames);
  const more = m.workerCount > m.workerNames.length || m.workerNames.length > 3 ? ` (${m.workerCount} in all)` : '';
  return `${m.workerCount === 1 ? 'worker' : 'workers'} ${shown}${more}`;
}

/** What one group or pool lacks, in words. */
function lacks(m: DiagnosisData['mismatches'][number]): string {
  const parts: string[] = [];
  const tags = (list: string[] | null, count: number) => list?.join(', ') ?? `${plural(count, 'tag')} you may not see`;
  if (m.missingOnWorkerCount)
    parts.push(
      `${m.pool || m.workerCount !== 1 ? 'lack' : 'lacks'} ${tags(m.missingOnWorker, m.missingOnWorkerCount)}`,
    );
  if (m.missingOnTaskCount)
    parts.push(
      `${m.pool || m.workerCount !== 1 ? 'require' : 'requires'} ${tags(m.missingOnTask, m.missingOnTaskCount)}, which the request does not provide`,
    );
  return parts.join('; ');
}

/** The unavailable workers by reason: "2 disconnected, 1 draining". */
function unavailableText(d: DiagnosisData): string {
  return d.unavailableWorkers.map((u) => `${u.count} ${u.reason.toLowerCase().replace(/_/g, ' ')}`).join(', ');
}

/** Tags every worker group and pool lacks: then "no worker provides X" is true. */
function missingEverywhere(d: DiagnosisData): string[] {
  if (d.mismatches.length === 0) return [];
  return d.mismatches
    .map((m) => m.missingOnWorker ?? [])
    .reduce((common, tags) => common.filter((t) => tags.includes(t)));
}

/** How long ago, in whole seconds (minutes past two), for "launching for 12 s". */
function age(since: string, now: Date): string {
  const seconds = Math.max(0, Math.round((now.getTime() - Date.parse(since)) / 1000));
  return seconds < 120 ? `${seconds} s` : `${Math.floor(seconds / 60)} min`;
}

/** One matching pool's outlook in words: launching, held by a limit, or able to start one. */
function poolOutlook(p: NonNullable<DiagnosisData['pools']>[number], now: Date): string {
  const launching = p.launching.length
    ? `launching ${p.launching
        .slice(0, 3)
        .map((i) => `${i.name} (${age(i.since, now)})`)
        .join(', ')}${p.launching.length > 3 ? ', …' : ''}`
    : '';
  const limits = p.atLimit.map((l) =>
    l === 'MAX_ACTIVE_INSTANCES'
      ? `at its limit of ${plural(p.maxActiveInstances, 'instance')}`
      : l === 'MONTHLY_BUDGET'
        ? 'out of its monthly runtime budget'
        : l === 'COST_BUDGET'
          ? 'out of its monthly cost budget'
          : l === 'BACKOFF'
            ? 'waiting after failed launches'
            : l === 'RATE_LIMIT'
              ? 'at its launch rate limit for this minute'
              : l.toLowerCase().replace(/_/g, ' '),
  );
  const parts = [launching, ...limits].filter(Boolean);
  return `pool ${p.pool} ${parts.length ? `is ${parts.join(' and ')}` : 'could start one'}`;
}

/** The matching pools in words: each pool's outlook when the answer has it, else "pools a, b could start one". */
function poolsText(d: DiagnosisData, now: Date): string {
  if (d.pools?.length) return d.pools.map((p) => poolOutlook(p, now)).join('; ');
  return d.matchingPools.length
    ? `${d.matchingPools.length === 1 ? 'pool' : 'pools'} ${d.matchingPools.join(', ')} could start one`
    : '';
}

/** Why the request is not waiting, for a request that is not PENDING. */
function notPending(w: WhyData): string {
  switch (w.status) {
    case 'BLOCKED': {
      const hidden = w.hiddenDependencyCount
        ? `${w.dependsOn.length ? ' and ' : ''}${plural(w.hiddenDependencyCount, 'request')} you may not see`
        : '';
      return `blocked: waiting for its dependencies to complete (${names(w.dependsOn, 10)}${hidden})`;
    }
    case 'ASSIGNED':
      return w.worker ? `assigned to worker ${w.worker.name}, which has not started it yet` : 'assigned';
    case 'RUNNING':
      return w.worker ? `running on worker ${w.worker.name}` : 'running';
    case 'COMPLETED':
      return `completed: ${w.result ?? 'no result'}${w.statusReason ? ` (${w.statusReason})` : ''}`;
    case 'ABORTED':
      return `aborted${w.statusReason ? `: ${w.statusReason}` : ''}`;
    default:
      return `not pending: ${w.status}`;
  }
}

/** The summary line and the detail lines of a diagnosis. */
export function explain(w: WhyData, now = new Date()): { summary: string; details: string[] } {
  const d = w.diagnosis;
  const details: string[] = [];
  const pools = poolsText(d, now);
  let summary: string;
  switch (d.state) {
    case 'NOT_PENDING':
      summary = notPending(w);
      break;
    case 'ORCHESTRATED':
      summary = `orchestrated by the server, never by a worker (a workflow runs through its children, a synchronization point completes when its dependencies have): ${w.status === 'PENDING' ? 'pending' : notPending(w)}`;
      break;
    case 'READY':
      summary = `ready: ${plural(d.availableWorkers, 'matching worker has', 'matching workers have')} a free slot; the next scheduling pass assigns it`;
      break;
    case 'WAITING_FOR_CAPACITY':
      summary = `waiting for capacity: ${d.busyWorkers === 1 ? 'the one matching worker is busy' : `${d.busyWorkers} matching workers are all busy`}${pools ? `; ${pools}` : ''}`;
      break;
    case 'WAITING_FOR_WORKERS':
      summary = `waiting for workers: ${plural(d.matchingWorkers, 'worker matches', 'workers match')} but none is available (${unavailableText(d)})${pools ? `; ${pools}` : ''}`;
      break;
    case 'WAITING_FOR_PROVISIONING':
      summary = `waiting for provisioning: no worker matches; ${pools}`;
      break;
    case 'WAITING_FOR_POOL_LIMIT':
      summary = `held by pool limits: no worker matches and no matching pool may start one now; ${pools}`;
      break;
    case 'UNSCHEDULABLE': {
      const everywhere = missingEverywhere(d);
      const nearest = d.mismatches[0];
      if (!nearest) summary = 'unschedulable: there is no worker and no enabled pool';
      else if (everywhere.length)
        summary = `unschedulable: no worker or pool provides ${everywhere.join(', ')} (nearest: ${who(nearest)})`;
      else summary = `unschedulable: no worker or pool matches (nearest: ${who(nearest)}, which ${lacks(nearest)})`;
      break;
    }
    default:
      summary = d.state.toLowerCase().replace(/_/g, ' ');
  }
  if (d.state !== 'NOT_PENDING' && d.state !== 'ORCHESTRATED') {
    if (d.startEstimate) details.push(...startEstimateText(d.startEstimate));
    if (d.unavailableWorkers.length && d.state !== 'WAITING_FOR_WORKERS')
      details.push(`matching but unavailable: ${unavailableText(d)}`);
    const shown = d.mismatches.slice(0, 8);
    for (const m of shown) details.push(`${who(m)}: ${lacks(m)}`);
    if (d.mismatches.length > shown.length)
      details.push(
        `… and ${plural(d.mismatches.length - shown.length, 'more group')} of workers or pools that do not match`,
      );
    // Minimums learned from the history of its task, package and architecture (docs/reference/statistics.md).
    const learned = (w.requiredTags ?? []).filter((t) => t.source.startsWith('history:'));
    if (learned.length)
      details.push(`learned from its task's history: ${learned.map((t) => `${t.tag} (${t.source})`).join(', ')}`);
  }
  return { summary, details };
}
