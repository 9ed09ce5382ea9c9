/**
 * Work requests: list (with filters), show (both tag sets with provenance), why (the diagnosis in
 * words), log (work-log.ts), create and abort.
 */
import { formatCost } from '../../scheduler/rules/pool-cost.js';
import { describeReservation } from '../../scheduler/rules/resources.js';
import type { Command } from 'commander';
import { collect, enumArg, integer, items, jsonArg } from './arguments.js';
import { ERROR_SELECTION } from './client.js';
import { explain, WHY_FIELDS, type WhyData } from './diagnosis-text.js';
import { ago, heading, instant, list, renderFields, renderTable, statusStyle, type Output } from './output.js';
import { readPages, type Connection } from './paging.js';
import type { Ctx, Register } from './command-context.js';
import { addLogCommand } from './work-log.js';
import { checkId, fetchOne } from './work-lookup.js';
import { tagTable } from './workers.js';
import { MEMORY_METHOD_LABELS, type RunStatistics } from '../../shared/run-statistics.js';
import { WORK_REQUEST_STATUSES } from '../../core/work-request-status.js';

const ROW_FIELDS =
  'id status result taskType taskName priority workspace { name } worker { name } createdBy { username } createdAt';

interface WorkRow {
  id: string;
  status: string;
  result: string | null;
  taskType: string;
  taskName: string;
  priority: number;
  workspace: { name: string };
  worker: { name: string } | null;
  createdBy: { username: string };
  createdAt: string;
}

interface WorkDetail extends WorkRow, WhyData {
  taskData: unknown;
  statusReason: string | null;
  exitCode: number | null;
  priorityBase: number;
  priorityAdjustment: number;
  retryCount: number;
  pendingAt: string | null;
  assignedAt: string | null;
  startedAt: string | null;
  completedAt: string | null;
  /** Its share of its instance's cost; null without one. */
  cost: number | null;
  /** What it reserves of a worker that shares its resources, frozen with its tags; null before. */
  resources: {
    cpus: number;
    memoryMib: number;
    diskMib: number;
    sources: { cpus: string; memoryMib: string; diskMib: string };
  } | null;
  userProvidedTags: string[];
  userRequiredTags: string[];
  providedTags: { tag: string; provenance: string; source: string }[];
  requiredTags: { tag: string; provenance: string; source: string }[];
  droppedTags: { tag: string; provenance: string; source: string; set: string; reason: string }[];
  parent: { id: string; taskName: string } | null;
  /** What the run used, as the agent reported it (the API's RunStatistics has the same fields). */
  statistics: RunStatistics | null;
  children: { edges: { node: WorkRow }[]; pageInfo: { hasNextPage: boolean } };
}

const WORK_REQUESTS = `query WorkRequests($filter: WorkRequestFilter, $first: Int, $after: String) {
  workRequests(filter: $filter, first: $first, after: $after) { edges { cursor node { ${ROW_FIELDS} } } pageInfo { hasNextPage endCursor } }
}`;
const WORK_REQUEST = `query WorkRequest($id: ID!) {
  workRequest(id: $id) {
    ${ROW_FIELDS} ${WHY_FIELDS} taskData exitCode priorityBase priorityAdjustment retryCount pendingAt assignedAt startedAt completedAt cost
    resources { cpus memoryMib diskMib sources { cpus memoryMib diskMib } }
    userProvidedTags userRequiredTags providedTags { tag provenance source } requiredTags { tag provenance source }
    droppedTags { tag provenance source set reason }
    parent { id taskName }
    statistics { setupSeconds runSeconds teardownSeconds cpuSeconds peakMemoryBytes peakDiskBytes cpuCount memoryMethod }
    children(first: 50) { edges { node { ${ROW_FIELDS} } } pageInfo { hasNextPage } }
  }
}`;
const WHY = `query Why($id: ID!) { workRequest(id: $id) { ${WHY_FIELDS} } }`;
/** `work create`'s document (bench/clients.ts sends it too, as the CLI does). */
export const CREATE_WORK_REQUEST = `mutation CreateWorkRequest($input: CreateWorkRequestInput!, $key: String) {
  createWorkRequest(input: $input, idempotencyKey: $key) { ${ERROR_SELECTION} ... on WorkRequest { ${ROW_FIELDS} } }
}`;
const ABORT = `mutation AbortWorkRequest($id: ID!) { abortWorkRequest(input: { id: $id }) { ${ERROR_SELECTION} ... on WorkRequest { ${ROW_FIELDS} statusReason } } }`;

