/**
 * Pool instances: the machines (or local processes) a pool started and the workers they became.
 * `pool instances POOL` lists them; the `instance` commands are for sites that run their own
 * provisioning script (TAGSCHED_PROVISIONER=off): record an instance about to start (and get its
 * activation token, once), then the provider's id once it started, or that it is gone.
 */
import type { Command } from 'commander';
import { collect, enumArg, integer, items } from './arguments.js';
import { ERROR_SELECTION } from './client.js';
import { AdminError, EXIT } from './exit-codes.js';
import { ago, printSecretOnce, renderTable, statusStyle, type Output } from './output.js';
import { readPages, type Connection } from './paging.js';
import type { Ctx, Register } from './command-context.js';
import { INSTANCE_STATES } from '../../core/instance-state.js';

/** The fields of an instance shown in lists. */
export const INSTANCE_FIELDS =
  'name state providerId error requestedAt startedAt stoppingAt terminatedAt runtimeSeconds worker { name status } pool { name }';

/** An instance as INSTANCE_FIELDS selects it. */
export interface InstanceRow {
  name: string;
  state: string;
  providerId: string | null;
  error: string | null;
  requestedAt: string;
  startedAt: string | null;
  stoppingAt: string | null;
  terminatedAt: string | null;
  runtimeSeconds: number;
  worker: { name: string; status: string } | null;
  pool: { name: string };
}

function duration(seconds: number): string {
  const s = Math.round(seconds);
  return s < 120 ? `${s}s` : s < 7200 ? `${Math.round(s / 60)}m` : `${(s / 3600).toFixed(1)}h`;
}

/** Instances as a table. */
export function instanceTable(out: Output, rows: readonly InstanceRow[]): string {
  return renderTable(out, rows, [
    { header: 'NAME', value: (i) => i.name },
    { header: 'STATE', value: (i) => i.state, style: (t, i) => statusStyle(out, i.state, t) },
    {
      header: 'WORKER',
      value: (i) => i.worker?.status,
      style: (t, i) => (i.worker ? statusStyle(out, i.worker.status, t) : t),
    },
    { header: 'PROVIDER ID', value: (i) => i.providerId, shrink: true },
    { header: 'REQUESTED', value: (i) => ago(i.requestedAt) },
    { header: 'RUNTIME', value: (i) => duration(i.runtimeSeconds), align: 'right' },
    { header: 'ERROR', value: (i) => i.error, shrink: true },
  ]);
}

const INSTANCES = `query PoolInstances($pool: String!, $states: [InstanceState!], $first: Int, $after: String) {
  workerPool(name: $pool) { name instances(states: $states, first: $first, after: $after) { edges { cursor node { ${INSTANCE_FIELDS} } } pageInfo { hasNextPage endCursor } } }
}`;
const CREATE = `mutation CreateInstance($input: CreateInstanceInput!) {
  createInstance(input: $input) { ${ERROR_SELECTION} ... on InstanceLaunchPayload { activationToken instance { ${INSTANCE_FIELDS} } } }
}`;
const LAUNCHED = `mutation RecordInstanceLaunched($input: RecordInstanceLaunchedInput!) {
  recordInstanceLaunched(input: $input) { ${ERROR_SELECTION} ... on Instance { ${INSTANCE_FIELDS} } }
}`;
const STOPPED = `mutation RecordInstanceStopped($input: RecordInstanceStoppedInput!) {
  recordInstanceStopped(input: $input) { ${ERROR_SELECTION} ... on Instance { ${INSTANCE_FIELDS} } }
}`;

/** Lists a pool's instances, newest first. */
export async function listInstances(ctx: Ctx, pool: string, opts: { state?: string[]; limit: string }) {
  const states = items(opts.state).map((s) => enumArg('--state', s, INSTANCE_STATES));
  const api = ctx.api();
  const instances = await readPages<InstanceRow>(
    async (first, after) => {
      const data = await api.query<{ workerPool: { instances: Connection<InstanceRow> } | null }>(INSTANCES, {
        pool,
        states: states.length ? states : null,
        first,
        after,
      });
      if (!data.workerPool) throw new AdminError(`no pool named ${JSON.stringify(pool)}`, EXIT.notFound, 'NOT_FOUND');
      return data.workerPool.instances;
    },
    { limit: integer('--limit', opts.limit, 1) },
  );
  if (ctx.out.json) return ctx.out.writeJson({ workerPool: { name: pool, instances } });
  ctx.out.write(
    instanceTable(
      ctx.out,
      instances.edges.map((e) => e.node),
    ),
  );
  if (instances.pageInfo.hasNextPage) ctx.io.stderr.write('(more instances: raise --limit)\n');
}

async function create(ctx: Ctx, pool: string, opts: { name?: string }) {
  const data = await ctx.api().mutate(CREATE, { input: { pool, name: opts.name ?? null } }, 'createInstance');
  if (ctx.out.json) return ctx.out.writeJson(data);
  const { instance, activationToken } = data.createInstance as { instance: InstanceRow; activationToken: string };
  printSecretOnce(
    ctx.out,
    ctx.io.stderr,
    `Recorded instance ${instance.name} of pool ${pool} (LAUNCHING). Its activation token (give it to the machine's agent as TAGSCHED_ACTIVATION_TOKEN, with TAGSCHED_WORKER_NAME=${instance.name})`,
    activationToken,
  );
}

