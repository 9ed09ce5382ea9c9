/**
 * Workers: list (with filters), show (tags with provenance), register (its token printed once),
 * enable, disable, drain, undrain, terminate (pool workers), set-static (admin metadata) and
 * rotate-token.
 */
import type { Command } from 'commander';
import { collect, enumArg, integer, items } from './arguments.js';
import { ERROR_SELECTION } from './client.js';
import { AdminError, EXIT, usageError } from './exit-codes.js';
import {
  ago,
  heading,
  instant,
  printSecretOnce,
  renderFields,
  renderTable,
  statusStyle,
  type Output,
} from './output.js';
import { readPages, type Connection } from './paging.js';
import type { Ctx, Register } from './command-context.js';
import { ROTATE_TOKEN, type TokenRow, TOKEN_FIELDS } from './tokens.js';
import { ACTIVE_STATUSES } from '../../core/work-request-status.js';

const STATUSES = ['IDLE', 'BUSY', 'DRAINING', 'DISCONNECTED', 'STALE', 'QUARANTINED', 'DISABLED', 'INACTIVE'] as const;
const TYPES = ['WORKER', 'SERVER', 'SIGNING', 'NOT_ASSIGNABLE'] as const;

const ROW_FIELDS =
  'name type status pool { name } concurrency activeWorkCount enabled draining shuttingDown lastSeenAt';

interface WorkerRow {
  name: string;
  type: string;
  status: string;
  pool: { name: string } | null;
  concurrency: number;
  activeWorkCount: number;
  enabled: boolean;
  draining: boolean;
  shuttingDown: boolean;
  lastSeenAt: string | null;
}

interface TagEntry {
  tag: string;
  provenance: string;
  source: string;
}

interface WorkerDetail extends WorkerRow {
  registeredAt: string;
  connectedAt: string | null;
  instanceCreatedAt: string | null;
  terminatedAt: string | null;
  staticMetadata: unknown;
  dynamicMetadata: unknown;
  providedTags: TagEntry[] | null;
  requiredTags: TagEntry[] | null;
  rejectedTags: { tag: string; provenance: string; source: string; reason: string }[] | null;
}

const WORKERS = `query Workers($filter: WorkerFilter, $first: Int, $after: String) {
  workers(filter: $filter, first: $first, after: $after) { edges { cursor node { ${ROW_FIELDS} } } pageInfo { hasNextPage endCursor } }
}`;
const WORKER = `query Worker($name: String!, $active: WorkRequestFilter) {
  worker(name: $name) {
    ${ROW_FIELDS} registeredAt connectedAt instanceCreatedAt terminatedAt staticMetadata dynamicMetadata
    providedTags { tag provenance source } requiredTags { tag provenance source } rejectedTags { tag provenance source reason }
  }
  workRequests(filter: $active, first: 100) { edges { node { id status taskName workspace { name } startedAt assignedAt } } }
}`;
/** `worker register`'s document (bench/clients.ts sends it too, as the CLI does). */
export const REGISTER_WORKER = `mutation RegisterWorker($input: RegisterWorkerInput!, $key: String) {
  registerWorker(input: $input, idempotencyKey: $key) { ${ERROR_SELECTION} ... on WorkerTokenPayload { token worker { ${ROW_FIELDS} } } }
}`;
const SET_STATIC = `mutation SetWorkerStaticMetadata($input: SetWorkerStaticMetadataInput!) {
  setWorkerStaticMetadata(input: $input) { ${ERROR_SELECTION} ... on Worker { ${ROW_FIELDS} providedTags { tag provenance source } requiredTags { tag provenance source } } }
}`;
const TOKENS = `query WorkerTokens($worker: String!) { tokens(worker: $worker) { ${TOKEN_FIELDS} } }`;

/** The mutations that take a worker's name and answer the worker. */
const SWITCHES = {
  enable: { field: 'enableWorker', done: 'may receive work' },
  disable: { field: 'disableWorker', done: 'receives no work (what it runs goes on)' },
  drain: { field: 'drainWorker', done: 'is draining: it finishes what it runs and receives nothing new' },
  undrain: { field: 'undrainWorker', done: 'receives work again' },
} as const;

function workerTable(out: Output, rows: readonly WorkerRow[]): string {
  return renderTable(out, rows, [
    { header: 'NAME', value: (w) => w.name },
    { header: 'TYPE', value: (w) => w.type.toLowerCase() },
    { header: 'POOL', value: (w) => w.pool?.name, shrink: true },
    { header: 'STATUS', value: (w) => w.status, style: (s, w) => statusStyle(out, w.status, s) },
    { header: 'WORK', value: (w) => `${w.activeWorkCount}/${w.concurrency}`, align: 'right' },
    { header: 'LAST SEEN', value: (w) => ago(w.lastSeenAt) },
  ]);
}