function workTable(out: Output, rows: readonly WorkRow[]): string {
  return renderTable(out, rows, [
    { header: 'ID', value: (r) => r.id, align: 'right' },
    { header: 'STATUS', value: (r) => r.status, style: (s, r) => statusStyle(out, r.status, s) },
    { header: 'RESULT', value: (r) => r.result, style: (s, r) => (r.result ? statusStyle(out, r.result, s) : s) },
    { header: 'TASK', value: (r) => `${r.taskType}/${r.taskName}` },
    { header: 'WORKSPACE', value: (r) => r.workspace.name, shrink: true },
    { header: 'WORKER', value: (r) => r.worker?.name, shrink: true },
    { header: 'PRIO', value: (r) => r.priority, align: 'right' },
    { header: 'BY', value: (r) => r.createdBy.username, shrink: true },
    { header: 'CREATED', value: (r) => ago(r.createdAt) },
  ]);
}

async function listWork(
  ctx: Ctx,
  opts: {
    status?: string[];
    workspace?: string;
    task?: string;
    worker?: string;
    requires?: string;
    provides?: string;
    limit: string;
  },
) {
  const status = items(opts.status).map((s) => enumArg('--status', s, WORK_REQUEST_STATUSES));
  const filter = {
    status: status.length ? status : null,
    workspace: opts.workspace ?? null,
    taskName: opts.task ?? null,
    worker: opts.worker ?? null,
    requiresTag: opts.requires ?? null,
    providesTag: opts.provides ?? null,
  };
  const api = ctx.api();
  const workRequests = await readPages<WorkRow>(
    async (first, after) =>
      (await api.query<{ workRequests: Connection<WorkRow> }>(WORK_REQUESTS, { filter, first, after })).workRequests,
    {
      limit: integer('--limit', opts.limit, 1),
    },
  );
  if (ctx.out.json) return ctx.out.writeJson({ workRequests });
  ctx.out.write(
    workTable(
      ctx.out,
      workRequests.edges.map((e) => e.node),
    ),
  );
  if (workRequests.pageInfo.hasNextPage) ctx.io.stderr.write('(more work requests: raise --limit)\n');
}

const seconds = (s: number) => (s < 10 ? `${s.toFixed(2)} s` : `${Math.round(s)} s`);
const mib = (n: number) => `${(n / 2 ** 20).toFixed(1)} MiB`;

/** What the run used, as its agent reported it: no lines when it did not. */
function usedFields(s: WorkDetail['statistics']): [string, string][] {
  if (!s) return [];
  return [
    [
      'Wall time',
      `run ${seconds(s.runSeconds)}, setup ${seconds(s.setupSeconds)}, teardown ${seconds(s.teardownSeconds)}`,
    ],
    ['CPU time', s.cpuSeconds === null ? 'unknown' : `${seconds(s.cpuSeconds)} (${s.cpuCount} CPUs on the worker)`],
    [
      'Peak memory',
      s.peakMemoryBytes === null
        ? 'unknown'
        : `${mib(s.peakMemoryBytes)} (${MEMORY_METHOD_LABELS[s.memoryMethod] ?? s.memoryMethod})`,
    ],
    ['Peak disk', s.peakDiskBytes === null ? 'unknown' : `${mib(s.peakDiskBytes)} in its run directory`],
  ];
}

