import { describe } from 'vitest';
import { pgOutageTests } from './pg-outage.js';

// What a PostgreSQL restart does to a client, without disturbing the other test files on the same
// server: every connection the service has to this file's database is terminated, three times under
// load (the pool's, the LISTEN connection, the NOTIFY pool's). The real restart is pg-restart.test.ts.
describe('PostgreSQL connections terminated under load', () => {
  pgOutageTests(async (f) => {
    const n = await f.terminateBackends();
    if (n === 0) throw new Error('no connection of the service to terminate');
  });
});
