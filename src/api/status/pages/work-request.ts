/**
 * `/-/status/work-requests/{id}/`: a work request the viewer may see (any other is "not found", as in
 * the API), both tag sets with provenance, its diagnosis, candidate workers and its log so far
 * (services/work/job-output.ts). While it is assigned or running the page refreshes itself.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Config } from '../../../core/config/config.js';
import { WorkRequestSchema } from '../../../storage/entities/work-request.js';
import { isActive } from '../../../core/work-request-status.js';
import { createLoaders } from '../../loaders.js';
import type { Scheduler } from '../../../scheduler/scheduler.js';
import { diagnoseRequest } from '../../../services/work/diagnose-request.js';
import { logTotalBytes, readLog } from '../../../services/work/job-output.js';
import { firstEstimateKeeper } from '../../../services/work/start-estimate.js';
import { dependenciesOf } from '../../../services/work/work-request-reads.js';
import { runStatisticsOf } from '../../../services/work/run-statistics.js';
import { taskStatistics } from '../../../services/work/task-statistics.js';
import type { TaskStatisticsSummary } from '../../../scheduler/storage/task-statistics.js';
import { statisticsKeyOf } from '../../../core/tasks/statistics-key.js';
import { describeReservation } from '../../../scheduler/rules/resources.js';
import type { WorkRequestStatistics } from '../../../storage/entities/work-request-statistics.js';
import {
  canSeeTaskStatistics,
  canSeeWorkerGroupTags,
  principalOf,
  viewerSeesWorkRequest,
} from '../../../services/identity/visibility.js';
import { MEMORY_METHOD_LABELS, type MemoryMethod } from '../../../shared/run-statistics.js';
import { isOrchestrated } from '../../../core/tasks/types.js';
import { between, bytes, duration, when } from '../format.js';
import { consoleText, href, html, type Html } from '../html.js';
import type { StartEstimate } from '../../../scheduler/matching/start-estimate.js';
import { layout, type PageContext } from '../layout.js';
import { badge, diagnosisView, refusedTable, table, tagTable } from '../parts.js';
import { idSegment, StatusError, wholeNumber } from '../request.js';
import { workLink } from '../work-rows.js';
import { formatCost, workRequestCost } from '../../../scheduler/rules/pool-cost.js';

/** The most of the log one page shows, in bytes. */
export const LOG_PAGE_BYTES = 256 * 1024;
/** How often the page of an assigned or running request reloads itself, in seconds. */
export const REFRESH_SECONDS = 3;
const CANDIDATES_SHOWN = 50;

/** A pending request's start estimate in words, with how far off the estimates of its class were (so that it may be trusted, or not). */
function startEstimateText(e: StartEstimate, now: Date): Html {
  if (!e.at) return html`<span class="muted">none: ${e.basis}</span>`;
  const trust =
    e.samples && e.medianAbsoluteErrorSeconds !== null
      ? `estimates of its class were off by ${duration(e.medianAbsoluteErrorSeconds)} (median of the last ${e.samples})`
      : 'no estimate of its class has been checked yet';
  return html`${when(e.at, now)} <span class="muted">(in ${duration(Math.max(0, e.waitSeconds ?? 0))}; ${trust}; from ${e.basis})</span>`;
}

/** What the run used, as its agent reported it, in one line. */
function usedText(s: WorkRequestStatistics): string {
  const parts = [
    `run ${duration(Number(s.runSeconds))} (setup ${duration(Number(s.setupSeconds))}, teardown ${duration(Number(s.teardownSeconds))})`,
  ];
  if (s.cpuSeconds != null) parts.push(`CPU ${duration(Number(s.cpuSeconds))}`);
  if (s.peakMemoryBytes != null)
    parts.push(
      `peak memory ${bytes(s.peakMemoryBytes)} (${MEMORY_METHOD_LABELS[s.memoryMethod as MemoryMethod] ?? s.memoryMethod})`,
    );
  if (s.peakDiskBytes != null) parts.push(`peak disk ${bytes(s.peakDiskBytes)} in its directory`);
  parts.push(`${s.cpuCount} CPU${s.cpuCount === 1 ? '' : 's'} on the worker`);
  return parts.join(' · ');
}

/** What the runs of its task, package and architecture used over the window, in one line; null without runs. */
function historyText(s: TaskStatisticsSummary): string | null {
  if (!s.duration) return null;
  const what = [s.key.package, s.key.architecture].filter(Boolean).join(' on ');
  const parts = [
    `${s.duration.count} run${s.duration.count === 1 ? '' : 's'} of ${s.key.taskName}${what ? ` for ${what}` : ''} in ${s.days} days`,
  ];
  parts.push(`run median ${duration(s.duration.median)}, p95 ${duration(s.duration.p95)}`);
  if (s.memory) parts.push(`peak memory median ${bytes(s.memory.median)}, p95 ${bytes(s.memory.p95)}`);
  if (s.disk) parts.push(`peak disk median ${bytes(s.disk.median)}, p95 ${bytes(s.disk.p95)}`);
  return parts.join(' · ');
}

