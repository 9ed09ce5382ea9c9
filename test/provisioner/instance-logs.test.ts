/**
 * Instance logs with the local provider, on real processes: an agent the provisioner started and
 * stopped leaves its directory deleted but its log kept (providers/instance-logs.ts), which admins
 * read through `Instance.log`, `tagsched-admin instance log` and the pool's status page; anonymous callers and other users
 * get null, a revoked token nothing at all, and a bad tailBytes is an input error, not a 500.
 */
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { pruneInstanceLogs, readInstanceLog } from '../../src/providers/instance-logs.js';
import { ADMIN, until, useFleet } from '../faults/harness.js';
import { runCli } from '../cli/admin/harness.js';
import { killLocalAgentsAfterEach, poolInstances, PROVISIONER_ENV } from './local-fleet.js';

const f = useFleet();
killLocalAgentsAfterEach(f);

const LOG = `query($n: String!, $t: Int) { instance(name: $n) { name state log(tailBytes: $t) { text bytes truncated } } }`;

describe('instance logs', () => {
  it('keep a stopped local agent’s output for admins only, readable in the API and the CLI', async () => {
    const server = await f.server(PROVISIONER_ENV);
    const created = await f.gql(
      server.url,
      `mutation { createWorkerPool(input: { name: "logged", providerType: "local", maxActiveInstances: 1, idleTimeoutSeconds: 1, specifications: { enableTasks: ["noop"] } }) { __typename ... on Error { message } } }`,
    );
    expect(created.data?.createWorkerPool.__typename, JSON.stringify(created)).toBe('WorkerPool');
    await f.createNoop(server.url);
    const instance = await until(
      'the instance to be TERMINATED',
      async () => (await poolInstances(f, 'logged')).find((i) => i.state === 'TERMINATED'),
      120_000,
    );
    const instanceDir = path.join(f.dir, 'data', 'local-workers', 'logged', instance.name);
    await until('its directory to be deleted', () => !fs.existsSync(instanceDir), 30_000);

    // The admin reads the agent's output after it is gone: its start and its drain.
    const admin = await f.gql(server.url, LOG, { n: instance.name, t: 1024 * 1024 });
    expect(admin.errors).toBeUndefined();
    const log = admin.data!.instance.log as { text: string; bytes: number; truncated: boolean };
    expect(admin.data!.instance.state).toBe('TERMINATED');
    expect(log.text).toContain(instance.name);
    expect(log.text).toMatch(/starting/i);
    expect(log.truncated).toBe(false);
    expect(log.bytes).toBe(Buffer.byteLength(log.text));
    // A tail is the end of it.
    const tail = (await f.gql(server.url, LOG, { n: instance.name, t: 10 })).data!.instance.log;
    expect(tail).toMatchObject({ truncated: true, bytes: log.bytes });
    expect(log.text.endsWith(tail.text)).toBe(true);

    // Nobody else reads it: anonymous callers and users get null, a revoked token is refused.
    const anonymous = await f.gql(server.url, LOG, { n: instance.name }, '');
    expect(anonymous.status).toBe(200);
    expect(anonymous.data!.instance).toMatchObject({ name: instance.name, log: null });
    const user = await f.gql(
      server.url,
      `mutation { createUser(input: { username: "log-reader" }) { ... on UserTokenPayload { token } } }`,
    );
    const token = user.data!.createUser.token as string;
    expect((await f.gql(server.url, LOG, { n: instance.name }, token)).data!.instance).toMatchObject({ log: null });
    const revoked = await f.gql(server.url, `mutation { revokeToken(input: {}) { __typename } }`, {}, token);
    expect(revoked.data?.revokeToken.__typename, JSON.stringify(revoked)).not.toMatch(/Error/);
    const refused = await f.gql(server.url, LOG, { n: instance.name }, token);
    expect(refused.status).toBe(401);
    expect(JSON.stringify(refused)).not.toContain(instance.name);

    // Bad sizes are input errors; an unknown or odd name is no instance.
    for (const t of [0, -1, 1024 * 1024 + 1]) {
      const bad = await f.gql(server.url, LOG, { n: instance.name, t });
      expect(bad.status).toBe(200);
      expect(JSON.stringify(bad.errors)).toContain('INVALID_INPUT');
    }
    for (const n of ['no-such-instance', '../../etc/passwd', 'x'.repeat(10_000)]) {
      expect((await f.gql(server.url, LOG, { n })).data).toEqual({ instance: null });
    }
    // A NUL is refused as in every input, never a 500.
    const nul = await f.gql(server.url, LOG, { n: 'a\u0000b' });
    expect(nul.status).toBeLessThan(500);
    expect(nul.data?.instance ?? null).toBeNull();

    // The pool's status page links and shows it to admins only.
    const page = (who: string | null, query = '') =>
      fetch(`${server.url.replace('/graphql', '')}/-/status/pools/logged/${query}`, {
        headers: who ? { authorization: `Bearer ${who}` } : {},
      });
    const adminPage = await (await page(ADMIN, `?log=${instance.name}`)).text();
    expect(adminPage).toContain(`Log of ${instance.name}`);
    expect(adminPage).toMatch(/starting/i);
    const anonymousPage = await page(null, `?log=${instance.name}`);
    expect(anonymousPage.status).toBe(200);
    const anonymousText = await anonymousPage.text();
    expect(anonymousText).not.toContain(`Log of ${instance.name}`);
    expect(anonymousText).not.toContain('?log=');
    expect((await page(ADMIN, '?log=not-in-this-pool')).status).toBe(404);
    for (const query of ['?log=%00', `?log=${'x'.repeat(10_000)}`]) {
      const status = (await page(ADMIN, query)).status;
      expect(status, query.slice(0, 20)).toBeGreaterThanOrEqual(400);
      expect(status, query.slice(0, 20)).toBeLessThan(500);
    }

    // The CLI prints it (terminal-safe); a revoked token gets nothing; an unknown instance is not found (3).
    const cli = await runCli(server.url, ['instance', 'log', instance.name, '--tail', '1048576'], { token: ADMIN });
    expect(cli.code, cli.stderr).toBe(0);
    expect(cli.stdout).toContain(instance.name);
    const refusedCli = await runCli(server.url, ['instance', 'log', instance.name], { token });
    expect(refusedCli.code).not.toBe(0);
    expect(refusedCli.stdout).toBe('');
    const unknown = await runCli(server.url, ['instance', 'log', 'no-such-instance'], { token: ADMIN });
    expect(unknown.code).toBe(3);
  }, 180_000);

  it('are pruned after the retention, and read from their end on a character boundary', () => {
    const dir = fs.mkdtempSync(path.join(f.dir, 'logs-'));
    fs.writeFileSync(path.join(dir, 'old-1.log'), 'old');
    fs.writeFileSync(path.join(dir, 'new-1.log'), `é${'x'.repeat(9)}`);
    const tenDaysAgo = new Date(Date.now() - 10 * 86_400_000);
    fs.utimesSync(path.join(dir, 'old-1.log'), tenDaysAgo, tenDaysAgo);
    expect(pruneInstanceLogs(dir, 7 * 86_400_000)).toBe(1);
    expect(fs.readdirSync(dir)).toEqual(['new-1.log']);
    // 'é' is two bytes: a tail of 10 starts inside it and leaves it out.
    expect(readInstanceLog(dir, 'new-1', 10)).toMatchObject({ text: 'x'.repeat(9), bytes: 11, truncated: true });
    expect(readInstanceLog(dir, 'new-1', 100)).toMatchObject({ text: `é${'x'.repeat(9)}`, truncated: false });
    expect(readInstanceLog(dir, '../new-1', 100)).toBeNull();
  });
});
