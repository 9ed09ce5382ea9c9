/**
 * `demand`: the provisioning demand as a table per pool, and the unschedulable work apart; with
 * --watch, refreshed every N seconds until Ctrl-C (a clean exit, code 0). With --json --watch, one
 * JSON document a line per refresh, for scripts that follow it.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Command } from 'commander';
import { decimal } from './arguments.js';
import { AdminError, EXIT } from './exit-codes.js';
import { heading, list, renderTable, type Output } from './output.js';
import type { Ctx, Register } from './command-context.js';

/** The demand as the table and scripts read it. */
export const DEMAND = `query ProvisioningDemand {
  provisioningDemand {
    pendingTotal comingTotal hiddenUnschedulableCount
    pools {
      pool { name providerType maxActiveInstances }
      pendingRunnable pendingAssigned comingAssigned idleCompatibleSlots activeInstances startingInstances
      workersRequired launch limitedBy averageTaskSeconds stopWorkers { name } degraded lastError monthRuntimeSeconds
    }
    unschedulable { count requiredTags providedTags sampleWorkRequestIds nearest { pool workerNames missingOnWorker missingOnTask missingOnWorkerCount missingOnTaskCount } }
  }
}`;

interface PoolDemandRow {
  pool: { name: string; providerType: string; maxActiveInstances: number };
  pendingRunnable: number;
  pendingAssigned: number;
  comingAssigned: number;
  idleCompatibleSlots: number;
  activeInstances: number;
  startingInstances: number;
  workersRequired: number;
  launch: number;
  limitedBy: string[];
  averageTaskSeconds: number;
  stopWorkers: { name: string }[];
  degraded: boolean;
  lastError: string | null;
  monthRuntimeSeconds: number;
}

interface UnschedulableRow {
  count: number;
  requiredTags: string[];
  providedTags: string[];
  sampleWorkRequestIds: string[];
  /** The tag lists are null for workers whose tags the caller may not see; the counts are always there. */
  nearest: {
    pool: string | null;
    workerNames: string[];
    missingOnWorker: string[] | null;
    missingOnTask: string[] | null;
    missingOnWorkerCount: number;
    missingOnTaskCount: number;
  }[];
}

interface DemandData {
  provisioningDemand: {
    pendingTotal: number;
    comingTotal: number;
    hiddenUnschedulableCount: number;
    pools: PoolDemandRow[];
    unschedulable: UnschedulableRow[];
  };
}

/** What is missing for the nearest match of an unschedulable group, in words. */
function nearestText(group: UnschedulableRow): string {
  const n = group.nearest[0];
  if (!n) return 'no worker or pool at all';
  const who = n.pool
    ? `pool ${n.pool}`
    : n.workerNames.length
      ? n.workerNames.slice(0, 3).join(', ') + (n.workerNames.length > 3 ? ', …' : '')
      : 'workers';
  const tags = (list: string[] | null, count: number) =>
    list?.join(', ') ?? `${count} tag${count === 1 ? '' : 's'} you may not see`;
  const missing = [
    n.missingOnWorkerCount ? `lacks ${tags(n.missingOnWorker, n.missingOnWorkerCount)}` : '',
    n.missingOnTaskCount ? `requires ${tags(n.missingOnTask, n.missingOnTaskCount)}` : '',
  ]
    .filter(Boolean)
    .join('; ');
  return `${who}: ${missing}`;
}

