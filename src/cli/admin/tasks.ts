/** Task statistics: count, median and 95th percentile of a task's run time, peak memory and peak disk (Query.taskStatistics). */
import type { Command } from 'commander';
import { integer } from './arguments.js';
import { usageError } from './exit-codes.js';
import { renderTable } from './output.js';
import type { Ctx, Register } from './command-context.js';

interface Figure {
  count: number;
  median: number;
  p95: number;
}
interface TaskStatisticsRow {
  taskType: string;
  taskName: string;
  package: string | null;
  architecture: string | null;
  days: number;
  count: number;
  duration: Figure | null;
  memory: Figure | null;
  disk: Figure | null;
}

const FIGURE = 'count median p95';
const STATS = `query TaskStatistics($type: String!, $name: String!, $package: String, $arch: String, $days: Int) {
  taskStatistics(taskType: $type, taskName: $name, package: $package, architecture: $arch, days: $days) {
    taskType taskName package architecture days count duration { ${FIGURE} } memory { ${FIGURE} } disk { ${FIGURE} }
  }
}`;

const seconds = (s: number) =>
  s < 120 ? `${s.toFixed(1)} s` : s < 7200 ? `${(s / 60).toFixed(1)} min` : `${(s / 3600).toFixed(1)} h`;
const bytes = (b: number) => (b < 2 ** 30 ? `${(b / 2 ** 20).toFixed(1)} MiB` : `${(b / 2 ** 30).toFixed(2)} GiB`);

async function stats(ctx: Ctx, task: string, opts: { type?: string; package?: string; arch?: string; days?: string }) {
  const days = opts.days === undefined ? null : integer('--days', opts.days, 1, 30);
  if ((opts.package === undefined) !== (opts.arch === undefined))
    throw usageError('--package and --arch go together: give both, or neither for the task as a whole');
  const data = await ctx.api().query<{ taskStatistics: TaskStatisticsRow }>(STATS, {
    type: opts.type ?? 'worker',
    name: task,
    package: opts.package ?? null,
    arch: opts.arch ?? null,
    days,
  });
  if (ctx.out.json) return ctx.out.writeJson(data);
  const s = data.taskStatistics;
  const what = [s.package && `package ${s.package}`, s.architecture && `architecture ${s.architecture}`]
    .filter(Boolean)
    .join(', ');
  ctx.out.line(
    `${s.taskType}/${s.taskName}${what ? ` (${what})` : ''}: ${s.count} run${s.count === 1 ? '' : 's'} in the last ${s.days} days.`,
  );
  if (!s.count) return;
  const rows = [
    { figure: 'run time', f: s.duration, show: seconds },
    { figure: 'peak memory', f: s.memory, show: bytes },
    { figure: 'peak disk', f: s.disk, show: bytes },
  ];
  ctx.out.write(
    renderTable(ctx.out, rows, [
      { header: 'FIGURE', value: (r) => r.figure },
      { header: 'RUNS', value: (r) => String(r.f?.count ?? 0), align: 'right' },
      { header: 'MEDIAN', value: (r) => (r.f ? r.show(r.f.median) : null), align: 'right' },
      { header: 'P95', value: (r) => (r.f ? r.show(r.f.p95) : null), align: 'right' },
    ]),
  );
}

export const registerTaskCommands: Register = (program: Command, action) => {
  const task = program.command('task').description('Tasks: what their runs used');
  action(
    task
      .command('stats <task>')
      .description(
        "Count, median and 95th percentile of a task's run time, peak memory and peak disk (estimates at most 5% high)",
      )
      .option('--type <type>', 'the task type', 'worker')
      .option('--package <package>', 'one source package (with --arch; admins only)')
      .option('--arch <architecture>', 'one architecture (with --package)')
      .option('--days <n>', 'the window, 1 to 30 days (default 30)')
      .addHelpText(
        'after',
        '\nExamples:\n  tagsched-admin task stats sbuild\n  tagsched-admin task stats sbuild --package hello --arch amd64 --days 7',
      ),
    (ctx, [name], opts) => stats(ctx, name, opts),
  );
};
