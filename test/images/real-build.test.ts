/**
 * A real worker image, end to end (docs/design.md: images): `tagsched-image build` runs mmdebstrap against
 * Debian's archive for a minimal image (unshare backend, sbuild task); its manifest is checked
 * against the built tree; then the agent's unit runs inside that tree, under the image's own
 * node, as its own user, with only a server URL and an activation token in
 * /etc/tagsched-worker/config (written as cloud-init would), against a real server where the
 * manifest is registered and a pool names the image (its template tags are the manifest's): it
 * activates into that pool, reports the tags the manifest promised, and runs a noop work request
 * to completion. The build is given an apt auth file (for no archive it uses), which must be in
 * neither the tree nor the manifest.
 *
 * It downloads a few hundred packages and needs root (chroot, namespaces), so it runs only when
 * TAGSCHED_TEST_IMAGE=1: `npm run test:image`, which .ci/run runs after the suite.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IMAGE_PATHS } from '../../src/cli/image/agent-files.js';
import { BUILD_AUTH_PATH } from '../../src/cli/image/build.js';
import { parseManifest, type Manifest } from '../../src/core/manifest-format.js';
import { agentConfigFile } from '../../src/providers/user-data.js';
import { until, type LogLine } from '../faults/harness.js';
import { createTestDatabase } from '../helpers/db.js';
import { httpGql, startServerProcess, type ServerProcess } from '../helpers/server-process.js';
import { startService, type StartedService } from './unit-runner.js';

const enabled = process.env.TAGSCHED_TEST_IMAGE === '1';
const ADMIN = 'tsk_admin_image-test-0123456789abcdef';
const BUILD_TIMEOUT_MS = 20 * 60_000; // a slow mirror; the build itself takes about two minutes here
const WAIT_MS = 120_000;
/** The password of the build's apt auth file, for a host no archive of the build is on: apt reads it and uses it nowhere. */
const AUTH_PASSWORD = 'kept-out-of-the-image-0123456789';