export async function workRequestPage(
  em: EntityManager,
  config: Pick<Config, 'workers' | 'tags' | 'provisioner'>,
  scheduler: Scheduler,
  ctx: PageContext,
  rawId: string,
  params: Map<string, string>,
): Promise<string> {
  const id = idSegment(rawId, 'work request');
  const offsetParam = wholeNumber(params, 'offset', null);
  const wr = await em.findOne(
    WorkRequestSchema,
    { id },
    { populate: ['workspace', 'workspace.scope', 'worker', 'parent'] },
  );
  if (!wr || !(await viewerSeesWorkRequest(em, ctx.viewer, wr)))
    throw new StatusError(404, `There is no work request ${id} you may see.`);
  const principal = principalOf(ctx.viewer);
  const now = new Date();
  const loaders = createLoaders(em, config, scheduler.workers, scheduler);
  const orchestrated = isOrchestrated(wr.taskType);
  const key = statisticsKeyOf(wr.taskType, wr.taskName, wr.providedEntries, wr.requiredEntries);
  const [diagnosis, candidates, [deps], totalBytes, statistics, history] = await Promise.all([
    diagnoseRequest(loaders, wr, { keep: firstEstimateKeeper(em) }),
    orchestrated || wr.status !== 'PENDING' ? [] : loaders.candidates(false).load(wr.id),
    dependenciesOf(em, ctx.viewer, [wr.id]),
    logTotalBytes(em, wr.id),
    runStatisticsOf(em, wr.id),
    // The aggregates of its task, as the API gives them: per package and architecture to admins, the
    // task as a whole to other signed-in viewers, nothing to anonymous ones.
    canSeeTaskStatistics(principal, false) && !orchestrated
      ? taskStatistics(
          em,
          ctx.viewer,
          canSeeTaskStatistics(principal, true) ? key : { ...key, package: '', architecture: '' },
        )
      : null,
  ]);
  const historyLine = history ? historyText(history) : null;
  // Its share of its instance's cost (scheduler/rules/pool-cost.ts: workRequestCost).
  const price = wr.worker && wr.startedAt ? await loaders.workerPrices.load(wr.worker.id) : null;
  const share = price
    ? workRequestCost(price.pricePerHour, wr.startedAt ?? null, wr.completedAt ?? now, price.concurrency)
    : null;
  const offset = Math.min(offsetParam ?? Math.max(0, totalBytes - LOG_PAGE_BYTES), totalBytes);
  const log = await readLog(em, wr.id, offset, LOG_PAGE_BYTES);
  const live = isActive(wr.status);
  const workspace = `${wr.workspace.scope.name}/${wr.workspace.name}`;
  const { visible: visibleDeps, hidden: hiddenDeps } = deps;

  const logView = log.totalBytes
    ? html`${log.offset > 0 ? html`<p><a href="${href(['work-requests', wr.id], { offset: Math.max(0, log.offset - LOG_PAGE_BYTES) })}">← Earlier output</a> <span class="muted">(this page starts at byte ${log.offset})</span></p>` : ''}
<pre class="log" id="log">${consoleText(log.text)}</pre>
${log.nextOffset < log.totalBytes ? html`<p><a href="${href(['work-requests', wr.id], { offset: log.nextOffset })}">Later output →</a></p>` : ''}
<p class="muted">${bytes(log.totalBytes)} so far${log.droppedBytes ? `, ${bytes(log.droppedBytes)} dropped from the middle (TAGSCHED_MAX_LOG_BYTES)` : ''}${live ? ` · this page reloads every ${REFRESH_SECONDS} s while the request runs` : ''}.</p>`
    : html`<p class="muted">${live ? `No output yet · this page reloads every ${REFRESH_SECONDS} s while the request runs.` : 'No output.'}</p>`;

  const candidateList = candidates
    .slice(0, CANDIDATES_SHOWN)
    .map((w) => [
      html`<a href="${href(['workers', w.name])}">${w.name}</a>`,
      w.unavailable
        ? badge('DISCONNECTED', w.unavailable.toLowerCase().replace(/_/g, ' '))
        : w.free > 0
          ? badge('IDLE', `${w.free} free`)
          : badge('BUSY', 'busy'),
    ]);

  const body = html`<p class="muted"><a href="/-/status/queue/">Queue</a> /</p>
<h1>Work request ${wr.id}: ${wr.taskName}</h1>
<dl class="facts">
<dt>Status</dt><dd>${badge(wr.status)}${wr.result ? html` ${badge(wr.result)}` : ''}${wr.exitCode !== null && wr.exitCode !== undefined ? ` exit code ${wr.exitCode}` : ''}</dd>
${wr.statusReason ? html`<dt>Reason</dt><dd>${wr.statusReason}</dd>` : ''}
<dt>Task</dt><dd>${wr.taskType} / ${wr.taskName}${wr.quarantineProbe ? ' · a quarantine probe: its SUCCESS lifts the quarantine of its worker' : ''}</dd>
<dt>Workspace</dt><dd>${workspace}</dd>
<dt>Worker</dt><dd>${wr.worker ? html`<a href="${href(['workers', wr.worker.name])}">${wr.worker.name}</a>` : html`<span class="muted">none</span>`}</dd>
${wr.parent ? html`<dt>Workflow</dt><dd>${workLink(wr.parent.id)}</dd>` : ''}
${visibleDeps.length + hiddenDeps ? html`<dt>Depends on</dt><dd>${visibleDeps.map((d, i) => html`${i ? ', ' : ''}${workLink(d)}`)}${hiddenDeps ? ` (and ${hiddenDeps} you cannot see)` : ''}</dd>` : ''}
<dt>Created</dt><dd>${when(wr.createdAt, now)}</dd>
${wr.pendingAt ? html`<dt>Pending since</dt><dd>${when(wr.pendingAt, now)}</dd>` : ''}
${diagnosis.startEstimate ? html`<dt>Expected start</dt><dd>${startEstimateText(diagnosis.startEstimate, now)}</dd>` : ''}
${wr.estimatedStartAt && wr.status !== 'PENDING' ? html`<dt>First estimate</dt><dd>${when(wr.estimatedStartAt, now)}${wr.startedAt ? ` (off by ${duration(Math.abs(wr.startedAt.getTime() - wr.estimatedStartAt.getTime()) / 1000)})` : ''}</dd>` : ''}
${wr.startedAt ? html`<dt>Started</dt><dd>${when(wr.startedAt, now)}</dd>` : ''}
${wr.completedAt ? html`<dt>Finished</dt><dd>${when(wr.completedAt, now)}</dd>` : ''}
${wr.startedAt ? html`<dt>Duration</dt><dd>${duration(between(wr.startedAt, wr.completedAt, now))}${wr.completedAt ? '' : ' so far'}</dd>` : ''}
${share !== null ? html`<dt>Cost</dt><dd>${formatCost(share)}${wr.completedAt ? '' : ' so far'} <span class="muted">(its instance’s price per hour × its run time${price!.concurrency > 1 ? ` ÷ ${price!.concurrency}, the requests its worker runs at once` : ''})</span></dd>` : ''}
${wr.resourceSources ? html`<dt>Reserves</dt><dd>${describeReservation({ cpus: wr.reservedCpus, memoryMib: wr.reservedMemoryMib, diskMib: wr.reservedDiskMib }, wr.resourceSources)} <span class="muted">(of a worker that shares its resources)</span></dd>` : ''}
${statistics ? html`<dt>Used</dt><dd>${usedText(statistics)}</dd>` : ''}
${historyLine ? html`<dt>Its task lately</dt><dd>${historyLine} <span class="muted">(estimates at most 5% high)</span></dd>` : ''}
${wr.retryCount ? html`<dt>Retries</dt><dd>${wr.retryCount}</dd>` : ''}
</dl>
<h2>Log</h2>
${logView}
<h2>Diagnosis</h2>
${diagnosisView(diagnosis, (m) => canSeeWorkerGroupTags(principal, m.workerIds))}
${wr.status === 'PENDING' && !orchestrated ? html`<h2>Candidate workers</h2>${table(['Worker', 'Now'], candidateList, 'No worker matches its tags.')}${candidates.length > CANDIDATES_SHOWN ? html`<p class="muted">and ${candidates.length - CANDIDATES_SHOWN} more</p>` : ''}` : ''}
<h2>Required tags</h2>
${tagTable(wr.requiredEntries)}
<h2>Provided tags</h2>
${tagTable(wr.providedEntries)}
${wr.droppedTags.length ? html`<h2>Dropped tags</h2>${refusedTable(wr.droppedTags)}` : ''}`;
  return layout(
    ctx,
    { title: `Work request ${wr.id}`, section: 'queue', refreshSeconds: live ? REFRESH_SECONDS : undefined },
    body,
  );
}