async function launched(ctx: Ctx, name: string, opts: { providerId: string }) {
  const data = await ctx
    .api()
    .mutate(LAUNCHED, { input: { name, providerId: opts.providerId } }, 'recordInstanceLaunched');
  if (ctx.out.json) return ctx.out.writeJson(data);
  const i = data.recordInstanceLaunched as InstanceRow;
  ctx.out.line(`Instance ${i.name} is ${statusStyle(ctx.out, i.state)}, provider id ${i.providerId}.`);
}

async function stopped(ctx: Ctx, name: string, opts: { error?: string }) {
  const data = await ctx.api().mutate(STOPPED, { input: { name, error: opts.error ?? null } }, 'recordInstanceStopped');
  if (ctx.out.json) return ctx.out.writeJson(data);
  const i = data.recordInstanceStopped as InstanceRow;
  ctx.out.line(
    `Instance ${i.name} is ${statusStyle(ctx.out, i.state)}${i.error ? ` (${i.error})` : ''}; its worker is terminated and its work re-queued.`,
  );
}

const LOG = `query InstanceLog($name: String!, $tailBytes: Int) {
  instance(name: $name) { name state log(tailBytes: $tailBytes) { text bytes truncated modifiedAt } }
}`;

/** Prints the end of an instance's log (admins: its agent's output or its serial console), made terminal-safe. */
async function log(ctx: Ctx, name: string, opts: { tail: string }) {
  const tailBytes = integer('--tail', opts.tail, 1, 1024 * 1024);
  const data = await ctx.api().query<{
    instance: {
      name: string;
      state: string;
      log: { text: string; bytes: number; truncated: boolean; modifiedAt: string } | null;
    } | null;
  }>(LOG, { name, tailBytes });
  if (!data.instance) throw new AdminError(`no instance named ${JSON.stringify(name)}`, EXIT.notFound, 'NOT_FOUND');
  if (ctx.out.json) return ctx.out.writeJson(data);
  const entry = data.instance.log;
  if (!entry) {
    ctx.io.stderr.write(
      `(instance ${data.instance.name} has no log: none was kept, it is past TAGSCHED_INSTANCE_LOG_RETENTION_DAYS, or you are not an admin)\n`,
    );
    return;
  }
  if (entry.truncated)
    ctx.io.stderr.write(`(the last ${Buffer.byteLength(entry.text)} of ${entry.bytes} bytes; raise --tail for more)\n`);
  ctx.out.write(entry.text.endsWith('\n') || !entry.text ? entry.text : `${entry.text}\n`);
}

/** Adds `instances` to the `pool` command group. */
export function addInstancesCommand(pool: Command, action: Parameters<Register>[1]): void {
  action(
    pool
      .command('instances <pool>')
      .description("Lists a pool's instances, newest first: state, worker, provider id, runtime, error")
      .option(
        '--state <state>',
        `only these states (repeatable, or comma-separated): ${INSTANCE_STATES.join(', ')}`,
        collect,
      )
      .option('--limit <n>', 'show at most this many', '100')
      .addHelpText(
        'after',
        '\nExamples:\n  tagsched-admin pool instances cloud --state running,launching\n  tagsched-admin pool instances cloud --json',
      ),
    (ctx, [name], opts) => listInstances(ctx, name, opts as { state?: string[]; limit: string }),
  );
}

export const registerInstanceCommands: Register = (program: Command, action) => {
  const instance = program
    .command('instance')
    .description(
      "Pool instances: their logs, and those started by the site's own script (TAGSCHED_PROVISIONER=off): record them as they start and stop",
    );
  action(
    instance
      .command('create <pool>')
      .description(
        'Records an instance about to start (its worker is made, LAUNCHING) and prints its activation token, once',
      )
      .option('--name <name>', "the instance's name, also its worker's (default: the pool's name and random hex)")
      .addHelpText(
        'after',
        `
Examples:
  tagsched-admin instance create cloud > activation.token
  tagsched-admin instance create cloud --json | jq -r '.createInstance.instance.name'`,
      ),
    (ctx, [pool], opts) => create(ctx, pool, opts),
  );
  action(
    instance
      .command('launched <name>')
      .description("Records the provider's id of an instance that started")
      .requiredOption('--provider-id <id>', "the provider's own id of the machine")
      .addHelpText('after', '\nExamples:\n  tagsched-admin instance launched cloud-3f2a --provider-id 48213377'),
    (ctx, [name], opts) => launched(ctx, name, opts as { providerId: string }),
  );
  action(
    instance
      .command('log <name>')
      .description(
        "Prints the end of an instance's log (admins): a local agent's output, a virtual machine's serial console; kept after the instance is gone",
      )
      .option('--tail <bytes>', 'print at most this many bytes from its end (at most 1048576)', '65536')
      .addHelpText(
        'after',
        '\nExamples:\n  tagsched-admin instance log vms-3f2a\n  tagsched-admin instance log vms-3f2a --tail 1048576 --json',
      ),
    (ctx, [name], opts) => log(ctx, name, opts as { tail: string }),
  );
  action(
    instance
      .command('stopped <name>')
      .description(
        'Records that an instance is gone (with --error: FAILED); its worker is terminated and its work re-queued',
      )
      .option('--error <text>', 'what went wrong (the provider refused it, it crashed, …)')
      .addHelpText(
        'after',
        '\nExamples:\n  tagsched-admin instance stopped cloud-3f2a\n  tagsched-admin instance stopped cloud-3f2a --error "quota exceeded"',
      ),
    (ctx, [name], opts) => stopped(ctx, name, opts),
  );
};
