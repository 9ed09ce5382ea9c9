/** `/-/status/workers/{name}/`: a worker, its tags with provenance, its running and recent work, its pool. */
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Config } from '../../../core/config/config.js';
import { WorkerSchema } from '../../../storage/entities/worker.js';
import { ACTIVE_STATUSES, FINISHED_STATUSES } from '../../../core/work-request-status.js';
import { canSeeWorkerDetails, principalOf } from '../../../services/identity/visibility.js';
import { poolTagInput } from '../../../scheduler/storage/pool-templates.js';
import { activeWorkCounts } from '../../../scheduler/storage/active-work.js';
import { workerResourceStates } from '../../../scheduler/storage/worker-resources.js';
import { describeResources } from '../../../scheduler/rules/resources.js';
import { factsOfWorker, workerStatus } from '../../../scheduler/rules/availability.js';
import { computePoolTemplateTags } from '../../../core/tags/worker-tags.js';
import { ago, when } from '../format.js';
import { href, html } from '../html.js';
import { layout, type PageContext } from '../layout.js';
import { badge, refusedTable, tagTable } from '../parts.js';
import { nameParam, StatusError } from '../request.js';
import { hiddenNote, workTable } from '../work-rows.js';
import { workerWork } from '../../../services/work/work-rows.js';
import { STATUS_LABELS } from './workers.js';

const RECENT = 20;
/** The most of a worker's metadata shown, in characters of JSON. */
const MAX_METADATA_CHARS = 8000;

export async function workerPage(
  em: EntityManager,
  config: Pick<Config, 'workers' | 'tags'>,
  ctx: PageContext,
  rawName: string,
): Promise<string> {
  const name = nameParam(rawName, 'worker', 404);
  const worker = await em.findOne(WorkerSchema, { name }, { populate: ['pool'] });
  if (!worker) throw new StatusError(404, `There is no worker “${name}”.`);
  const principal = principalOf(ctx.viewer);
  const now = new Date();
  const [running, recent, activeCounts, hosts] = await Promise.all([
    workerWork(em, ctx.viewer, worker.id, ACTIVE_STATUSES, 100),
    workerWork(em, ctx.viewer, worker.id, FINISHED_STATUSES, RECENT),
    activeWorkCounts(em, [worker.id]),
    worker.offersResources ? workerResourceStates(em, [worker.id]) : null,
  ]);
  const host = hosts?.get(worker.id) ?? null;
  const active = activeCounts.get(worker.id) ?? 0;
  const status = workerStatus(factsOfWorker(worker), active, now, config.workers.metadataFreshMs);
  const pool = worker.pool;
  const details = canSeeWorkerDetails(principal, worker);
  const metadata = JSON.stringify({ ...worker.staticMetadata, ...worker.dynamicMetadata }, null, 2);
  // Only the pool's public fields: never the provider account, nor the commands of local or exec pools.
  const { handlers: _handlers, command: _command, ...publicSpecifications } = pool?.specifications ?? {};

  const body = html`<p class="muted"><a href="/-/status/workers/">Workers</a> /</p>
<h1>Worker ${worker.name}</h1>
<dl class="facts">
<dt>Status</dt><dd>${badge(status, STATUS_LABELS[status])}</dd>
<dt>Type</dt><dd>${worker.type}</dd>
<dt>Pool</dt><dd>${pool ? html`<a href="${href(['pools', pool.name])}">${pool.name}</a>` : 'none (a static worker)'}</dd>
<dt>Concurrency</dt><dd>${worker.concurrency} (${active} held now)</dd>
${host ? html`<dt>Resources</dt><dd>shares ${describeResources(host.offered)}; free ${describeResources(host.free)}</dd>` : ''}
${host?.heldFor && details ? html`<dt>Held for</dt><dd>work request <a href="${href(['work-requests', String(host.heldFor.workRequestId)])}">${host.heldFor.workRequestId}</a> since ${when(host.heldFor.reservedAt, now)}, expected to fit ${when(host.heldFor.startsAt, now)}: it takes only work that does not delay it</dd>` : ''}
<dt>Connected</dt><dd>${ago(worker.connectedAt, now)}</dd>
<dt>Last seen</dt><dd>${ago(worker.lastSeenAt, now)}</dd>
<dt>Registered</dt><dd>${when(worker.registeredAt, now)}</dd>
${worker.terminatedAt ? html`<dt>Terminated</dt><dd>${when(worker.terminatedAt, now)}</dd>` : ''}
</dl>
<h2>Running work</h2>
${workTable(running.rows, 'running', now, running.hidden ? 'Nothing you may see.' : 'Nothing running.')}${hiddenNote(running.hidden)}
<h2>Recent work</h2>
${workTable(recent.rows, 'recent', now, recent.hidden ? 'Nothing you may see.' : 'No finished work yet.')}${hiddenNote(recent.hidden)}
${
  details
    ? html`<h2>Provided tags</h2>${tagTable(worker.providedEntries)}
<h2>Required tags</h2>${tagTable(worker.requiredEntries)}
${worker.rejectedTags.length ? html`<h2>Rejected tags</h2>${refusedTable(worker.rejectedTags)}` : ''}
<h2>Metadata</h2><details><summary>What the worker reported and what an admin set</summary><pre class="log">${
        metadata.length > MAX_METADATA_CHARS ? `${metadata.slice(0, MAX_METADATA_CHARS)}\n…` : metadata
      }</pre></details>`
    : html`<p class="notice">Its tags and metadata are shown to signed-in users: <a href="/-/status/login?next=${encodeURIComponent(ctx.here)}">sign in</a>.</p>`
}
${
  pool
    ? html`<h2>Pool ${pool.name}</h2><dl class="facts">
<dt>Provider</dt><dd>${pool.providerType}</dd>
<dt>Specifications</dt><dd><code>${JSON.stringify(publicSpecifications)}</code></dd>
<dt>Limits</dt><dd>at most ${pool.maxActiveInstances} active, ${pool.minIdleInstances} kept idle, idle timeout ${pool.idleTimeoutSeconds} s, target latency ${pool.targetLatencySeconds} s</dd>
<dt>Enabled</dt><dd>${pool.enabled ? 'yes' : 'no'}</dd></dl>
<h3>Template tags (provided)</h3>${tagTable(computePoolTemplateTags(poolTagInput(pool), config.tags.sizeThresholds).provided)}`
    : ''
}`;
  return layout(ctx, { title: `Worker ${worker.name}`, section: 'workers' }, body);
}
