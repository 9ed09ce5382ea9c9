/**
 * The self-contained agent, handler and admin files (dist/tagsched-worker.mjs,
 * dist/tagsched-handler.mjs, dist/tagsched-admin.mjs), built as `npm run build` builds them and
 * copied alone into a directory with no node_modules anywhere above it: --help works, the agent
 * connects to a real server and runs work through the bundled handler, and tagsched-admin reads it.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildBundles, packageOfInput, serverOnlyAmong, type BuiltBundle } from '../../src/cli/build/bundles.js';
import { ADMIN, until, type LogLine } from '../faults/harness.js';
import { createTestDatabase } from '../helpers/db.js';
import { httpGql, startServerProcess, type ServerProcess } from '../helpers/server-process.js';

const WAIT_MS = 60_000;

describe('bundle contents', () => {
  it('names the package of each input path', () => {
    expect(packageOfInput('node_modules/zod/v4/core/core.js')).toBe('zod');
    expect(packageOfInput('node_modules/@mikro-orm/core/index.js')).toBe('@mikro-orm/core');
    expect(packageOfInput('node_modules/a/node_modules/pg/lib/index.js')).toBe('pg');
    expect(packageOfInput('src/agent/main.ts')).toBeNull();
  });

  it('finds the server-only packages', () => {
    expect(
      serverOnlyAmong([
        'zod',
        'pg',
        'pg-protocol',
        '@mikro-orm/core',
        'graphql-yoga',
        'graphql-ws',
        '@pothos/core',
        'pino',
      ]),
    ).toEqual(['pg', '@mikro-orm/core', 'graphql-yoga', '@pothos/core']);
  });
});

describe('the bundled agent, alone in a directory', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tagsched-bundle-'));
  let bundles: Record<'agent' | 'handler' | 'admin', BuiltBundle>;
  let db: Awaited<ReturnType<typeof createTestDatabase>>;
  let server: ServerProcess;
  let agent: ChildProcess | null = null;
  const log: LogLine[] = [];
  let stderr = '';

  const gql = async (query: string, variables: Record<string, unknown> = {}, token = ADMIN) => {
    const r = await httpGql(server.url, query, variables, token);
    if (r.status !== 200 || r.errors?.length) throw new Error(`${query}: ${JSON.stringify(r)}`);
    return r.data!;
  };

  beforeAll(async () => {
    const built = await buildBundles(path.join(dir, 'build'));
    // Only the two files: nothing of the checkout, no node_modules here or above.
    const alone = path.join(dir, 'alone');
    fs.mkdirSync(alone);
    for (const b of Object.values(built)) fs.copyFileSync(b.file, path.join(alone, path.basename(b.file)));
    bundles = {
      agent: { ...built.agent, file: path.join(alone, path.basename(built.agent.file)) },
      handler: { ...built.handler, file: path.join(alone, path.basename(built.handler.file)) },
      admin: { ...built.admin, file: path.join(alone, path.basename(built.admin.file)) },
    };
    for (let d = alone; d !== path.dirname(d); d = path.dirname(d))
      expect(fs.existsSync(path.join(d, 'node_modules')), d).toBe(false);

    db = await createTestDatabase();
    server = await startServerProcess({
      DATABASE_URL: db.url,
      TAGSCHED_ADMIN_TOKEN: ADMIN,
      TAGSCHED_SECRET_KEY: 'bundle-test-secret-key',
      TAGSCHED_DATA_DIR: path.join(dir, 'data'),
      NODE_ENV: 'production',
    });
  });

  afterAll(async () => {
    if (agent && agent.exitCode === null && agent.signalCode === null) {
      const gone = new Promise((r) => agent!.once('exit', r));
      agent.kill('SIGKILL');
      await gone;
    }
    await server?.stop();
    await db?.drop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('holds no server-only package', () => {
    expect(serverOnlyAmong(bundles.agent.packages)).toEqual([]);
    expect(bundles.agent.packages).toEqual(expect.arrayContaining(['commander', 'graphql-ws', 'pino', 'ws', 'zod']));
    expect(bundles.handler.packages).toEqual(['zod']);
    expect(serverOnlyAmong(bundles.admin.packages)).toEqual([]);
    expect(bundles.admin.packages).toEqual(expect.arrayContaining(['commander', 'graphql-ws', 'ws']));
    // Their licenses travel with them (MIT asks for its notice to come with every copy).
    const notices = fs.readFileSync(`${path.join(dir, 'build', path.basename(bundles.agent.file))}.LICENSES`, 'utf8');
    for (const name of bundles.agent.packages)
      expect(notices).toMatch(new RegExp(`^----- ${name.replace('/', '\\/')} \\S+ \\(MIT\\) -----$`, 'm'));
  });

  it('prints --help and --version with no node_modules', () => {
    const help = spawnSync(process.execPath, [bundles.agent.file, '--help'], {
      cwd: path.dirname(bundles.agent.file),
      encoding: 'utf8',
    });
    expect(help.status).toBe(0);
    expect(help.stdout).toMatch(/^Usage: tagsched-worker \[options\]/);
    expect(help.stdout).toContain('--activation-token <token>');
    const version = spawnSync(process.execPath, [bundles.agent.file, '--version'], { encoding: 'utf8' });
    expect(version.stdout.trim()).toBe(
      (JSON.parse(fs.readFileSync('package.json', 'utf8')) as { version: string }).version,
    );
    const bad = spawnSync(process.execPath, [bundles.agent.file, '--heartbeat-interval', 'soon'], { encoding: 'utf8' });
    expect(bad.status).toBe(64);
    expect(bad.stderr).toContain(
      '--heartbeat-interval (or TAGSCHED_HEARTBEAT_INTERVAL) must be a positive number of seconds',
    );
  });

  it('connects to a real server and runs work through the bundled handler', async () => {
    await gql(`mutation { createWorkspace(input: { name: "debian/main" }) { __typename } }`);
    const token = (
      await gql(`mutation { registerWorker(input: { name: "bundled-1" }) { ... on WorkerTokenPayload { token } } }`)
    ).registerWorker.token as string;
    const handler = `${process.execPath} ${bundles.handler.file} noop`;
    agent = spawn(
      process.execPath,
      [
        bundles.agent.file,
        '--server',
        server.url,
        '--work-dir',
        path.join(dir, 'work'),
        '--handler',
        `noop=${handler}`,
      ],
      {
        cwd: path.dirname(bundles.agent.file),
        env: {
          PATH: process.env.PATH,
          TAGSCHED_WORKER_TOKEN: token,
          TAGSCHED_IMAGE_SUITE: 'trixie',
          TAGSCHED_IMAGE_ARCHITECTURE: 'amd64',
          TAGSCHED_HEARTBEAT_INTERVAL: '1',
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let rest = '';
    agent.stdout!.on('data', (d: Buffer) => {
      const lines = (rest + d.toString()).split('\n');
      rest = lines.pop()!;
      for (const line of lines) if (line.trim()) log.push(JSON.parse(line) as LogLine);
    });
    agent.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    const context = () => `${JSON.stringify(log)}\n${stderr}`;
    await until(
      () => `the bundled agent to report: ${context()}`,
      () => log.find((l) => l.msg === 'metadata reported'),
      WAIT_MS,
    );

    const submit = async (taskData: Record<string, unknown>) =>
      (
        await gql(
          `mutation($d: JSON!) { createWorkRequest(input: { workspace: "debian/main", taskType: "worker", taskName: "noop", taskData: $d }) { ... on WorkRequest { id } ... on Error { code message } } }`,
          { d: taskData },
        )
      ).createWorkRequest.id as string;
    const finished = (id: string) =>
      until(
        () => `request ${id} to complete: ${context()}`,
        async () => {
          const r = (await gql(`query($id: ID!) { workRequest(id: $id) { status result worker { name } } }`, { id }))
            .workRequest;
          return r.status === 'COMPLETED' && r;
        },
        WAIT_MS,
      );
    expect(await finished(await submit({}))).toEqual({
      status: 'COMPLETED',
      result: 'SUCCESS',
      worker: { name: 'bundled-1' },
    });
    expect(await finished(await submit({ result: false }))).toEqual({
      status: 'COMPLETED',
      result: 'FAILURE',
      worker: { name: 'bundled-1' },
    });

    const exited = new Promise<number | null>((r) => agent!.once('exit', (code) => r(code)));
    agent.kill('SIGTERM');
    expect(await exited).toBe(0);
  });

  it('tagsched-admin, bundled, talks to the server with no node_modules', () => {
    const env = { PATH: process.env.PATH, HOME: dir, TAGSCHED_SERVER_URL: server.url, TAGSCHED_TOKEN: ADMIN };
    const whoami = spawnSync(process.execPath, [bundles.admin.file, 'whoami', '--json'], {
      cwd: path.dirname(bundles.admin.file),
      env,
      encoding: 'utf8',
    });
    expect(whoami.stderr).toBe('');
    expect(JSON.parse(whoami.stdout)).toEqual({ me: { username: 'admin', isAdmin: true } });
    const workers = spawnSync(process.execPath, [bundles.admin.file, 'worker', 'list'], {
      cwd: path.dirname(bundles.admin.file),
      env,
      encoding: 'utf8',
    });
    expect(workers.status).toBe(0);
    expect(workers.stdout).toMatch(/^NAME\s+TYPE\s+POOL\s+STATUS/);
    const refused = spawnSync(process.execPath, [bundles.admin.file, 'worker', 'list'], {
      env: { ...env, TAGSCHED_TOKEN: 'tsk_admin_wrong-token-0123456789abcdef' },
      encoding: 'utf8',
    });
    expect(refused.status).toBe(2);
  });
});
