import { builder } from '../builder.js';
import { HEAVY_REASONS } from '../../scheduler/rules/heavy-work.js';
import type { PlacementView } from '../../scheduler/matching/diagnosis.js';
import { PLACEMENT_RULES } from '../../scheduler/rules/placement-preference.js';
import { QUEUE_RULES, type QueuePosition } from '../../scheduler/rules/queue-order.js';
import { describedValues } from './enum-values.js';

const HeavyReasonEnum = builder.enumType('HeavyReason', {
  description:
    'Why a work request is heavy work, which goes to the largest free worker (docs/design.md: placement quality)',
  values: describedValues<(typeof HEAVY_REASONS)[keyof typeof HEAVY_REASONS]>({
    REQUIRES_LARGE: 'It requires worker:class:large (its size class, often from a task rule)',
    HISTORY: "Its task's average run over the last 30 days is at least TAGSCHED_HEAVY_TASK_SECONDS",
  }),
});

const PlacementRuleEnum = builder.enumType('PlacementRule', {
  description:
    'A rule that orders the free workers that may take a work request; the first that tells two workers apart decides',
  values: describedValues<(typeof PLACEMENT_RULES)[keyof typeof PLACEMENT_RULES]>({
    STATIC_BEFORE_POOL: 'Static workers before pool workers, so that pools can shrink',
    FASTEST_FOR_HEAVY:
      'Heavy work: the fastest host first, by its all-core speed score (worker:cpu-speed-all; a host without one last)',
    LARGEST_FOR_HEAVY:
      'Heavy work: the largest worker first (CPUs, then memory, from worker:cpu-count and worker:memory-gib)',
    SMALLEST_FOR_LIGHT:
      'Other work: the smallest worker that fits first, so that large workers stay free for heavy work',
    MOST_SPECIALISED: 'The worker that may run fewer task classes first, so that a specialist keeps its work',
    OLDEST: 'The oldest registration first',
  }),
});

const QueueRuleEnum = builder.enumType('QueueRule', {
  description: 'Why a pending request of the same class is ahead of another in the queue',
  values: describedValues<(typeof QUEUE_RULES)[keyof typeof QUEUE_RULES]>({
    HIGHER_PRIORITY: 'Its effective priority (base + adjustment) is higher',
    FAIR_SHARE:
      "The same priority and an earlier fair key, though submitted later: only its workspace's turn puts it ahead (typically another workspace's request next to a backlog)",
    AGE: 'The same priority, and submitted earlier: ahead by age, whatever the workspaces',
  }),
});

/** Which free worker a pending request would go to, and why. */
export const PlacementRef = builder.objectRef<PlacementView>('Placement').implement({
  description: 'Which free worker a pending work request would go to, and the rules that decide it',
  fields: (t) => ({
    heavy: t.exposeBoolean('heavy', {
      description: 'Whether it is heavy work: it then goes to the largest free worker, other work to the smallest',
    }),
    heavyReason: t.field({
      type: HeavyReasonEnum,
      nullable: true,
      description: 'Why it is heavy work; null when it is not',
      resolve: (p) => p.heavyReason,
    }),
    averageSeconds: t.float({
      nullable: true,
      description:
        "Its task's average run over the last 30 days, in seconds; null without history or with TAGSCHED_HEAVY_TASK_SECONDS at 0",
      resolve: (p) => p.averageSeconds,
    }),
    thresholdSeconds: t.exposeInt('thresholdSeconds', {
      description:
        'The average run from which a task is heavy work (TAGSCHED_HEAVY_TASK_SECONDS); 0: history never makes work heavy',
    }),
    rules: t.field({
      type: [PlacementRuleEnum],
      description: 'The rules that order its free workers, in the order they apply',
      resolve: (p) => [...p.rules],
    }),
    preferredWorkers: t.exposeStringList('preferredWorkers', {
      description:
        'The first few free workers that may take it (matching, available, not backed off), in order of preference: the next pass gives it to the first',
    }),
    decidedBy: t.field({
      type: PlacementRuleEnum,
      nullable: true,
      description: 'The rule that put the first preferred worker before the second; null with fewer than two',
      resolve: (p) => p.decidedBy,
    }),
  }),
});

const QueueAheadRef = builder.objectRef<QueuePosition['aheadBy'][number]>('QueueAhead').implement({
  description: 'How many pending requests are ahead for one rule',
  fields: (t) => ({
    rule: t.field({ type: QueueRuleEnum, description: 'The rule that puts them ahead', resolve: (a) => a.rule }),
    count: t.exposeInt('count', { description: 'How many pending requests' }),
  }),
});

/** Where a pending request stands in the queue of its class. */
export const QueuePositionRef = builder.objectRef<QueuePosition>('QueuePosition').implement({
  description:
    'Where a pending work request stands among the pending requests of its task class (those that could take the same workers)',
  fields: (t) => ({
    ahead: t.exposeInt('ahead', {
      description: 'Pending requests of its class ahead of it in queue order (of every workspace: counted, not named)',
    }),
    aheadBy: t.field({
      type: [QueueAheadRef],
      description: 'The same, per rule that puts them ahead, every rule in the order it applies',
      resolve: (q) => [...q.aheadBy],
    }),
  }),
});