/** The demand for people: one table of pools, one of unschedulable groups. */
export function renderDemand(out: Output, data: DemandData): string {
  const d = data.provisioningDemand;
  const coming = d.comingTotal ? `; coming (waiting only on running work): ${d.comingTotal}` : '';
  const parts = [`Pending work requests: ${d.pendingTotal}${coming}\n`, heading(out, 'Pools')];
  parts.push(
    renderTable(out, d.pools, [
      {
        header: 'POOL',
        value: (p) => `${p.pool.name}${p.degraded ? ' (!)' : ''}`,
        style: (t, p) => (p.degraded ? out.color.red(t) : t),
      },
      { header: 'RUNNABLE', value: (p) => p.pendingRunnable, align: 'right' },
      { header: 'SHARE', value: (p) => p.pendingAssigned, align: 'right' },
      { header: 'COMING', value: (p) => p.comingAssigned, align: 'right' },
      { header: 'IDLE', value: (p) => p.idleCompatibleSlots, align: 'right' },
      { header: 'ACTIVE', value: (p) => `${p.activeInstances}/${p.pool.maxActiveInstances}`, align: 'right' },
      { header: 'STARTING', value: (p) => p.startingInstances, align: 'right' },
      { header: 'NEEDED', value: (p) => p.workersRequired, align: 'right' },
      {
        header: 'LAUNCH',
        value: (p) => p.launch,
        align: 'right',
        style: (s, p) => (p.launch > 0 ? out.color.green(s) : s),
      },
      { header: 'STOP', value: (p) => list(p.stopWorkers.map((w) => w.name)), shrink: true },
      {
        header: 'LIMITED BY',
        value: (p) => list(p.limitedBy.map((l) => l.toLowerCase().replace(/_/g, '-'))),
        shrink: true,
        style: (s, p) => (p.limitedBy.length ? out.color.yellow(s) : s),
      },
      { header: 'AVG TASK', value: (p) => `${Math.round(p.averageTaskSeconds)}s`, align: 'right' },
    ]),
  );
  for (const p of d.pools.filter((x) => x.degraded))
    parts.push(
      out.color.red(
        `pool ${p.pool.name} is degraded: its launches keep failing${p.lastError ? ` (${p.lastError})` : ''}\n`,
      ),
    );
  const hidden = d.hiddenUnschedulableCount ? ` (and ${d.hiddenUnschedulableCount} you may not see)` : '';
  parts.push(heading(out, `Unschedulable: no worker and no pool could run these${hidden}`));
  parts.push(
    renderTable(out, d.unschedulable, [
      { header: 'COUNT', value: (g) => g.count, align: 'right', style: (s) => out.color.red(s) },
      { header: 'REQUIRES', value: (g) => list(g.requiredTags), shrink: true },
      { header: 'NEAREST', value: nearestText, shrink: true },
      { header: 'E.G.', value: (g) => list(g.sampleWorkRequestIds.slice(0, 3)), shrink: true },
    ]),
  );
  return parts.join('');
}

const CLEAR_SCREEN = '\u001b[2J\u001b[H';

async function demand(ctx: Ctx, opts: { watch?: string | boolean }) {
  const api = ctx.api();
  const { out, io } = ctx;
  if (opts.watch === undefined || opts.watch === false) {
    const data = await api.query<DemandData>(DEMAND);
    if (out.json) return out.writeJson(data);
    return out.write(renderDemand(out, data));
  }
  const intervalMs = (opts.watch === true ? 5 : decimal('--watch', opts.watch, 0.1)) * 1000;
  while (!io.signal.aborted) {
    try {
      const data = await api.query<DemandData>(DEMAND);
      if (out.json) {
        out.line(JSON.stringify({ at: new Date().toISOString(), ...data }));
      } else {
        const title = `Every ${intervalMs / 1000}s: tagsched-admin demand    ${new Date().toISOString().replace(/\.\d+Z$/, 'Z')}\n`;
        out.write(`${out.width !== null ? CLEAR_SCREEN : '\n'}${out.color.dim(title)}${renderDemand(out, data)}`);
      }
    } catch (err) {
      // A server that restarts does not end the watch; a refused token or a bad query does.
      if (!(err instanceof AdminError) || err.exitCode !== EXIT.unreachable) throw err;
      io.stderr.write(`tagsched-admin: ${err.message} (retrying)\n`);
    }
    try {
      await sleep(intervalMs, undefined, { signal: io.signal });
    } catch {
      break; // Ctrl-C
    }
  }
}

export const registerDemandCommands: Register = (program: Command, action) => {
  action(
    program
      .command('demand')
      .description(
        'Shows the provisioning demand: per pool, what it could run and how many instances to launch or stop; and the unschedulable work',
      )
      .option('--watch [seconds]', 'refresh every N seconds (default 5) until Ctrl-C')
      .addHelpText(
        'after',
        `
Columns: RUNNABLE pending requests the pool's template can run; SHARE what is left for it after
idle capacity and earlier pools; IDLE free slots of available compatible workers; ACTIVE instances /
the pool's maximum; STARTING instances not connected yet; NEEDED instances to serve its share
within the target latency; LAUNCH instances to start now; STOP idle pool workers past their idle
timeout; LIMITED BY what cut LAUNCH (max-active-instances, monthly-budget, cost-budget, backoff
after failed launches, rate-limit); AVG TASK the average run time of such work. A pool marked (!) is degraded: its launches
keep failing, and why is said below the table.

Examples:
  tagsched-admin demand
  tagsched-admin demand --watch 10
  tagsched-admin demand --json | jq -r '.provisioningDemand.pools[] | select(.launch > 0) | "\\(.pool.name) \\(.launch)"'`,
      ),
    (ctx, _a, opts) => demand(ctx, opts),
  );
};
