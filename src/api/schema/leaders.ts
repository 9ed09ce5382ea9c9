import { builder } from '../builder.js';
import { listLeaders, type Leader } from '../../services/processes/leaders.js';

const LeaderRef = builder.objectRef<Leader>('Leader').implement({
  description:
    'The lease of a duty that one server process does for all (the provisioner, the periodic chores): who holds it, since when and in which term',
  fields: (t) => ({
    duty: t.exposeString('duty', {
      description: 'provisioner (cloud pools), provisioner@<host> (the host-bound pools of a host) or chores',
    }),
    holder: t.exposeString('holder', { description: 'The process that holds it (its TAGSCHED_PROCESS_NAME)' }),
    term: t.int({
      description: 'Its term: one more each time another process (or a restarted one) takes it',
      resolve: (l) => l.term,
    }),
    since: t.field({ type: 'DateTime', description: 'When this term began', resolve: (l) => l.acquiredAt }),
    renewedAt: t.field({
      type: 'DateTime',
      description: 'When its holder last renewed it',
      resolve: (l) => l.renewedAt,
    }),
    expiresAt: t.field({
      type: 'DateTime',
      description: 'When it expires unless renewed (then the next process to try takes it)',
      resolve: (l) => l.expiresAt,
    }),
    held: t.exposeBoolean('held', { description: 'Whether it has not expired: its holder leads the duty now' }),
  }),
});

builder.queryFields((t) => ({
  leaders: t.field({
    type: [LeaderRef],
    description: 'Admin: the lease of every duty that one server process does for all, by duty',
    resolve: (_r, _a, ctx) => listLeaders(ctx.em, ctx.viewer),
  }),
}));
