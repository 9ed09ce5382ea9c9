/** `/` and `/-/status/`: what the farm is doing, in a few numbers, with links to every status page and to GraphiQL. */
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Config } from '../../../core/config.js';
import { principalOf, workRequestSql } from '../../../services/identity/visibility.js';
import { ACTIVE_STATUSES_SQL, isActiveSql } from '../../../scheduler/rules/active-work.js';
import { html } from '../html.js';
import { layout, viewerLabel, type PageContext } from '../layout.js';
import { countByStatus, loadWorkerRows, STATUS_LABELS } from './workers.js';

export async function landingPage(em: EntityManager, config: Config, ctx: PageContext): Promise<string> {
  const principal = principalOf(ctx.viewer);
  const vis = workRequestSql(principal, 'wr');
  const [workers, [pools], [work]] = await Promise.all([
    loadWorkerRows(em, config, principal),
    em.execute<{ n: number; enabled: number }[]>(`select count(*)::int as n, (count(*) filter (where enabled))::int as enabled from worker_pool`),
    em.execute<{ pending: number; running: number; visible_pending: number }[]>(
      `select (count(*) filter (where status = 'PENDING'))::int as pending, (count(*) filter (where ${isActiveSql('wr')}))::int as running,
              (count(*) filter (where status = 'PENDING' and ${vis.sql}))::int as visible_pending
         from work_request wr where status in ('PENDING', ${ACTIVE_STATUSES_SQL})`,
      [...vis.params],
    ),
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
<div class="card"><h2><a href="/-/status/workers/">Workers</a></h2><p class="big">${workers.length}</p><p>${[...counts.entries()].map(
    ([s, n], i) => html`${i ? ' · ' : ''}<a href="/-/status/workers/?status=${s}">${n} ${STATUS_LABELS[s].toLowerCase()}</a>`,
  )}</p></div>
<div class="card"><h2><a href="/-/status/queue/">Queue</a></h2><p class="big">${work.pending}</p><p>pending (${work.visible_pending} you can see) · ${work.running} assigned or running</p></div>
<div class="card"><h2><a href="/-/status/pools/">Pools</a></h2><p class="big">${pools.n}</p><p>${pools.enabled} enabled: instances, demand, limits and budget</p></div>
<div class="card"><h2>${ctx.graphiql ? html`<a href="/graphql">GraphiQL</a>` : 'GraphQL'}</h2><p>The API at <code>/graphql</code>${ctx.graphiql ? ', with example operations' : ' (GraphiQL is off in production)'}; <a href="/metrics">/metrics</a> for Prometheus.</p></div>
</div>`;
  return layout(ctx, { title: 'Overview', section: 'overview' }, body);
}
