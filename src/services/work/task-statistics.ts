/**
 * Query.taskStatistics: the aggregates of a task's runs (scheduler/storage/task-statistics.ts) for whom
 * identity/visibility.ts lets see them (canSeeTaskStatistics: the task as a whole, any authenticated
 * caller; per package and architecture, admins).
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import { ERROR_CODES, ForbiddenError, InputError, UnauthenticatedError } from '../../core/errors.js';
import {
  keyString,
  readTaskStatistics,
  STATISTICS_WINDOW_DAYS,
  type TaskStatisticsSummary,
} from '../../scheduler/storage/task-statistics.js';
import type { StatisticsKey } from '../../core/tasks/statistics-key.js';
import type { Viewer } from '../identity/auth.js';
import { canSeeTaskStatistics, principalOf } from '../identity/visibility.js';

/** The longest task type, task name, package or architecture looked up; longer ones have no statistics. */
const MAX_KEY_LENGTH = 200;

export interface TaskStatisticsQuery {
  taskType: string;
  taskName: string;
  package?: string | null;
  architecture?: string | null;
  days?: number | null;
}

/** The aggregates of one task (package and architecture omitted: the task as a whole) over the last `days` days. */
export async function taskStatistics(
  em: EntityManager,
  viewer: Viewer,
  q: TaskStatisticsQuery,
): Promise<TaskStatisticsSummary> {
  const principal = principalOf(viewer);
  if (!canSeeTaskStatistics(principal, false)) throw new UnauthenticatedError();
  const key: StatisticsKey = {
    taskType: q.taskType,
    taskName: q.taskName,
    package: q.package ?? '',
    architecture: q.architecture ?? '',
  };
  for (const [field, value] of Object.entries({
    taskType: key.taskType,
    taskName: key.taskName,
    package: key.package,
    architecture: key.architecture,
  })) {
    if (value.length > MAX_KEY_LENGTH || value.includes('\0')) {
      throw new InputError(
        ERROR_CODES.INVALID_INPUT,
        `${field} must be at most ${MAX_KEY_LENGTH} characters, without NUL`,
        field,
      );
    }
  }
  // Only two kinds of key are counted: the task as a whole, and the task with its package and architecture.
  if ((key.package === '') !== (key.architecture === '')) {
    throw new InputError(
      ERROR_CODES.INVALID_INPUT,
      'package and architecture go together: give both, or neither for the task as a whole',
      key.package ? 'architecture' : 'package',
    );
  }
  const days = q.days ?? STATISTICS_WINDOW_DAYS;
  if (!Number.isSafeInteger(days) || days < 1 || days > STATISTICS_WINDOW_DAYS) {
    throw new InputError(ERROR_CODES.INVALID_INPUT, `days must be from 1 to ${STATISTICS_WINDOW_DAYS}`, 'days');
  }
  if (key.package !== '' && !canSeeTaskStatistics(principal, true)) {
    throw new ForbiddenError(
      'statistics per package and architecture are for admins: they count private workspaces\u2019 runs too',
    );
  }
  const found = await readTaskStatistics(em, [key], days);
  return found.get(keyString(key)) ?? { key, days, duration: null, memory: null, disk: null };
}
