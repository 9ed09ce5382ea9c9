/**
 * The task handlers a worker image ships (dist/tagsched-handler.mjs, run by the agent as
 * `node tagsched-handler.mjs TASK`): the command line each task becomes, as pure code. A handler
 * validates the task's data with the task registry's own schema, runs the tool in its run directory
 * (where the tool leaves its output), and refuses with a reason what it cannot do, so that the
 * request ends ERROR with that reason in its log rather than running something else.
 */
import { findTask } from '../../core/tasks/registry.js';

/** The tasks an image has a handler for; the other tasks of a recipe bring their tools only. */
export const HANDLED_TASKS = ['noop', 'sbuild', 'autopkgtest', 'mmdebstrap'] as const;
export type HandledTask = (typeof HANDLED_TASKS)[number];

/** What a handler knows of the machine it runs on: the image's suite and architecture. */
export interface HandlerContext {
  /** The suite builds and tests run against (`trixie`): the image's own. */
  readonly suite: string;
  readonly architecture: string;
}

/** What a handler does with one task: run a command, finish with a result at once, or refuse. */
export type HandlerPlan =
  | { readonly kind: 'run'; readonly argv: readonly string[] }
  | { readonly kind: 'finish'; readonly success: boolean }
  | { readonly kind: 'refuse'; readonly reason: string };

/** The environment variables of image.env that give a handler its context. */
export const HANDLER_ENV = { suite: 'TAGSCHED_IMAGE_SUITE', architecture: 'TAGSCHED_IMAGE_ARCHITECTURE' } as const;

/** Whether `name` is a task an image can handle. */
export function isHandledTask(name: string): name is HandledTask {
  return (HANDLED_TASKS as readonly string[]).includes(name);
}

const refuse = (reason: string): HandlerPlan => ({ kind: 'refuse', reason });

/** The backends the handlers run: the image's executor for builds and tests is unshare. */
function backendRefusal(backend: unknown): HandlerPlan | null {
  if (backend === undefined || backend === 'auto' || backend === 'unshare') return null;
  return refuse(
    `backend ${String(backend)}: this image's handlers run the unshare backend only; give the worker a handler of your own for it`,
  );
}

/** The plan for one task, from its data as the server sent it (validated here with the registry's schema). */
export function planTask(taskName: string, taskData: unknown, ctx: HandlerContext): HandlerPlan {
  if (!isHandledTask(taskName)) return refuse(`this image has no handler for task ${taskName}`);
  const task = findTask('worker', taskName);
  if (!task) return refuse(`task ${taskName} is not in the task registry`);
  const parsed = task.schema.safeParse(taskData);
  if (!parsed.success) {
    return refuse(
      `invalid taskData for ${taskName}: ${parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ')}`,
    );
  }
  const data = parsed.data as Record<string, unknown>;
  switch (taskName) {
    case 'noop':
      return { kind: 'finish', success: data.result !== false };
    case 'sbuild': {
      const refusal = backendRefusal(data.backend);
      if (refusal) return refusal;
      // --verbose: off a terminal sbuild writes its build log to a file only; this copies it to the run's log.
      const argv = [
        'sbuild',
        '--verbose',
        '--chroot-mode=unshare',
        '--no-run-lintian',
        `--dist=${ctx.suite}`,
        `--arch=${String(data.host_architecture ?? ctx.architecture)}`,
      ];
      const components = data.build_components as string[] | undefined;
      if (components) {
        argv.push(components.includes('any') ? '--arch-any' : '--no-arch-any');
        argv.push(components.includes('all') ? '--arch-all' : '--no-arch-all');
        argv.push(components.includes('source') ? '--source' : '--no-source');
      }
      const profiles = data.build_profiles as string[] | undefined;
      if (profiles?.length) argv.push(`--profiles=${profiles.join(',')}`);
      argv.push(String(data.source_package));
      return { kind: 'run', argv };
    }
    case 'autopkgtest': {
      const refusal = backendRefusal(data.backend);
      if (refusal) return refusal;
      const argv = ['autopkgtest', '--output-dir=output'];
      for (const name of (data.include_tests as string[] | undefined) ?? []) argv.push(`--test-name=${name}`);
      for (const name of (data.exclude_tests as string[] | undefined) ?? []) argv.push(`--skip-test=${name}`);
      argv.push(
        String(data.source_package),
        '--',
        'unshare',
        '--release',
        ctx.suite,
        '--arch',
        String(data.host_architecture ?? ctx.architecture),
      );
      return { kind: 'run', argv };
    }
    case 'mmdebstrap': {
      const options = data.bootstrap_options as { architecture: string; variant?: string };
      const repositories = data.bootstrap_repositories as { mirror: string; suite: string; components?: string[] }[];
      const argv = ['mmdebstrap', `--architectures=${options.architecture}`];
      if (options.variant) argv.push(`--variant=${options.variant}`);
      argv.push(repositories[0].suite, 'system.tar.xz');
      for (const r of repositories) argv.push(`deb ${r.mirror} ${r.suite} ${(r.components ?? ['main']).join(' ')}`);
      return { kind: 'run', argv };
    }
  }
}
