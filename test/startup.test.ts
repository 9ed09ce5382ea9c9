/**
 * A start that cannot succeed says why in one line on stderr and exits 2, for every cause an operator
 * can fix; and the first admin token of an empty database is shown only once the service listens.
 */
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase } from './helpers/db.js';
import { runServerToExit, startServerProcess } from './helpers/server-process.js';
import { until } from './faults/harness.js';

/** A port something else listens on, for as long as the file's tests run. */
let holder: net.Server;
let heldPort = 0;
let db: Awaited<ReturnType<typeof createTestDatabase>>;
beforeAll(async () => {
  holder = net.createServer();
  await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
  heldPort = (holder.address() as net.AddressInfo).port;
  db = await createTestDatabase();
});
afterAll(async () => {
  holder.close();
  await db?.drop();
});

describe('a start that cannot succeed', () => {
  it.each([
    ['a PORT that is not a number', { PORT: 'abc' }, /^tagsched: PORT must be a non-negative number, got "abc"$/],
    ['a PORT out of range', { PORT: '70000' }, /^tagsched: PORT must be a whole number from 0 to 65535, got "70000"$/],
    ['a short admin token', { TAGSCHED_ADMIN_TOKEN: 'a' }, /^tagsched: TAGSCHED_ADMIN_TOKEN .*32/],
    [
      'a database nobody listens for',
      { DATABASE_URL: 'postgres://root:hunter2secret@127.0.0.1:1/x' },
      /^tagsched: cannot reach the database at postgres:\/\/root:\*\*\*@127\.0\.0\.1:1\/x \(ECONNREFUSED\)/,
    ],
    [
      'a database that refuses the user',
      { DATABASE_URL: 'postgres://no_such_role_here:hunter2secret@127.0.0.1:5432/postgres' },
      /^tagsched: the database at .* refused the connection: role "no_such_role_here" does not exist/,
    ],
  ])(
    '%s: one line, exit 2, no password',
    async (_what, env, line) => {
      const run = await runServerToExit({ PORT: '0', ...env });
      expect(run.code).toBe(2);
      const lines = run.stderr.trim().split('\n');
      expect(lines, run.stderr).toHaveLength(1);
      expect(lines[0]).toMatch(line);
      expect(run.stderr + run.stdout).not.toContain('hunter2secret');
    },
    120_000,
  );

  it('a port in use: one line, exit 2', async () => {
    const run = await runServerToExit({
      PORT: String(heldPort),
      DATABASE_URL: db.url,
      TAGSCHED_ADMIN_TOKEN: 'tsk_admin_startup-test-0123456789abcdef',
    });
    expect(run.code).toBe(2);
    expect(run.stderr.trim()).toBe(
      `tagsched: port ${heldPort} on 127.0.0.1 is already in use: stop what holds it, or set PORT`,
    );
  }, 120_000);
});

describe('the first admin token of an empty database', () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tagsched-startup-'));
  afterAll(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  const env = { DATABASE_URL: undefined, TAGSCHED_DATA_DIR: dataDir, TAGSCHED_ADMIN_TOKEN: undefined };

  it('is not shown, and not kept, when the port is in use; the next start shows one that works', async () => {
    const failed = await runServerToExit({ ...env, PORT: String(heldPort) });
    expect(failed.code).toBe(2);
    expect(failed.stderr).not.toContain('tsk_admin_');
    expect(failed.stderr.trim()).toBe(
      `tagsched: port ${heldPort} on 127.0.0.1 is already in use: stop what holds it, or set PORT`,
    );

    const next = await startServerProcess(env);
    try {
      // The banner is on stderr, the "listening" line the start waited for on stdout: two pipes, either may arrive first.
      const token = await until(
        () => `the admin token on stderr:\n${next.stderr()}`,
        () => /^\s+(tsk_admin_\S+)$/m.exec(next.stderr())?.[1],
        10_000,
        50,
      );
      expect(token, next.stderr()).toBeDefined();
      const res = await fetch(next.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
        body: JSON.stringify({ query: '{ tokens { id } }' }),
      });
      expect(res.status).toBe(200);
    } finally {
      expect(await next.stop()).toBe(0);
    }
  }, 240_000);
});
