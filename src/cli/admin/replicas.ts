/** The server processes of one database: who leads each duty (Query.leaders), and each process's registration (Query.serverProcesses). */
import type { Command } from 'commander';
import { renderTable } from './output.js';
import type { Ctx, Register } from './command-context.js';

interface LeaderRow {
  duty: string;
  holder: string;
  term: number;
  since: string;
  renewedAt: string;
  expiresAt: string;
  held: boolean;
}

interface ProcessRow {
  name: string;
  host: string;
  pid: number;
  startedAt: string;
  heartbeatAt: string;
  stoppedAt: string | null;
  alive: boolean;
}

const LEADERS = `query Leaders { leaders { duty holder term since renewedAt expiresAt held } }`;
const PROCESSES = `query ServerProcesses { serverProcesses { name host pid startedAt heartbeatAt stoppedAt alive } }`;

async function listLeaders(ctx: Ctx) {
  const data = await ctx.api().query<{ leaders: LeaderRow[] }>(LEADERS);
  if (ctx.out.json) return ctx.out.writeJson(data);
  if (!data.leaders.length) return ctx.out.line('No duty has been led yet (no server process has started one).');
  ctx.out.write(
    renderTable(ctx.out, data.leaders, [
      { header: 'DUTY', value: (l) => l.duty },
      { header: 'LEADER', value: (l) => (l.held ? l.holder : `none (last: ${l.holder})`) },
      { header: 'TERM', value: (l) => String(l.term), align: 'right' },
      { header: 'SINCE', value: (l) => l.since },
      { header: 'EXPIRES', value: (l) => l.expiresAt },
    ]),
  );
}

async function listProcesses(ctx: Ctx) {
  const data = await ctx.api().query<{ serverProcesses: ProcessRow[] }>(PROCESSES);
  if (ctx.out.json) return ctx.out.writeJson(data);
  ctx.out.write(
    renderTable(ctx.out, data.serverProcesses, [
      { header: 'NAME', value: (p) => p.name },
      { header: 'HOST', value: (p) => p.host },
      { header: 'PID', value: (p) => String(p.pid), align: 'right' },
      { header: 'STATE', value: (p) => (p.stoppedAt ? 'stopped' : p.alive ? 'alive' : 'silent') },
      { header: 'STARTED', value: (p) => p.startedAt },
      { header: 'LAST HEARTBEAT', value: (p) => p.heartbeatAt },
    ]),
  );
}

export const registerReplicaCommands: Register = (program: Command, action) => {
  action(
    program
      .command('leaders')
      .description('Who leads each duty that one server process does for all (admins)')
      .addHelpText('after', '\nExamples:\n  tagsched-admin leaders\n  tagsched-admin leaders --json'),
    (ctx) => listLeaders(ctx),
  );
  action(
    program
      .command('processes')
      .description('The server processes registered on this database, with their last heartbeat (admins)')
      .addHelpText('after', '\nExamples:\n  tagsched-admin processes'),
    (ctx) => listProcesses(ctx),
  );
};
