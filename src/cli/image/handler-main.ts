/**
 * tagsched-handler: the task handler of worker images (bundled as dist/tagsched-handler.mjs). The
 * agent runs `node tagsched-handler.mjs TASK` with the task JSON on stdin in the run's directory;
 * this runs the tool planned by handlers.ts with its output going to the run's log. Exit codes are
 * the agent's: 0 SUCCESS, 1 FAILURE (the tool ran and failed), 2 ERROR (it could not run).
 */
import { spawn } from 'node:child_process';
import { HANDLER_ENV, planTask } from './handlers.js';

const EXIT = { success: 0, failure: 1, error: 2 } as const;

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

async function main(): Promise<number> {
  const taskName = process.argv[2];
  const suite = process.env[HANDLER_ENV.suite];
  const architecture = process.env[HANDLER_ENV.architecture];
  if (!taskName || !suite || !architecture) {
    process.stderr.write(
      `usage: ${HANDLER_ENV.suite}=SUITE ${HANDLER_ENV.architecture}=ARCH tagsched-handler TASK < task.json\n`,
    );
    return EXIT.error;
  }
  let taskData: unknown;
  try {
    taskData = (JSON.parse(await readStdin()) as { taskData?: unknown }).taskData ?? {};
  } catch (err) {
    process.stderr.write(`tagsched-handler: the task on stdin is not JSON: ${(err as Error).message}\n`);
    return EXIT.error;
  }
  const plan = planTask(taskName, taskData, { suite, architecture });
  if (plan.kind === 'refuse') {
    process.stderr.write(`tagsched-handler: ${plan.reason}\n`);
    return EXIT.error;
  }
  if (plan.kind === 'finish') return plan.success ? EXIT.success : EXIT.failure;
  process.stdout.write(`tagsched-handler: running ${plan.argv.join(' ')}\n`);
  return new Promise((resolve) => {
    const child = spawn(plan.argv[0], plan.argv.slice(1), { stdio: ['ignore', 'inherit', 'inherit'] });
    child.on('error', (err) => {
      process.stderr.write(`tagsched-handler: cannot run ${plan.argv[0]}: ${err.message}\n`);
      resolve(EXIT.error);
    });
    child.on('exit', (code, signal) => resolve(code === 0 ? EXIT.success : signal ? EXIT.error : EXIT.failure));
  });
}

// A SIGTERM to the handler's process group reaches the tool too; this process just waits for it.
main().then((code) => process.exit(code));