/** Tags with provenance as a table. */
export function tagTable(out: Output, tags: readonly TagEntry[] | null): string {
  if (tags === null) return `${out.color.dim('(hidden: your token may not see worker tags)')}\n`;
  return renderTable(out, tags, [
    { header: 'TAG', value: (t) => t.tag },
    { header: 'PROVENANCE', value: (t) => t.provenance.toLowerCase() },
    { header: 'SOURCE', value: (t) => t.source, shrink: true },
  ]);
}

async function listWorkers(
  ctx: Ctx,
  opts: {
    pool?: string;
    type?: string;
    provides?: string;
    requires?: string;
    status?: string[];
    includeInactive?: boolean;
    limit: string;
  },
) {
  const statuses = items(opts.status).map((s) => enumArg('--status', s, STATUSES));
  const filter = {
    pool: opts.pool ?? null,
    type: opts.type ? enumArg('--type', opts.type, TYPES) : null,
    providesTag: opts.provides ?? null,
    requiresTag: opts.requires ?? null,
    includeInactive: opts.includeInactive === true || statuses.includes('INACTIVE'),
  };
  const api = ctx.api();
  const workers = await readPages<WorkerRow>(
    async (first, after) =>
      (await api.query<{ workers: Connection<WorkerRow> }>(WORKERS, { filter, first, after })).workers,
    {
      limit: integer('--limit', opts.limit, 1),
      keep: statuses.length ? (w) => statuses.includes(w.status as (typeof STATUSES)[number]) : undefined,
    },
  );
  if (ctx.out.json) return ctx.out.writeJson({ workers });
  ctx.out.write(
    workerTable(
      ctx.out,
      workers.edges.map((e) => e.node),
    ),
  );
  if (workers.pageInfo.hasNextPage) ctx.io.stderr.write(`(more workers: raise --limit)\n`);
}

async function showWorker(ctx: Ctx, name: string) {
  const data = await ctx.api().query<{
    worker: WorkerDetail | null;
    workRequests: Connection<{
      id: string;
      status: string;
      taskName: string;
      workspace: { name: string };
      startedAt: string | null;
      assignedAt: string | null;
    }>;
  }>(WORKER, { name, active: { worker: name, status: [...ACTIVE_STATUSES] } });
  const w = data.worker;
  if (!w) throw new AdminError(`no worker named ${JSON.stringify(name)}`, EXIT.notFound, 'NOT_FOUND');
  if (ctx.out.json) return ctx.out.writeJson(data);
  const { out } = ctx;
  const flags = [!w.enabled && 'disabled', w.draining && 'draining', w.shuttingDown && 'shutting down']
    .filter(Boolean)
    .join(', ');
  out.write(
    renderFields(out, [
      ['Worker', w.name],
      ['Type', w.type.toLowerCase()],
      ['Status', `${statusStyle(out, w.status)}${flags ? ` (${flags})` : ''}`],
      ['Pool', w.pool?.name],
      ['Work', `${w.activeWorkCount} of ${w.concurrency} slots in use`],
      ['Registered', instant(w.registeredAt)],
      ['Connected', w.connectedAt ? `${instant(w.connectedAt)} (${ago(w.connectedAt)})` : null],
      ['Last seen', w.lastSeenAt ? `${instant(w.lastSeenAt)} (${ago(w.lastSeenAt)})` : null],
      ...(w.instanceCreatedAt ? [['Instance created', instant(w.instanceCreatedAt)] as const] : []),
      ...(w.terminatedAt ? [['Terminated', instant(w.terminatedAt)] as const] : []),
    ]),
  );
  out.write(heading(out, 'Provided tags'));
  out.write(tagTable(out, w.providedTags));
  out.write(heading(out, 'Required tags'));
  out.write(tagTable(out, w.requiredTags));
  if (w.rejectedTags?.length) {
    out.write(heading(out, 'Rejected tags'));
    out.write(
      renderTable(out, w.rejectedTags, [
        { header: 'TAG', value: (t) => t.tag },
        { header: 'PROVENANCE', value: (t) => t.provenance.toLowerCase() },
        { header: 'SOURCE', value: (t) => t.source },
        { header: 'REASON', value: (t) => t.reason, shrink: true },
      ]),
    );
  }
  out.write(heading(out, 'Assigned and running work'));
  out.write(
    renderTable(
      out,
      data.workRequests.edges.map((e) => e.node),
      [
        { header: 'ID', value: (r) => r.id, align: 'right' },
        { header: 'STATUS', value: (r) => r.status, style: (s, r) => statusStyle(out, r.status, s) },
        { header: 'TASK', value: (r) => r.taskName },
        { header: 'WORKSPACE', value: (r) => r.workspace.name, shrink: true },
        { header: 'SINCE', value: (r) => ago(r.startedAt ?? r.assignedAt) },
      ],
    ),
  );
}