async function show(ctx: Ctx, id: string) {
  const data = await fetchOne<WorkDetail>(ctx, WORK_REQUEST, id);
  if (ctx.out.json) return ctx.out.writeJson(data);
  const { out } = ctx;
  const w = data.workRequest;
  const { summary } = explain(w);
  out.write(
    renderFields(out, [
      ['Work request', w.id],
      ['Task', `${w.taskType}/${w.taskName}`],
      ['Workspace', w.workspace.name],
      ['Created by', w.createdBy.username],
      ['Status', `${statusStyle(out, w.status)}${w.result ? ` ${statusStyle(out, w.result)}` : ''}`],
      ['Exit code', w.exitCode],
      ['Reason', w.statusReason],
      ['Where it stands', summary],
      ['Worker', w.worker?.name],
      ['Priority', `${w.priority} (base ${w.priorityBase}, adjustment ${w.priorityAdjustment})`],
      ['Retries', w.retryCount],
      ['Resources', w.resources ? describeReservation(w.resources, w.resources.sources) : null],
      ['Part of', w.parent ? `${w.parent.id} (${w.parent.taskName})` : null],
      [
        'Depends on',
        w.dependsOn.length || w.hiddenDependencyCount
          ? `${list(w.dependsOn)}${w.hiddenDependencyCount ? ` (+${w.hiddenDependencyCount} hidden)` : ''}`
          : null,
      ],
      ['Created', instant(w.createdAt)],
      ['Pending', instant(w.pendingAt)],
      ['Assigned', instant(w.assignedAt)],
      ['Started', instant(w.startedAt)],
      ['Completed', instant(w.completedAt)],
      [
        'Cost',
        w.cost === null
          ? null
          : `${formatCost(w.cost)}${w.completedAt ? '' : ' so far'} (its share of its instance's cost)`,
      ],
      ...usedFields(w.statistics),
      ['Task data', JSON.stringify(w.taskData)],
    ]),
  );
  out.write(heading(out, 'Provided tags'));
  out.write(tagTable(out, w.providedTags));
  out.write(heading(out, 'Required tags'));
  out.write(tagTable(out, w.requiredTags));
  if (w.children.edges.length) {
    out.write(heading(out, 'Children'));
    out.write(
      workTable(
        out,
        w.children.edges.map((e) => e.node),
      ),
    );
    if (w.children.pageInfo.hasNextPage)
      out.line(out.color.dim('(and more children: tagsched-admin work list shows them all)'));
  }
  if (w.droppedTags.length) {
    out.write(heading(out, 'Dropped rule tags'));
    out.write(
      renderTable(out, w.droppedTags, [
        { header: 'TAG', value: (t) => t.tag },
        { header: 'SET', value: (t) => t.set.toLowerCase() },
        { header: 'SOURCE', value: (t) => t.source },
        { header: 'REASON', value: (t) => t.reason, shrink: true },
      ]),
    );
  }
}

async function why(ctx: Ctx, id: string) {
  const data = await fetchOne<WhyData>(ctx, WHY, id);
  if (ctx.out.json) return ctx.out.writeJson(data);
  const { summary, details } = explain(data.workRequest);
  ctx.out.line(`${data.workRequest.id}: ${summary}`);
  for (const d of details) ctx.out.line(`  ${d}`);
}

async function create(
  ctx: Ctx,
  opts: {
    workspace: string;
    task: string;
    type: string;
    data?: string;
    provide?: string[];
    require?: string[];
    priority?: string;
    priorityAdjustment?: string;
    dependsOn?: string[];
    idempotencyKey?: string;
  },
) {
  const taskData = opts.data === undefined ? {} : await jsonArg('--data', opts.data, ctx.io.stdin);
  const input = {
    workspace: opts.workspace,
    taskType: opts.type,
    taskName: opts.task,
    taskData,
    providedTags: items(opts.provide),
    requiredTags: items(opts.require),
    priorityBase: opts.priority !== undefined ? integer('--priority', opts.priority, -1_000_000, 1_000_000) : null,
    priorityAdjustment:
      opts.priorityAdjustment !== undefined
        ? integer('--priority-adjustment', opts.priorityAdjustment, -1_000_000, 1_000_000)
        : null,
    dependsOn: items(opts.dependsOn).map(checkId),
  };
  const data = await ctx
    .api()
    .mutate(CREATE_WORK_REQUEST, { input, key: opts.idempotencyKey ?? null }, 'createWorkRequest');
  if (ctx.out.json) return ctx.out.writeJson(data);
  const w = data.createWorkRequest as WorkRow;
  ctx.out.line(
    `Created work request ${w.id} (${w.taskType}/${w.taskName} in ${w.workspace.name}): ${statusStyle(ctx.out, w.status)}${w.worker ? ` on ${w.worker.name}` : ''}.`,
  );
}

