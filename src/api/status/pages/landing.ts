/** `/` and `/-/status/`: what the farm is doing, in a few numbers, with links to every status page and to GraphiQL. */
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Config } from '../../../core/config/config.js';
import { poolCounts } from '../../../services/pools/pool-reads.js';
import { queueCounts } from '../../../services/work/work-counts.js';
import { activeWorkerRows } from '../../../services/workers/worker-lists.js';
import { html } from '../html.js';
import { layout, viewerLabel, type PageContext } from '../layout.js';
import { countByStatus, STATUS_LABELS } from './workers.js';

export async function landingPage(
  em: EntityManager,
  config: Pick<Config, 'workers'>,
  ctx: PageContext,
): Promise<string> {
  const [workers, pools, work] = await Promise.all([
    activeWorkerRows(em, config.workers.metadataFreshMs),
    poolCounts(em),
    queueCounts(em, ctx.viewer),
  ]);
  const counts = countByStatus(workers);
  const who = viewerLabel(ctx.viewer);
  const body = html`<h1>tagsched</h1>
<p>Tag-based scheduling of build and test work onto workers. ${
    who
      ? html`You are signed in as <strong>${who}</strong>: you see the tags and metadata of workers, and the work of the workspaces you may see.`
      : html`You are not signed in: you see workers and the work of public workspaces. <a href="/-/status/login?next=%2F">Sign in</a> with a token to see tags and metadata.`
  }</p>
<div class="cards">
<div class="card"><h2><a href="/-/status/workers/">Workers</a></h2><p class="big">${workers.length}</p><p>${[
    ...counts.entries(),
  ].map(
    ([s, n], i) =>
      html`${i ? ' · ' : ''}<a href="/-/status/workers/?status=${s}">${n} ${STATUS_LABELS[s].toLowerCase()}</a>`,
  )}</p></div>
<div class="card"><h2><a href="/-/status/queue/">Queue</a></h2><p class="big">${work.pending}</p><p>pending (${work.visiblePending} you can see) · ${work.running} assigned or running</p></div>
<div class="card"><h2><a href="/-/status/pools/">Pools</a></h2><p class="big">${pools.n}</p><p>${pools.enabled} enabled: instances, demand, limits and budget</p></div>
<div class="card"><h2>${ctx.graphiql ? html`<a href="/graphql">GraphiQL</a>` : 'GraphQL'}</h2><p>The API at <code>/graphql</code>${ctx.graphiql ? ', with example operations' : ' (GraphiQL is off in production)'}; <a href="/metrics">/metrics</a> for Prometheus.</p></div>
</div>`;
  return layout(ctx, { title: 'Overview', section: 'overview' }, body);
}
