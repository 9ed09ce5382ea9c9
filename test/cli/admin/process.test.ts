/**
 * tagsched-admin as a real child process (bin/tagsched-admin.js) against the real app listening on
 * a port: login from stdin, the config file then used alone, a refused token, a server that is
 * not there, `demand --watch` ended by SIGINT, the provisioning script of docs/operating/admin-cli.md run as written
 * with jq, and a failing job's output followed while a real agent runs it.
 */
import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { EXIT } from '../../../src/cli/admin/exit-codes.js';
import { ADMIN_TOKEN, useTestApp } from '../../helpers/app.js';
import { AMD64_METADATA, ok, reportMetadata } from '../../helpers/fixtures.js';
import { closedPort, execCli, runCli, scratchDir, spawnCli } from './harness.js';

const t = useTestApp({ scheduler: { automatic: true } });
let url: string;
const WAIT_MS = 60_000;
/** Each child process starts Node with tsx (seconds on a loaded machine): tests here get minutes. */
const PROCESS_TEST_MS = 300_000;
/** Set-up steps run in-process: only what a test is about runs as a child process. */
const setUp = async (argv: string[]) => {
  const r = await runCli(url, argv, { token: ADMIN_TOKEN });
  expect(r.code, `${argv.join(' ')}: ${r.stderr}`).toBe(0);
  return r;
};

beforeAll(async () => {
  ({ url } = await t.app.start());
});

