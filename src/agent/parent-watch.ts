/**
 * Noticing that the process which started the agent is gone. `npx tagsched-worker` (and `npm run`)
 * runs the agent as `npm → sh -c 'tagsched-worker …' → node`: npm passes a SIGTERM or SIGINT on to
 * the `sh` alone, which dies of it without passing it on, and the agent is left running under
 * another parent. The agent watches for that change and drains as if the signal had reached it.
 */

/** How often the parent is checked, in milliseconds. */
export const PARENT_CHECK_INTERVAL_MS = 500;

/**
 * Whether the agent was started by npm (npx, npm exec, npm run): npm puts `npm_command` into the
 * environment of what it runs. Only then is the parent watched: a supervisor that starts the agent
 * directly (systemd, the local provider) delivers its signals itself, and an agent whose server was
 * killed is meant to keep running (README: the local provider).
 */
export function startedByNpm(env: NodeJS.ProcessEnv): boolean {
  return env.npm_command !== undefined;
}

/**
 * Calls `onGone` once when this process's parent changes (the parent died and the process was
 * handed to init or a subreaper); returns a function that stops watching. The timer does not keep
 * the process alive.
 */
export function watchParent(onGone: (formerParent: number) => void, intervalMs = PARENT_CHECK_INTERVAL_MS): () => void {
  const parent = process.ppid;
  const timer = setInterval(() => {
    if (process.ppid === parent) return;
    clearInterval(timer);
    onGone(parent);
  }, intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}
