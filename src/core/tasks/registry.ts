/** Every task tagsched knows; adding a task is adding its file and one line here. */
import { synchronizationPointTask } from './internal/synchronization-point.js';
import { servernoopTask } from './server/servernoop.js';
import { debsignTask } from './signing/debsign.js';
import { generatekeyTask } from './signing/generatekey.js';
import { signTask } from './signing/sign.js';
import type { CatalogTask } from '../tags/pool-image.js';
import type { TaskDefinition } from './types.js';
import { autopkgtestTask } from './worker/autopkgtest.js';
import { blhcTask } from './worker/blhc.js';
import { lintianTask } from './worker/lintian.js';
import { mmdebstrapTask } from './worker/mmdebstrap.js';
import { noopTask } from './worker/noop.js';
import { piupartsTask } from './worker/piuparts.js';
import { sbuildTask } from './worker/sbuild.js';
import { simplesystemimagebuildTask } from './worker/simplesystemimagebuild.js';
import { debianPipelineWorkflow } from './workflow/debian-pipeline.js';
import { sbuildWorkflow } from './workflow/sbuild.js';

/** The registry: a task is identified by its type and name together (sbuild is both a worker task and a workflow). */
export const TASKS: readonly TaskDefinition[] = [
  sbuildTask,
  autopkgtestTask,
  lintianTask,
  piupartsTask,
  blhcTask,
  mmdebstrapTask,
  simplesystemimagebuildTask,
  noopTask,
  servernoopTask,
  debsignTask,
  signTask,
  generatekeyTask,
  synchronizationPointTask,
  sbuildWorkflow,
  debianPipelineWorkflow,
];

/**
 * The tasks a worker (or signing worker) runs, as pool specifications name them (`enableTasks`,
 * `handlers`): what an image built for them provides (core/tags/pool-image.ts).
 */
export const WORKER_TASK_CATALOG: readonly CatalogTask[] = TASKS.filter(
  (t) => t.type === 'worker' || t.type === 'signing',
).map((t) => ({
  type: t.type,
  name: t.name,
  version: t.version,
  tools: t.tools ?? [],
}));

/** The task of that type and name, or undefined when the registry has none. */
export function findTask(type: string, name: string): TaskDefinition | undefined {
  return TASKS.find((task) => task.type === type && task.name === name);
}
