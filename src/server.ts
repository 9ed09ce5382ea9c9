import { buildApp } from './app.js';
import { loadConfig } from './config.js';

const app = await buildApp(loadConfig());
await app.start();

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
