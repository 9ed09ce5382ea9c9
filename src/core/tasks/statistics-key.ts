/**
 * The key task statistics are kept and read under (scheduler/storage/task-statistics.ts): the task, and
 * the source package and architecture its own tags name. One function derives it from a request's
 * frozen tag sets, for the completion that records a run and for the analysis that reads history.
 */
import type { TagEntry } from '../tags/types.js';

/** A task, and the source package and architecture of one of its runs; '' where the task names none. */
export interface StatisticsKey {
  readonly taskType: string;
  readonly taskName: string;
  readonly package: string;
  readonly architecture: string;
}

const PACKAGE_PREFIX = 'task:source-package:';
const ARCH_PREFIX = 'worker:build-arch:';

/**
 * The first value of a tag under `prefix` that the task itself contributed (provenance system, not a
 * rule's tag), or ''.
 */
function ownValue(entries: readonly TagEntry[], prefix: string): string {
  const own = entries.find(
    (e) => e.provenance === 'system' && !e.source.startsWith('site-rule:') && e.tag.startsWith(prefix),
  );
  return own ? own.tag.slice(prefix.length) : '';
}

/**
 * The statistics key of a request: its source package from its `task:source-package:P` tag (taskData
 * `source_package`) and its architecture from its `worker:build-arch:A` tag (the environment's, the
 * taskData's `host_architecture`, or the site's default), as the analysis derived them.
 */
export function statisticsKeyOf(
  taskType: string,
  taskName: string,
  provided: readonly TagEntry[],
  required: readonly TagEntry[],
): StatisticsKey {
  return {
    taskType,
    taskName,
    package: ownValue(provided, PACKAGE_PREFIX),
    architecture: ownValue(required, ARCH_PREFIX),
  };
}

/** Whether two keys name the same task, package and architecture. */
export function sameStatisticsKey(a: StatisticsKey, b: StatisticsKey): boolean {
  return (
    a.taskType === b.taskType &&
    a.taskName === b.taskName &&
    a.package === b.package &&
    a.architecture === b.architecture
  );
}