async function register(
  ctx: Ctx,
  name: string,
  opts: {
    concurrency?: string;
    pool?: string;
    type?: string;
    provide?: string[];
    require?: string[];
    idempotencyKey?: string;
  },
) {
  const providedTags = items(opts.provide);
  const requiredTags = items(opts.require);
  const input = {
    name,
    concurrency: opts.concurrency ? integer('--concurrency', opts.concurrency, 1) : null,
    pool: opts.pool ?? null,
    type: opts.type ? enumArg('--type', opts.type, TYPES) : null,
    staticMetadata: providedTags.length || requiredTags.length ? { providedTags, requiredTags } : null,
  };
  const data = await ctx.api().mutate(REGISTER_WORKER, { input, key: opts.idempotencyKey ?? null }, 'registerWorker');
  if (ctx.out.json) return ctx.out.writeJson(data);
  printSecretOnce(
    ctx.out,
    ctx.io.stderr,
    `Registered worker ${data.registerWorker.worker.name}. Its token (give it to its agent as TAGSCHED_WORKER_TOKEN)`,
    data.registerWorker.token,
  );
}

async function setSwitch(ctx: Ctx, which: keyof typeof SWITCHES, name: string) {
  const { field, done } = SWITCHES[which];
  const document = `mutation Switch($name: String!) { ${field}(input: { name: $name }) { ${ERROR_SELECTION} ... on Worker { ${ROW_FIELDS} } } }`;
  const data = await ctx.api().mutate(document, { name }, field);
  if (ctx.out.json) return ctx.out.writeJson(data);
  ctx.out.line(`Worker ${data[field].name} ${done}; status ${statusStyle(ctx.out, data[field].status)}.`);
}

const TERMINATE = `mutation TerminateWorker($input: TerminateWorkerInput!) { terminateWorker(input: $input) { ${ERROR_SELECTION} ... on Worker { ${ROW_FIELDS} terminatedAt } } }`;

async function terminate(ctx: Ctx, name: string) {
  const data = await ctx.api().mutate(TERMINATE, { input: { name } }, 'terminateWorker');
  if (ctx.out.json) return ctx.out.writeJson(data);
  ctx.out.line(
    `Worker ${name} is terminated (${statusStyle(ctx.out, data.terminateWorker.status)}): its tokens are refused, work it had not started is pending again, running work re-queued; its instance is stopping.`,
  );
}

async function setStatic(
  ctx: Ctx,
  name: string,
  opts: { provide?: string[]; require?: string[]; concurrency?: string },
) {
  const input = {
    name,
    concurrency: opts.concurrency ? integer('--concurrency', opts.concurrency, 1) : null,
    metadata: { providedTags: items(opts.provide), requiredTags: items(opts.require) },
  };
  const data = await ctx.api().mutate(SET_STATIC, { input }, 'setWorkerStaticMetadata');
  if (ctx.out.json) return ctx.out.writeJson(data);
  const w = data.setWorkerStaticMetadata;
  ctx.out.line(`Static metadata of ${w.name} replaced; its tags now:`);
  ctx.out.write(heading(ctx.out, 'Provided tags'));
  ctx.out.write(tagTable(ctx.out, w.providedTags));
  ctx.out.write(heading(ctx.out, 'Required tags'));
  ctx.out.write(tagTable(ctx.out, w.requiredTags));
}

async function rotateWorkerToken(ctx: Ctx, name: string) {
  const api = ctx.api();
  const { tokens } = await api.query<{ tokens: TokenRow[] }>(TOKENS, { worker: name });
  const valid = tokens.filter((t) => t.kind === 'WORKER' && t.valid);
  if (valid.length === 0)
    throw new AdminError(`worker ${JSON.stringify(name)} has no valid token to rotate`, EXIT.notFound, 'NOT_FOUND');
  if (valid.length > 1) {
    throw usageError(
      `worker ${JSON.stringify(name)} has ${valid.length} valid tokens (ids ${valid.map((t) => t.id).join(', ')}): rotate one with \`tagsched-admin token rotate ID\``,
    );
  }
  const data = await api.mutate(ROTATE_TOKEN, { input: { id: valid[0].id } }, 'rotateToken');
  if (ctx.out.json) return ctx.out.writeJson(data);
  printSecretOnce(
    ctx.out,
    ctx.io.stderr,
    `Rotated the token of worker ${name}: the old one is refused from now on; restart its agent with the new one (TAGSCHED_WORKER_TOKEN); it keeps its work`,
    data.rotateToken.value,
  );
}

