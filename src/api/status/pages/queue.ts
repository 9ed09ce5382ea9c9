/**
 * `/-/status/queue/`: pending work by task class, the class waiting longest first, each with its
 * diagnosis (scheduler/matching/diagnosis.ts: a class's requests are decided alike, so one request diagnoses
 * the class), its estimated wait (the start estimate of its queue's head) and its oldest requests. Only classes with a request the viewer may see are described;
 * the others are counted.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Config } from '../../../core/config/config.js';
import { createLoaders } from '../../loaders.js';
import { loadTaskTags } from '../../../scheduler/matching/candidates.js';
import { diagnose, type Mismatch } from '../../../scheduler/matching/diagnosis.js';
import type { Scheduler } from '../../../scheduler/scheduler.js';
import { canSeeWorkerGroupTags, principalOf } from '../../../services/identity/visibility.js';
import { pendingClasses, pendingOfClasses } from '../../../services/work/work-rows.js';
import { between, duration } from '../format.js';
import { href, html, type Html } from '../html.js';
import type { StartEstimate } from '../../../scheduler/matching/start-estimate.js';
import { estimateClassHeads } from '../../../services/work/diagnose-request.js';
import { layout, type PageContext } from '../layout.js';
import { diagnosisView, pager, table, tagList } from '../parts.js';
import { pageNumber, StatusError, wholeNumber } from '../request.js';
import { workLink } from '../work-rows.js';

const CLASSES_PER_PAGE = 20;
const REQUESTS_PER_CLASS = 5;
/** Requests per page of one class (`?class=ID`). */
const REQUESTS_PER_PAGE = 50;

/** The estimated wait of a class: when its next request (the head of its queue) is expected to start, and how far off its estimates were. */
function estimateLine(e: StartEstimate | undefined): Html | string {
  if (!e) return '';
  if (e.waitSeconds === null) return html`<p>Estimated wait: <span class="muted">none (${e.basis})</span></p>`;
  const trust =
    e.samples && e.medianAbsoluteErrorSeconds !== null
      ? `estimates off by ${duration(e.medianAbsoluteErrorSeconds)} (median of the last ${e.samples})`
      : 'no estimate checked yet';
  return html`<p>Estimated wait: ${duration(Math.max(0, e.waitSeconds))} <span class="muted">until its next request starts · ${trust}</span></p>`;
}

export async function queuePage(
  em: EntityManager,
  config: Pick<Config, 'workers' | 'tags' | 'provisioner'>,
  scheduler: Scheduler,
  ctx: PageContext,
  params: Map<string, string>,
): Promise<string> {
  const page = pageNumber(params);
  const classParam = wholeNumber(params, 'class', null);
  const principal = principalOf(ctx.viewer);
  const classes = await pendingClasses(em, ctx.viewer);
  const shown = classes
    .filter((c) => c.visible > 0)
    .sort((a, b) => a.oldest!.getTime() - b.oldest!.getTime() || (a.classId ?? 0) - (b.classId ?? 0));
  const total = classes.reduce((s, c) => s + c.n, 0);
  const hidden = total - shown.reduce((s, c) => s + c.visible, 0);
  // One class (`?class=ID`): all its requests the viewer may see, paged; else a page of classes, each with its oldest.
  const one = classParam === null ? null : shown.find((c) => (c.classId ?? 0) === classParam);
  if (classParam !== null && !one)
    throw new StatusError(404, `There is no task class ${classParam} with pending work you may see.`);
  const pages = Math.max(1, Math.ceil(one ? one.visible / REQUESTS_PER_PAGE : shown.length / CLASSES_PER_PAGE));
  if (page > pages)
    throw new StatusError(404, `There is no page ${page}: ${one ? 'the class' : 'the queue'} fills ${pages}.`);
  const onPage = one ? [one] : shown.slice((page - 1) * CLASSES_PER_PAGE, page * CLASSES_PER_PAGE);
  const [from, to] = one ? [(page - 1) * REQUESTS_PER_PAGE, page * REQUESTS_PER_PAGE] : [0, REQUESTS_PER_CLASS];
  const now = new Date();

  const requests = onPage.length
    ? await pendingOfClasses(
        em,
        ctx.viewer,
        onPage.map((c) => c.classId ?? 0),
        { from, to },
      )
    : [];
  const loaders = createLoaders(em, config, scheduler.workers, scheduler);
  const firsts = onPage.map((c) => requests.find((r) => r.classId === (c.classId ?? 0))!);
  const [tags, workers, pools, estimates] = await Promise.all([
    loadTaskTags(
      em,
      firsts.map((r) => r.id),
    ),
    loaders.workerStates(),
    loaders.poolTemplates(),
    estimateClassHeads(
      em,
      loaders,
      onPage.flatMap((c) => (c.classId === null ? [] : [c.classId])),
    ),
  ]);
  const classLink = (c: { classId: number | null }, p = 1) =>
    href(['queue'], { class: c.classId ?? 0, page: p > 1 ? p : null });
  const workerTags = (m: Mismatch) => canSeeWorkerGroupTags(principal, m.workerIds);

  const sections = onPage.map((c, i) => {
    const first = firsts[i];
    const t = tags.find((x) => x.id === first.id)!;
    const d = diagnose({ ...t, status: 'PENDING', taskType: first.taskType, taskName: first.taskName }, workers, pools);
    const mine = requests.filter((r) => r.classId === (c.classId ?? 0));
    const names = [...new Set(mine.map((r) => r.taskName))].join(', ');
    return html`<section class="card">
<h2>${one ? names : html`<a href="${classLink(c)}">${names}</a>`} <span class="muted">· ${c.visible} pending${c.n > c.visible ? ` (${c.n - c.visible} more you cannot see)` : ''} · oldest waiting ${duration(between(c.oldest, null, now))}</span></h2>
<p>Requires: ${t.requiredTags.length ? tagList(t.requiredTags) : html`<span class="muted">nothing</span>`}</p>
${estimateLine(c.classId === null ? undefined : estimates.get(c.classId))}
${diagnosisView(d, workerTags, 3)}
<h3>${one ? 'Its requests, oldest first' : 'Oldest'}</h3>
${table(
  ['Request', 'Task', 'Workspace', 'Waiting'],
  mine.map((r) => [workLink(r.id), r.taskName, r.workspace, duration(between(r.pendingAt, null, now))]),
  '',
  { stack: true },
)}${!one && c.visible > mine.length ? html`<p><a href="${classLink(c)}">All ${c.visible} in this class →</a></p>` : ''}
</section>`;
  });
  const body = html`${one ? html`<p class="muted"><a href="/-/status/queue/">Queue</a> /</p>` : ''}<h1>${one ? 'Queue: one task class' : 'Queue'}</h1>
<p>${total} request${total === 1 ? '' : 's'} pending${shown.length ? html` in ${shown.length} class${shown.length === 1 ? '' : 'es'} you can see` : ''}, the class waiting longest first.${
    hidden
      ? html` ${hidden} of them ${hidden === 1 ? 'is' : 'are'} in workspaces you cannot see: counted, not shown.`
      : ''
  }</p>
${sections.length ? sections : html`<p class="muted">Nothing you may see is pending.</p>`}
${pager(page, pages, (p) => (one ? classLink(one, p) : href(['queue'], { page: p > 1 ? p : null })))}`;
  return layout(ctx, { title: 'Queue', section: 'queue' }, body);
}
