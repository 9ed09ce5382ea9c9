import { buildApp, type App } from './server/app.js';
import { loadConfig, type Config } from './core/config/config.js';
import { ConfigError } from './core/config/variables.js';
import { describeStartupError } from './server/startup-errors.js';

/** Stops the process with one line on stderr when the cause is the operator's to fix, else with the error in full. */
function failedToStart(err: unknown, config: Config | null): never {
  const line = err instanceof ConfigError ? err.message : config ? describeStartupError(err, config.server) : null;
  if (line) {
    process.stderr.write(`tagsched: ${line}\n`);
    process.exit(2);
  }
  process.stderr.write(`tagsched: could not start, an unexpected error:\n${(err as Error)?.stack ?? String(err)}\n`);
  process.exit(1);
}

let config: Config;
try {
  config = loadConfig();
} catch (err) {
  failedToStart(err, null);
}
let app: App;
try {
  app = await buildApp(config);
} catch (err) {
  failedToStart(err, config);
}
try {
  await app.start();
} catch (err) {
  await app.stop().catch(() => undefined);
  failedToStart(err, config);
}

let stopping = false;
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.on(signal, () => {
    if (stopping) return;
    stopping = true;
    app.log.info({ signal }, 'stopping');
    app.stop().then(
      () => process.exit(0),
      (err: unknown) => {
        app.log.error({ err }, 'stop failed');
        process.exit(1);
      },
    );
  });
}