export const registerWorkerCommands: Register = (program: Command, action) => {
  const worker = program
    .command('worker')
    .description('Workers: list, show, register, enable, disable, drain, terminate, tokens');
  action(
    worker
      .command('list')
      .description('Lists workers by name (terminated pool workers only with --include-inactive)')
      .option('--pool <name>', "only this pool's workers")
      .option('--type <type>', 'worker, server, signing or not-assignable')
      .option('--provides <tag>', 'only workers providing this exact tag')
      .option('--requires <tag>', 'only workers requiring this exact tag')
      .option(
        '--status <status>',
        `only these statuses (repeatable, or comma-separated): ${STATUSES.join(', ')}`,
        collect,
      )
      .option('--include-inactive', 'also terminated pool workers')
      .option('--limit <n>', 'show at most this many', '500')
      .addHelpText(
        'after',
        `
With --json, the answer is one WorkerConnection holding every worker shown.

Examples:
  tagsched-admin worker list --status idle,busy
  tagsched-admin worker list --pool cloud --provides worker:build-arch:arm64
  tagsched-admin worker list --json | jq -r '.workers.edges[].node.name'`,
      ),
    (ctx, _a, opts) => listWorkers(ctx, opts as Parameters<typeof listWorkers>[1]),
  );
  action(
    worker
      .command('show <name>')
      .description('Shows a worker: status, times, its tags with provenance, rejected tags and its current work')
      .addHelpText('after', '\nExamples:\n  tagsched-admin worker show build-1'),
    (ctx, [name]) => showWorker(ctx, name),
  );
  action(
    worker
      .command('register <name>')
      .description('Registers a static worker and prints its token, once (admins)')
      .option('--concurrency <n>', 'work requests it runs at once (default 1)')
      .option('--pool <name>', 'the pool it belongs to')
      .option('--type <type>', 'worker (default), server, signing or not-assignable')
      .option('--provide <tag>', 'a provided tag in its static metadata (repeatable)', collect)
      .option('--require <tag>', 'a required tag in its static metadata (repeatable)', collect)
      .option('--idempotency-key <key>', 'a retry with the same key answers the first registration, token included')
      .addHelpText(
        'after',
        '\nExamples:\n  tagsched-admin worker register build-1 --concurrency 2 --provide worker:class:large > build-1.token',
      ),
    (ctx, [name], opts) => register(ctx, name, opts),
  );
  for (const [which, text] of [
    ['enable', 'Lets the worker receive work (admins)'],
    ['disable', 'The worker receives no work; what it runs goes on (admins)'],
    ['drain', 'The worker finishes what it runs and receives nothing new (admins)'],
    ['undrain', 'The worker receives work again after a drain (admins)'],
  ] as const) {
    action(
      worker
        .command(`${which} <name>`)
        .description(text)
        .addHelpText('after', `\nExamples:\n  tagsched-admin worker ${which} build-1`),
      (ctx, [name]) => setSwitch(ctx, which, name),
    );
  }
  action(
    worker
      .command('terminate <name>')
      .description('Terminates a pool worker: inactive at once, its work re-queued, its instance stopped (admins)')
      .addHelpText('after', '\nExamples:\n  tagsched-admin worker terminate cloud-3f2a'),
    (ctx, [name]) => terminate(ctx, name),
  );
  action(
    worker
      .command('set-static <name>')
      .description("Replaces a worker's static (admin) metadata: its admin tags; and its concurrency (admins)")
      .option('--provide <tag>', 'a provided tag (repeatable)', collect)
      .option('--require <tag>', 'a required tag: the worker runs only work that provides it (repeatable)', collect)
      .option('--concurrency <n>', 'work requests it runs at once')
      .addHelpText(
        'after',
        `
The tags given replace the static tags the worker had; with none, it has none.

Examples:
  tagsched-admin worker set-static build-1 --provide worker:class:large --concurrency 4
  tagsched-admin worker set-static secure-1 --require task:workspace:debian:security`,
      ),
    (ctx, [name], opts) => setStatic(ctx, name, opts),
  );
  action(
    worker
      .command('rotate-token <name>')
      .description("Replaces the worker's token and prints the new one, once; the old one is refused at once (admins)")
      .addHelpText('after', '\nExamples:\n  tagsched-admin worker rotate-token build-1 > build-1.token'),
    (ctx, [name]) => rotateWorkerToken(ctx, name),
  );
};
