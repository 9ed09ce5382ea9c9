import { builder } from '../builder.js';
import { listProcesses, type ProcessView } from '../../services/processes/registry.js';

const ServerProcessRef = builder.objectRef<ProcessView>('ServerProcess').implement({
  description:
    'A server process of this database, as the process registry keeps it (its heartbeat, its start and stop)',
  fields: (t) => ({
    name: t.exposeString('name', {
      description: 'Its process name (TAGSCHED_PROCESS_NAME), the same across its restarts',
    }),
    host: t.exposeString('host', { description: 'The host it runs on (TAGSCHED_HOST_NAME)' }),
    pid: t.exposeInt('pid', { description: 'Its process id on that host' }),
    startedAt: t.expose('startedAt', { type: 'DateTime', description: 'When it last started' }),
    heartbeatAt: t.expose('heartbeatAt', { type: 'DateTime', description: 'When it last wrote its heartbeat' }),
    stoppedAt: t.expose('stoppedAt', {
      type: 'DateTime',
      nullable: true,
      description: 'When it stopped cleanly; null while it runs, or when it died without stopping',
    }),
    alive: t.exposeBoolean('alive', {
      description:
        'Not stopped, and heard from within TAGSCHED_PROCESS_TIMEOUT_SECONDS; a dead process has its workers taken over by the leader',
    }),
  }),
});

builder.queryFields((t) => ({
  serverProcesses: t.field({
    type: [ServerProcessRef],
    description:
      'Admin: the server processes of this database, by name, alive or not (rows silent for 7 days are deleted; FORBIDDEN for others, UNAUTHENTICATED without a token)',
    resolve: (_r, _args, ctx) => listProcesses(ctx.em, ctx.viewer, ctx.config),
  }),
}));