describe.runIf(enabled)('a worker image built with mmdebstrap', () => {
  const dir = enabled ? fs.mkdtempSync(path.join(os.tmpdir(), 'tagsched-image-test-')) : '';
  const tree = path.join(dir, 'tree');
  const aptAuth = path.join(dir, 'auth.conf');
  let manifest: Manifest;
  let db: Awaited<ReturnType<typeof createTestDatabase>>;
  let server: ServerProcess;
  let agent: StartedService | null = null;
  const agentLog: LogLine[] = [];
  let agentStderr = '';
  let buildSeconds = 0;

  const gql = async (query: string, variables: Record<string, unknown> = {}) => {
    const r = await httpGql(server.url, query, variables, ADMIN);
    if (r.status !== 200 || r.errors?.length) throw new Error(`${query}: ${JSON.stringify(r)}`);
    return r.data!;
  };

  beforeAll(async () => {
    const started = Date.now();
    fs.writeFileSync(aptAuth, `machine https://archive.invalid/debian login tagsched password ${AUTH_PASSWORD}\n`, {
      mode: 0o600,
    });
    const build = spawnSync(
      process.execPath,
      [
        'bin/tagsched-image.js',
        'build',
        '--enable-backends',
        'unshare',
        '--enable-tasks',
        'sbuild',
        '--output',
        dir,
        '--name',
        'test-image',
        '--disk-image',
        '--apt-auth',
        aptAuth,
      ],
      { encoding: 'utf8', timeout: BUILD_TIMEOUT_MS },
    );
    buildSeconds = (Date.now() - started) / 1000;
    if (build.status !== 0)
      throw new Error(`tagsched-image build failed (${build.status}):\n${build.stderr.slice(-4000)}`);
    process.stderr.write(
      `image built in ${buildSeconds.toFixed(0)} s\n${build.stderr
        .split('\n')
        .filter((l) => /built|root file system|tags/.test(l))
        .join('\n')}\n`,
    );
    manifest = parseManifest(JSON.parse(fs.readFileSync(path.join(dir, 'test-image.manifest.json'), 'utf8')));
    fs.mkdirSync(tree);
    execFileSync('tar', [
      '--extract',
      '--numeric-owner',
      '--preserve-permissions',
      '--file',
      path.join(dir, manifest.files.rootfs.path),
      '--directory',
      tree,
    ]);

    db = await createTestDatabase();
    server = await startServerProcess({
      DATABASE_URL: db.url,
      TAGSCHED_ADMIN_TOKEN: ADMIN,
      TAGSCHED_SECRET_KEY: 'image-test-secret-key',
      TAGSCHED_DATA_DIR: path.join(dir, 'data'),
      NODE_ENV: 'production',
      // The agent here is started by hand from the image, not by a provider.
      TAGSCHED_PROVISIONER: 'off',
    });
  }, BUILD_TIMEOUT_MS + 120_000);

  afterAll(async () => {
    const child = agent?.child;
    if (child && child.exitCode === null && child.signalCode === null) {
      const gone = new Promise((r) => child.once('exit', r));
      agent!.signal('SIGKILL');
      await gone;
    }
    await server?.stop();
    await db?.drop();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('has a manifest that matches the recipe and the built tree', () => {
    expect(manifest.recipe).toEqual({
      suite: 'trixie',
      architecture: execFileSync('dpkg', ['--print-architecture'], { encoding: 'utf8' }).trim(),
      mirror: null,
      source: null,
      enable_backends: ['unshare'],
      enable_tasks: ['sbuild'],
    });
    const arch = manifest.recipe.architecture;
    expect(manifest.tags.map((t) => t.tag)).toEqual([
      `worker:build-arch:${arch}`,
      'worker:executor:unshare',
      'worker:cap:sbuild',
      'worker:cap:mmdebstrap',
      'worker:task:worker:noop:version:1',
      'worker:task:worker:sbuild:version:1',
    ]);
    const versions = new Map(manifest.packages.map((p) => [p.name, p.version]));
    for (const name of [
      'nodejs',
      'sbuild',
      'mmdebstrap',
      'arch-test',
      'util-linux',
      'iproute2',
      'uidmap',
      'xz-utils',
      'systemd-sysv',
    ]) {
      expect(versions.get(name), `package ${name}`).toMatch(/^\S+$/);
    }
    // Every package of the manifest is in the tree's dpkg database, at that version.
    const queried = execFileSync('chroot', [tree, 'dpkg-query', '-W', '-f', '${Package} ${Version}\n'], {
      encoding: 'utf8',
    });
    const inTree = new Map(
      queried
        .trim()
        .split('\n')
        .map((l) => l.split(' ') as [string, string]),
    );
    for (const p of manifest.packages) expect(inTree.get(p.name), p.name).toBe(p.version);
    expect(fs.statSync(path.join(dir, manifest.files.rootfs.path)).size).toBe(manifest.files.rootfs.bytes);
    // Debian's own node runs the agent: no node_modules anywhere near it.
    expect(execFileSync('chroot', [tree, 'node', '--version'], { encoding: 'utf8' }).trim()).toMatch(
      /^v20\.(19|[2-9]\d)\./,
    );
    expect(fs.existsSync(path.join(tree, path.dirname(IMAGE_PATHS.agent), 'node_modules'))).toBe(false);
  });

  it('keeps the apt auth file out of the tree and the manifest', () => {
    expect(fs.existsSync(path.join(tree, BUILD_AUTH_PATH))).toBe(false);
    const manifestText = fs.readFileSync(path.join(dir, 'test-image.manifest.json'), 'utf8');
    expect(manifestText).not.toContain(AUTH_PASSWORD);
    expect(manifestText).not.toContain(aptAuth);
    const aptConf = path.join(tree, 'etc/apt/apt.conf.d/99mmdebstrap');
    if (fs.existsSync(aptConf)) expect(fs.readFileSync(aptConf, 'utf8')).not.toContain(aptAuth);
  });

  it('writes a disk image of the same tree', () => {
    const disk = manifest.files.diskImage!;
    expect(disk.path).toBe('test-image.raw');
    const image = path.join(dir, disk.path);
    expect(fs.statSync(image).size).toBe(disk.bytes);
    // The root file system of the partitioned disk (e2fsprogs reads it at its offset: FILE?offset=N).
    const root = `${image}?offset=${manifest.boot!.partitions.find((p) => p.name === 'root')!.offsetBytes}`;
    const cat = (file: string) =>
      execFileSync('debugfs', ['-R', `cat ${file}`, root], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
    expect(cat(IMAGE_PATHS.unit)).toBe(fs.readFileSync(path.join(tree, IMAGE_PATHS.unit), 'utf8'));
    expect(cat('/etc/subuid')).toBe(fs.readFileSync(path.join(tree, 'etc/subuid'), 'utf8'));
  });

  it('installs a unit that systemd accepts, enabled, reading the config file cloud-init writes', () => {
    const verify = spawnSync('chroot', [tree, 'systemd-analyze', 'verify', IMAGE_PATHS.unit], { encoding: 'utf8' });
    expect(verify.stderr).toBe('');
    expect(verify.status).toBe(0);
    expect(fs.readlinkSync(path.join(tree, 'etc/systemd/system/multi-user.target.wants/tagsched-worker.service'))).toBe(
      IMAGE_PATHS.unit,
    );
    const unit = fs.readFileSync(path.join(tree, IMAGE_PATHS.unit), 'utf8');
    expect(unit).toContain(`EnvironmentFile=${IMAGE_PATHS.config}`);
    expect(unit).toContain(`ConditionPathExists=${IMAGE_PATHS.config}`);
    // The agent runs as root, its handlers as tagsched-worker; the state file is root's alone.
    expect(unit).not.toMatch(/^User=/m);
    expect(unit).toContain('Environment=TAGSCHED_HANDLER_USER=tagsched-worker');
    expect(unit).toContain(`Environment=TAGSCHED_STATE_FILE=${IMAGE_PATHS.stateFile}`);
    // The user exists, owns its home and has subordinate ids for unshare builds.
    expect(execFileSync('chroot', [tree, 'id', '-un', 'tagsched-worker'], { encoding: 'utf8' }).trim()).toBe(
      'tagsched-worker',
    );
    expect(fs.readFileSync(path.join(tree, 'etc/subuid'), 'utf8')).toMatch(/^tagsched-worker:100000:65536$/m);
    const home = fs.statSync(path.join(tree, IMAGE_PATHS.home));
    expect(execFileSync('chroot', [tree, 'stat', '-c', '%U', IMAGE_PATHS.home], { encoding: 'utf8' }).trim()).toBe(
      'tagsched-worker',
    );
    expect(home.isDirectory()).toBe(true);
  });

  it(
    'boots as a worker with only a URL and an activation token, reports the promised tags, and runs a noop',
    async () => {
      await gql(`mutation { createWorkspace(input: { name: "debian/main" }) { __typename } }`);
      // The manifest the build wrote is registered as it is, and the pool names the image.
      const registered = await gql(
        `mutation($m: JSON!) { registerWorkerImage(input: { manifest: $m }) { __typename ... on WorkerImage { name packageCount } ... on Error { code message } } }`,
        {
          m: JSON.parse(fs.readFileSync(path.join(dir, 'test-image.manifest.json'), 'utf8')),
        },
      );
      expect(registered.registerWorkerImage).toEqual({
        __typename: 'WorkerImage',
        name: 'test-image',
        packageCount: manifest.packages.length,
      });
      const pool = await gql(
        `mutation { createWorkerPool(input: { name: "image-pool", providerType: "local", specifications: { image: "test-image" } }) {
        __typename ... on WorkerPool { specifications { image } templateProvidedTags { tag provenance source } } ... on Error { code message } } }`,
      );
      expect(pool.createWorkerPool).toMatchObject({
        __typename: 'WorkerPool',
        specifications: { image: 'test-image' },
      });
      // Its template tags are the manifest's, from the image; demand and diagnosis match work on these.
      const fromImage = pool.createWorkerPool.templateProvidedTags.filter(
        (t: { source: string }) => t.source === 'image:test-image',
      );
      expect(fromImage).toEqual(
        manifest.tags.map((t) => ({ tag: t.tag, provenance: 'ADMIN', source: 'image:test-image' })),
      );
      const activation = (
        await gql(
          `mutation { createActivationToken(input: { pool: "image-pool" }) { ... on ActivationTokenPayload { token } } }`,
        )
      ).createActivationToken.token as string;

      // What cloud-init's user data writes (src/providers/user-data.ts): root only.
      const config = path.join(tree, IMAGE_PATHS.config);
      fs.writeFileSync(
        config,
        agentConfigFile({ serverUrl: server.url, activationToken: activation, workerName: 'image-1' }),
        { mode: 0o600 },
      );
      fs.chownSync(config, 0, 0);

      agent = startService(tree, IMAGE_PATHS.unit);
      const child = agent.child;
      let rest = '';
      child.stdout!.on('data', (d: Buffer) => {
        const lines = (rest + d.toString()).split('\n');
        rest = lines.pop()!;
        for (const line of lines) if (line.trim()) agentLog.push(JSON.parse(line) as LogLine);
      });
      child.stderr!.on('data', (d: Buffer) => (agentStderr += d.toString()));
      const logged = (msg: string) => () => agentLog.find((l) => l.msg === msg);
      const context = () => `${JSON.stringify(agentLog, null, 1)}\n${agentStderr}`;

      await until(() => `the agent to activate and report: ${context()}`, logged('metadata reported'), WAIT_MS);
      expect(agentLog.find((l) => l.msg === 'activated')).toMatchObject({ worker: 'image-1' });
      // The worker token it got is kept in its state file, readable by root only, in root's own directory; handlers run as tagsched-worker.
      const state = fs.statSync(path.join(tree, IMAGE_PATHS.stateFile));
      expect(state.mode & 0o077).toBe(0);
      expect(fs.statSync(path.dirname(path.join(tree, IMAGE_PATHS.stateFile))).mode & 0o077).toBe(0);
      expect(agentLog.find((l) => l.msg === 'handlers are kept from the worker token')).toMatchObject({
        isolation: 'user',
        handlerUser: 'tagsched-worker',
      });

      const worker = (
        await gql(`{ worker(name: "image-1") { status pool { name } providedTags { tag provenance source } } }`)
      ).worker;
      expect(worker.pool.name).toBe('image-pool');
      const reported = worker.providedTags
        .filter((t: { provenance: string }) => t.provenance === 'WORKER')
        .map((t: { tag: string }) => t.tag);
      for (const { tag } of manifest.tags) expect(reported, `the manifest promised ${tag}`).toContain(tag);

      const created = await gql(
        `mutation { createWorkRequest(input: { workspace: "debian/main", taskType: "worker", taskName: "noop", taskData: {} }) { ... on WorkRequest { id } ... on Error { code message } } }`,
      );
      const id = created.createWorkRequest.id as string;
      const done = await until(
        () => `noop ${id} to complete: ${context()}`,
        async () => {
          const r = (await gql(`query($id: ID!) { workRequest(id: $id) { status result worker { name } } }`, { id }))
            .workRequest;
          return r.status === 'COMPLETED' && r;
        },
        WAIT_MS,
      );
      expect(done).toMatchObject({ result: 'SUCCESS', worker: { name: 'image-1' } });
      // The image's handler ran it, in the run directory of the agent's work directory.
      expect(fs.existsSync(path.join(tree, IMAGE_PATHS.home, 'runs', id, 'log'))).toBe(true);

      // A stop drains and exits 0, as `systemctl stop` would (SIGTERM to the agent alone: KillMode=mixed).
      const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
      agent.signal('SIGTERM');
      expect(await exited).toBe(0);
      expect(agentLog.filter((l) => l.msg === 'draining' || l.msg === 'exited').map((l) => l.msg)).toEqual([
        'draining',
        'exited',
      ]);
    },
    4 * WAIT_MS,
  );
});