/** Polls until `check` holds, failing after a generous deadline. */
async function until(what: () => string, check: () => boolean): Promise<void> {
  const deadline = Date.now() + WAIT_MS;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('tagsched-admin as a process', () => {
  it(
    'login keeps the token from stdin in a 0600 file that later commands use; nothing prints it',
    async () => {
      const home = scratchDir();
      const env = { HOME: home, TAGSCHED_SERVER_URL: url };
      const login = await execCli(['login'], env, { stdin: `${ADMIN_TOKEN}\n` });
      expect(login.stderr).toBe('');
      expect(login.code).toBe(0);
      const file = path.join(home, '.config', 'tagsched', 'admin.json');
      expect(fs.statSync(file).mode & 0o777).toBe(0o600);
      expect(fs.statSync(path.dirname(file)).mode & 0o777).toBe(0o700);

      // Neither the URL nor the token in the environment any more: both come from the file.
      const created = await execCli(['workspace', 'create', 'debian/main'], { HOME: home });
      expect(created).toEqual({ code: 0, stdout: 'Created workspace debian/main (public).\n', stderr: '' });
      const registered = await execCli(['worker', 'register', 'build-1'], { HOME: home });
      expect(registered.code).toBe(0);
      expect(registered.stdout).toMatch(/^tsk_worker_\S+\n$/);
      const listed = await execCli(['worker', 'list', '--json'], { HOME: home });
      expect(JSON.parse(listed.stdout).workers.edges.map((e: { node: { name: string } }) => e.node.name)).toEqual([
        'build-1',
      ]);
      for (const r of [login, created, registered, listed]) expect(r.stdout + r.stderr).not.toContain(ADMIN_TOKEN);
    },
    PROCESS_TEST_MS,
  );

  it(
    'a refused token exits 2 without showing it; an absent server exits 69; a bad flag 64',
    async () => {
      const wrong = 'tsk_admin_a-wrong-token-for-the-process-test-0123';
      const refused = await execCli(['worker', 'list'], {
        HOME: scratchDir(),
        TAGSCHED_SERVER_URL: url,
        TAGSCHED_TOKEN: wrong,
      });
      expect(refused.code).toBe(EXIT.auth);
      expect(refused.stderr).toBe(
        'tagsched-admin: the bearer token is not valid [UNAUTHENTICATED]\n  the token came from TAGSCHED_TOKEN\n',
      );
      expect(refused.stdout).toBe('');

      const down = await execCli(['demand'], {
        HOME: scratchDir(),
        TAGSCHED_SERVER_URL: `http://127.0.0.1:${await closedPort()}/graphql`,
        TAGSCHED_TOKEN: ADMIN_TOKEN,
      });
      expect(down.code).toBe(EXIT.unreachable);
      expect(down.stderr).toMatch(/^tagsched-admin: cannot reach the server at .*: ECONNREFUSED\n/);

      const usage = await execCli(['worker', 'list', '--bogus'], { HOME: scratchDir() });
      expect(usage.code).toBe(EXIT.usage);
      expect(usage.stderr).toMatch(/^tagsched-admin: unknown option '--bogus'/);
    },
    PROCESS_TEST_MS,
  );

  it(
    'demand --watch refreshes until SIGINT, then exits 0 with nothing on stderr',
    async () => {
      const watch = spawnCli(['demand', '--watch', '0.3'], {
        HOME: scratchDir(),
        TAGSCHED_SERVER_URL: url,
        TAGSCHED_TOKEN: ADMIN_TOKEN,
      });
      const frames = () => (watch.stdout().match(/Every 0\.3s: tagsched-admin demand/g) ?? []).length;
      await until(
        () => `three refreshes, got: ${watch.stdout()}${watch.stderr()}`,
        () => frames() >= 3,
      );
      watch.child.kill('SIGINT');
      const r = await watch.done;
      expect(r.code).toBe(0);
      expect(r.stderr).toBe('');
      expect(r.stdout).toMatch(/Pending work requests: \d+/);
    },
    PROCESS_TEST_MS,
  );
});

describe('tagsched-admin in a pipe', () => {
  it(
    'stops quietly, exit 0, when its reader goes away (… | head -1)',
    async () => {
      const watch = spawnCli(['demand', '--watch', '0.1', '--json'], {
        HOME: scratchDir(),
        TAGSCHED_SERVER_URL: url,
        TAGSCHED_TOKEN: ADMIN_TOKEN,
      });
      await until(
        () => `a first line, got: ${watch.stdout()}${watch.stderr()}`,
        () => watch.stdout().includes('\n'),
      );
      watch.child.stdout!.destroy();
      const r = await watch.done;
      expect(r.code).toBe(0);
      expect(r.stderr).toBe('');
    },
    PROCESS_TEST_MS,
  );
});

describe('the provisioning script of docs/operating/admin-cli.md', () => {
  it(
    'launches what the demand says, records each instance, stops what it says; run again, launches nothing more',
    async () => {
      await setUp(['workspace', 'create', 'debian/ci']);
      await setUp([
        'pool',
        'create',
        'cloud',
        '--provider',
        'local',
        '--provide',
        'worker:task:worker:noop:version:1',
        '--max-active',
        '3',
        '--target-latency',
        '60',
      ]);
      for (let i = 0; i < 4; i++) await setUp(['work', 'create', '--workspace', 'debian/ci', '--task', 'noop']);
      // An idle worker of a pool with no idle time allowed: the demand says to stop it.
      await setUp([
        'pool',
        'create',
        'spare',
        '--provider',
        'local',
        '--idle-timeout',
        '0',
        '--provide',
        'worker:class:spare',
        '--handler',
        'sbuild=true',
      ]);
      const spare = (await setUp(['instance', 'create', 'spare', '--name', 'spare-1'])).stdout.trim();
      const activated = await ok(
        t,
        'mutation { activateWorker(input: { name: "spare-1" }) { ... on WorkerTokenPayload { token } ... on Error { code message } } }',
        {},
        spare,
      );
      await reportMetadata(t, activated.activateWorker.token, AMD64_METADATA);
      const demand = JSON.parse((await setUp(['demand', '--json'])).stdout);
      const byName = (name: string) =>
        demand.provisioningDemand.pools.find((p: { pool: { name: string } }) => p.pool.name === name);
      expect(byName('cloud').launch).toBe(3); // four requests, three instances at most
      expect(byName('spare').stopWorkers).toEqual([{ name: 'spare-1' }]);

      // The script as docs/operating/admin-cli.md has it, with tagsched-admin and the site's own commands on PATH.
      const readme = fs.readFileSync('docs/operating/admin-cli.md', 'utf8');
      const script = /<!-- provisioning script -->\n```sh\n([\s\S]*?)```/.exec(readme)?.[1];
      expect(script, 'docs/operating/admin-cli.md has the provisioning script').toBeDefined();
      const dir = scratchDir();
      fs.writeFileSync(path.join(dir, 'provision.sh'), script!, { mode: 0o755 });
      const bin = path.join(dir, 'bin');
      fs.mkdirSync(bin);
      fs.writeFileSync(
        path.join(bin, 'tagsched-admin'),
        `#!/bin/sh\nexec ${process.execPath} ${path.resolve('bin/tagsched-admin.js')} "$@"\n`,
        { mode: 0o755 },
      );
      const started = path.join(dir, 'started');
      const stopped = path.join(dir, 'stopped');
      // Stand for the site's cloud CLI: record what they get (the activation token on stdin), print a provider id.
      fs.writeFileSync(
        path.join(bin, 'start-instance'),
        `#!/bin/sh\nprintf '%s %s %s\\n' "$1" "$2" "$(cat)" >> ${started}\necho "prov-$2"\n`,
        { mode: 0o755 },
      );
      fs.writeFileSync(path.join(bin, 'stop-instance'), `#!/bin/sh\necho "$1" >> ${stopped}\n`, { mode: 0o755 });
      const provision = () =>
        promisify(execFile)('sh', [path.join(dir, 'provision.sh')], {
          env: {
            PATH: `${bin}:${process.env.PATH}`,
            HOME: scratchDir(),
            TAGSCHED_SERVER_URL: url,
            TAGSCHED_TOKEN: ADMIN_TOKEN,
          },
        });
      await provision();

      const lines = fs
        .readFileSync(started, 'utf8')
        .trim()
        .split('\n')
        .map((l) => l.split(' '));
      expect(lines).toHaveLength(3);
      const instances = JSON.parse(
        (await setUp(['pool', 'instances', 'cloud', '--json'])).stdout,
      ).workerPool.instances.edges.map((e: any) => e.node);
      expect(instances).toHaveLength(3);
      for (const [pool, name, token] of lines) {
        expect(pool).toBe('cloud');
        expect(instances).toContainEqual(
          expect.objectContaining({ name, state: 'LAUNCHING', providerId: `prov-${name}` }),
        );
        expect(token).toMatch(/^tsk_\S+$/);
      }
      expect(fs.readFileSync(stopped, 'utf8')).toBe('spare-1\n');
      const spareInstances = JSON.parse(
        (await setUp(['pool', 'instances', 'spare', '--json'])).stdout,
      ).workerPool.instances.edges.map((e: any) => e.node);
      expect(spareInstances).toEqual([
        expect.objectContaining({ name: 'spare-1', worker: { name: 'spare-1', status: 'INACTIVE' } }),
      ]);
      // Each token is a real activation token: the machine's agent becomes the recorded instance's worker.
      const joined = await ok(
        t,
        `mutation { activateWorker(input: { name: "${lines[0][1]}" }) { ... on WorkerTokenPayload { worker { name pool { name } } } ... on Error { code message } } }`,
        {},
        lines[0][2],
      );
      expect(joined.activateWorker.worker).toEqual({ name: lines[0][1], pool: { name: 'cloud' } });

      // A minute later: the instances are starting, so the demand asks for none and nothing more is launched.
      await provision();
      expect(fs.readFileSync(started, 'utf8').trim().split('\n')).toHaveLength(3);

      // Done with them: abort the pending requests, by the list's ids.
      const pending = JSON.parse(
        (await setUp(['work', 'list', '--status', 'pending', '--workspace', 'debian/ci', '--json'])).stdout,
      );
      for (const { node } of pending.workRequests.edges) await setUp(['work', 'abort', node.id]);
      expect(
        JSON.parse((await setUp(['work', 'list', '--status', 'pending', '--json'])).stdout).workRequests.edges,
      ).toEqual([]);
    },
    PROCESS_TEST_MS,
  );
});

describe("a failing job's output", () => {
  it(
    "work log --follow prints what a real agent's handler writes, then how it ended",
    async () => {
      const env = { HOME: scratchDir(), TAGSCHED_SERVER_URL: url, TAGSCHED_TOKEN: ADMIN_TOKEN };
      await setUp(['workspace', 'create', 'debian/logs']);
      const token = (await setUp(['worker', 'register', 'agent-1'])).stdout.trim();
      const handler = 'noop=echo configuring; sleep 1; echo "make: *** [all] Error 2" >&2; exit 1';
      const agent = spawn(
        process.execPath,
        [
          path.resolve('bin/tagsched-worker.js'),
          '--work-dir',
          path.join(scratchDir(), 'work'),
          '--log-interval',
          '0.2',
          '--handler',
          handler,
        ],
        {
          env: {
            PATH: process.env.PATH,
            TAGSCHED_SERVER_URL: url,
            TAGSCHED_WORKER_TOKEN: token,
            TAGSCHED_LOG_LEVEL: 'warn',
          },
          stdio: ['ignore', 'ignore', 'pipe'],
        },
      );
      let agentErr = '';
      agent.stderr!.on('data', (d: Buffer) => (agentErr += d.toString()));
      try {
        let status = '';
        const deadline = Date.now() + WAIT_MS;
        while (status !== 'IDLE') {
          if (Date.now() > deadline) throw new Error(`the agent did not connect (${status}): ${agentErr}`);
          await new Promise((r) => setTimeout(r, 100));
          status = (await ok(t, 'query { worker(name: "agent-1") { status } }')).worker.status;
        }
        const created = JSON.parse(
          (await setUp(['work', 'create', '--workspace', 'debian/logs', '--task', 'noop', '--json'])).stdout,
        );
        const follow = await execCli(['work', 'log', created.createWorkRequest.id, '--follow'], env);
        expect(follow.code).toBe(0);
        expect(follow.stdout).toBe('configuring\nmake: *** [all] Error 2\n');
        expect(follow.stderr).toBe(
          `(work request ${created.createWorkRequest.id}: COMPLETED FAILURE, exit code 1: configuring | make: *** [all] Error 2)\n`,
        );
        const again = await execCli(['work', 'log', created.createWorkRequest.id], env);
        expect(again.stdout).toBe(follow.stdout);
      } finally {
        const exited = new Promise((r) => agent.once('exit', r));
        agent.kill('SIGTERM');
        await exited;
      }
    },
    PROCESS_TEST_MS,
  );
});
