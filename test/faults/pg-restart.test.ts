import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { describe } from 'vitest';
import { until } from './harness.js';
import { pgOutageTests } from './pg-outage.js';

// A real restart of the PostgreSQL server under load. It cuts every client of that server, so this
// file runs only when TAGSCHED_TEST_PG_RESTART=1, which `npm run test:pg-restart` sets and runs
// alone, after `npm test` (see .ci/run). It needs root (pg_ctlcluster) and a local cluster in
// /etc/postgresql/<version>/main; pg-backends.test.ts is the same test without the restart.
const enabled = process.env.TAGSCHED_TEST_PG_RESTART === '1';

function restartPostgres(): void {
  const versions = fs.readdirSync('/etc/postgresql').filter((v) => fs.existsSync(`/etc/postgresql/${v}/main`));
  if (versions.length !== 1)
    throw new Error(`expected one local PostgreSQL cluster in /etc/postgresql, found ${JSON.stringify(versions)}`);
  execFileSync('pg_ctlcluster', ['--skip-systemctl-redirect', versions[0], 'main', 'restart'], { stdio: 'inherit' });
}

describe.runIf(enabled)('PostgreSQL restarted under load', () => {
  pgOutageTests(async (f) => {
    restartPostgres();
    await until('PostgreSQL to accept connections again', async () => (await f.sql('select 1 as up'))[0].up === 1);
  });
});