async function abort(ctx: Ctx, id: string) {
  const data = await ctx.api().mutate(ABORT, { id: checkId(id) }, 'abortWorkRequest');
  if (ctx.out.json) return ctx.out.writeJson(data);
  ctx.out.line(`Work request ${data.abortWorkRequest.id} is ${statusStyle(ctx.out, data.abortWorkRequest.status)}.`);
}

export const registerWorkCommands: Register = (program: Command, action) => {
  const work = program.command('work').description('Work requests: list, show, why, log, create, abort');
  action(
    work
      .command('list')
      .description('Lists work requests, newest first (only those you may see)')
      .option(
        '--status <status>',
        `only these statuses (repeatable, or comma-separated): ${WORK_REQUEST_STATUSES.join(', ')}`,
        collect,
      )
      .option('--workspace <scope/name>', 'only this workspace')
      .option('--task <name>', 'only this task name')
      .option('--worker <name>', 'only work assigned to this worker')
      .option('--requires <tag>', 'only requests requiring this exact tag')
      .option('--provides <tag>', 'only requests providing this exact tag')
      .option('--limit <n>', 'show at most this many', '50')
      .addHelpText(
        'after',
        `
With --json, the answer is one WorkRequestConnection holding every request shown.

Examples:
  tagsched-admin work list --status pending --workspace debian/main
  tagsched-admin work list --requires worker:cap:sbuild --limit 200
  tagsched-admin work list --status running --json | jq -r '.workRequests.edges[].node | "\\(.id) \\(.worker.name)"'`,
      ),
    (ctx, _a, opts) => listWork(ctx, opts as Parameters<typeof listWork>[1]),
  );
  action(
    work
      .command('show <id>')
      .description('Shows a work request: status, times, where it stands, and both tag sets with provenance')
      .addHelpText('after', '\nExamples:\n  tagsched-admin work show 42'),
    (ctx, [id]) => show(ctx, id),
  );
  action(
    work
      .command('why <id>')
      .description('Says why a work request waits (or where it stands), in words')
      .addHelpText(
        'after',
        `
Examples:
  tagsched-admin work why 42
    42: waiting for capacity: 3 matching workers are all busy
    42: unschedulable: no worker or pool provides worker:cap:sbuild (nearest: workers arm-1, arm-2)`,
      ),
    (ctx, [id]) => why(ctx, id),
  );
  action(
    work
      .command('create')
      .description('Submits a work request')
      .requiredOption('--workspace <scope/name>', 'the workspace')
      .requiredOption('--task <name>', 'the task name, e.g. sbuild, noop')
      .option('--type <type>', 'the task type: worker, server, signing, internal or workflow', 'worker')
      .option('--data <json>', 'the task data: inline JSON, @FILE, or - for stdin (default {})')
      .option('--provide <tag>', 'a task-provided tag (only under prefixes the workspace grants; repeatable)', collect)
      .option('--require <tag>', 'a task-required tag (repeatable)', collect)
      .option('--priority <n>', 'base priority (default 0)')
      .option('--priority-adjustment <n>', 'priority adjustment (a positive one needs admin)')
      .option('--depends-on <id>', 'stays BLOCKED until this request is COMPLETED (repeatable)', collect)
      .option('--idempotency-key <key>', 'a retry with the same key answers the first create')
      .addHelpText(
        'after',
        `
Examples:
  tagsched-admin work create --workspace debian/main --task sbuild \\
    --data '{"source_package": "hello", "host_architecture": "amd64"}'
  tagsched-admin work create --workspace debian/main --task noop --require worker:class:large`,
      ),
    (ctx, _a, opts) => create(ctx, opts as Parameters<typeof create>[1]),
  );
  addLogCommand(work, action);
  action(
    work
      .command('abort <id>')
      .description('Aborts a work request')
      .addHelpText('after', '\nExamples:\n  tagsched-admin work abort 42'),
    (ctx, [id]) => abort(ctx, id),
  );
};
