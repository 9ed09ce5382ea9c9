/**
 * Provider stand-ins for tests that run real server processes, registered through the provider
 * registry by this module, which such a server imports first (`startServerProcess(…, preload)`).
 * Both start real agents through the local provider and misbehave in one chosen way.
 */
import fs from 'node:fs';
import type { Provider } from '../../src/providers/provider.js';
import { registerProvider } from '../../src/providers/registry.js';
import { createLocalProvider } from '../../src/providers/local.js';

// `local-crash`: launches like `local`, then, when FAULT_CRASH_AFTER_LAUNCH is set, kills its own
// server process at once: the agent runs, and the server never recorded the provider's answer.
registerProvider(
  'local-crash',
  (deps): Provider => {
    const local = createLocalProvider(deps);
    return {
      ...local,
      async launch(spec, call) {
        const answer = await local.launch(spec, call);
        if (process.env.FAULT_CRASH_AFTER_LAUNCH) process.kill(process.pid, 'SIGKILL');
        return answer;
      },
    };
  },
  { runsHandlers: true },
);

// `local-forgetful`: like `local`, but its list leaves out the instances named (one per line) in the
// file FAULT_FORGET_FILE: a provider that lost them while their agents still run.
registerProvider(
  'local-forgetful',
  (deps): Provider => {
    const local = createLocalProvider(deps);
    const forgotten = () => {
      try {
        return new Set(
          fs
            .readFileSync(process.env.FAULT_FORGET_FILE ?? '', 'utf8')
            .split('\n')
            .filter(Boolean),
        );
      } catch {
        return new Set<string>();
      }
    };
    return {
      ...local,
      async list(pool, call) {
        const gone = forgotten();
        return (await local.list(pool, call)).filter((i) => !gone.has(i.name ?? ''));
      },
    };
  },
  { runsHandlers: true },
);
