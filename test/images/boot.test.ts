/**
 * A worker image that boots (docs/design.md: images), proven in real virtual machines: `tagsched-image
 * build --disk-image --disk-format qcow2` makes the disk (with the sbuild task and the unshare
 * backend), the server registers it, and:
 *
 * - a `qemu` pool that names it (src/providers/qemu.ts) boots it from BIOS when work
 *   waits: cloud-init writes the agent's config from the provisioner's user data, the agent activates
 *   and reports the manifest's tags, a noop and an sbuild request COMPLETE (the sbuild run shows sbuild
 *   and user namespaces working for the worker's user), then the pool's idle timeout stops the
 *   instance: the agent drains, the machine powers off, the instance is TERMINATED and no QEMU is left;
 *   its serial console stays readable by admins in the API;
 * - the same machinery started by the test boots it from UEFI (OVMF) on an overlay bigger than the
 *   image, and the root file system grew to it;
 * - a server that gives agents a wrong URL sees its instance FAILED by the boot timeout, the
 *   machine's console kept.
 *
 * The serial consoles are kept in test/artifacts/ and printed when a check fails; the figures (build
 * time, sizes, boot to connected, submit to COMPLETED, idle stop to TERMINATED) go to stderr and
 * test/artifacts/boot-figures.json.
 *
 * It downloads a few hundred packages, needs root and QEMU and takes many minutes, so it runs only
 * when TAGSCHED_TEST_BOOT=1: `npm run test:boot`, which .ci/run runs after the other slow checks.
 * TAGSCHED_TEST_BOOT_IMAGE_DIR=DIR boots the image already built in DIR (boot-image.*) instead of
 * building one.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseManifest, type Manifest } from '../../src/core/manifest-format.js';
import { killVm, probeAccel, readPid, virtualSize, vmRunning } from '../../src/providers/qemu-vm.js';
import { SERVER_IN_GUEST } from '../../src/providers/qemu.js';
import { cloudInitUserData } from '../../src/providers/user-data.js';
import { until } from '../faults/harness.js';
import { createTestDatabase } from '../helpers/db.js';
import { httpGql, startServerProcess, type ServerProcess } from '../helpers/server-process.js';
import { bootVm, type Vm } from './qemu-vm.js';

const enabled = process.env.TAGSCHED_TEST_BOOT === '1';
const prebuilt = process.env.TAGSCHED_TEST_BOOT_IMAGE_DIR;
const ADMIN = 'tsk_admin_boot-test-0123456789abcdef';
const NAME = 'boot-image';
const BUILD_TIMEOUT_MS = 30 * 60_000; // a slow mirror on a busy machine
const BOOT_TIMEOUT_MS = 15 * 60_000; // TCG on two cores shared with other work: minutes, not seconds
/** What a guest kernel prints when it dies: a wait for the machine ends there, not at its timeout. */
const GUEST_PANIC = /Kernel panic - not syncing/;
const POWER_OFF_TIMEOUT_MS = 3 * 60_000;
const GIB = 2 ** 30;
/** The machines' disks: 2 GiB bigger than the image. */
const GROWTH_BYTES = 2 * GIB;
/** The qemu pool's idle timeout: short, the test waits for it. */
const IDLE_TIMEOUT_SECONDS = 20;
/** The boot timeout of the server that gives agents a wrong URL. */
const WRONG_URL_BOOT_TIMEOUT_SECONDS = 60;
const ARTIFACTS = path.resolve('test/artifacts');
/** A line the UEFI test's user data adds to the provisioner's, for the check of the grown root. */
const ROOT_MARK = 'tagsched-boot-check root-bytes';

const WORK = `query($id: ID!) { workRequest(id: $id) { status result worker { name } log(limit: 1048576) { text } statistics { memoryMethod peakMemoryBytes cpuSeconds } } }`;
const INSTANCES = `query($p: String!) { workerPool(name: $p) { instances { edges { node { name state error requestedAt startedAt stoppingAt terminatedAt } } } } }`;
const INSTANCE_LOG = `query($n: String!) { instance(name: $n) { state log(tailBytes: 1048576) { text bytes } } }`;

interface InstanceNode {
  name: string;
  state: string;
  error: string | null;
  requestedAt: string;
  startedAt: string | null;
  stoppingAt: string | null;
  terminatedAt: string | null;
}

/** Every QEMU a state directory of the qemu provider records (`<state>/<pool>/<name>/`). */
function machineDirs(stateDir: string): string[] {
  if (!fs.existsSync(stateDir)) return [];
  return fs
    .readdirSync(stateDir)
    .filter((p) => !p.startsWith('.'))
    .flatMap((pool) => fs.readdirSync(path.join(stateDir, pool)).map((name) => path.join(stateDir, pool, name)));
}

/** Whether a pid is a live QEMU (a later process with the same pid is not). */
function qemuAlive(pid: number): boolean {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('qemu-system');
  } catch {
    return false;
  }
}

const seconds = (from: string | number, to: string | number) =>
  Math.round((new Date(to).getTime() - new Date(from).getTime()) / 100) / 10;

describe.runIf(enabled)('a bootable worker image in QEMU', () => {
  const dir = enabled ? fs.mkdtempSync(path.join(os.tmpdir(), 'tagsched-boot-test-')) : '';
  const imageDir = prebuilt ?? dir;
  const stateDirs = [path.join(dir, 'qemu'), path.join(dir, 'qemu-wrong-url')];
  let manifest: Manifest;
  let manifestJson: unknown;
  let image: string;
  const dbs: Awaited<ReturnType<typeof createTestDatabase>>[] = [];
  const servers: ServerProcess[] = [];
  let server: ServerProcess;
  const vms: Vm[] = [];
  const figures: Record<string, unknown> = {};

  const gqlOn = async (s: ServerProcess, query: string, variables: Record<string, unknown> = {}) => {
    const r = await httpGql(s.url, query, variables, ADMIN);
    if (r.status !== 200 || r.errors?.length) throw new Error(`${query}: ${JSON.stringify(r)}`);
    return r.data!;
  };
  const gql = (query: string, variables: Record<string, unknown> = {}) => gqlOn(server, query, variables);

  /** A server with the provisioner on and the qemu provider, its own database and state directory. */
  async function startServer(name: string, stateDir: string, env: Record<string, string>): Promise<ServerProcess> {
    const db = await createTestDatabase();
    dbs.push(db);
    const s = await startServerProcess({
      DATABASE_URL: db.url,
      TAGSCHED_ADMIN_TOKEN: ADMIN,
      TAGSCHED_SECRET_KEY: 'boot-test-secret-key',
      TAGSCHED_DATA_DIR: path.join(dir, `data-${name}`),
      NODE_ENV: 'production',
      TAGSCHED_QEMU_IMAGE_DIR: imageDir,
      TAGSCHED_QEMU_STATE_DIR: stateDir,
      TAGSCHED_PROVISIONER_INTERVAL_SECONDS: '5',
      TAGSCHED_PROVISIONER_DEBOUNCE_MS: '200',
      // The sha256 of the disk image and the KVM probe come before the first machine starts.
      TAGSCHED_PROVIDER_TIMEOUT_SECONDS: '180',
      ...env,
    });
    servers.push(s);
    await gqlOn(s, `mutation { createWorkspace(input: { name: "debian/main" }) { __typename } }`);
    const registered = await gqlOn(
      s,
      `mutation($m: JSON!) { registerWorkerImage(input: { manifest: $m }) { __typename ... on Error { code message } } }`,
      { m: manifestJson },
    );
    expect(registered.registerWorkerImage).toEqual({ __typename: 'WorkerImage' });
    return s;
  }

  const createQemuPool = async (s: ServerProcess, name: string) => {
    const diskGib = Math.ceil((manifest.boot!.diskBytes + GROWTH_BYTES) / GIB);
    const created = await gqlOn(
      s,
      `mutation($specs: PoolSpecificationsInput!) { createWorkerPool(input: { name: "${name}", providerType: "qemu", specifications: $specs, maxActiveInstances: 1, idleTimeoutSeconds: ${IDLE_TIMEOUT_SECONDS} }) { __typename ... on Error { code message } } }`,
      { specs: { image: NAME, cpuCount: Math.min(2, os.cpus().length), memoryGib: 1, diskGib } },
    );
    expect(created.createWorkerPool).toEqual({ __typename: 'WorkerPool' });
    return diskGib * GIB;
  };

  const submit = async (s: ServerProcess, taskName: string, taskData: Record<string, unknown>) => {
    const created = await gqlOn(
      s,
      `mutation($n: String!, $d: JSON!) { createWorkRequest(input: { workspace: "debian/main", taskType: "worker", taskName: $n, taskData: $d }) { ... on WorkRequest { id } ... on Error { code message } } }`,
      { n: taskName, d: taskData },
    );
    expect(created.createWorkRequest.id, JSON.stringify(created)).toBeTruthy();
    return created.createWorkRequest.id as string;
  };

  const instancesOf = async (s: ServerProcess, pool: string): Promise<InstanceNode[]> =>
    (await gqlOn(s, INSTANCES, { p: pool })).workerPool.instances.edges.map((e: { node: InstanceNode }) => e.node);

  const consoleOf = async (s: ServerProcess, name: string): Promise<string> =>
    (await gqlOn(s, INSTANCE_LOG, { n: name })).instance?.log?.text ?? '';

  beforeAll(async () => {
    fs.mkdirSync(ARTIFACTS, { recursive: true });
    if (!prebuilt) {
      const started = Date.now();
      const build = spawnSync(
        'nice',
        [
          '-n',
          '10',
          process.execPath,
          'bin/tagsched-image.js',
          'build',
          '--enable-backends',
          'unshare',
          '--enable-tasks',
          'sbuild',
          '--output',
          dir,
          '--name',
          NAME,
          '--disk-image',
          '--disk-format',
          'qcow2',
        ],
        { encoding: 'utf8', timeout: BUILD_TIMEOUT_MS },
      );
      figures.buildSeconds = Math.round((Date.now() - started) / 1000);
      fs.writeFileSync(path.join(ARTIFACTS, 'boot-build.log'), `${build.stdout}\n${build.stderr}`);
      if (build.status !== 0)
        throw new Error(`tagsched-image build failed (${build.status}):\n${build.stderr.slice(-4000)}`);
    }
    manifestJson = JSON.parse(fs.readFileSync(path.join(imageDir, `${NAME}.manifest.json`), 'utf8'));
    manifest = parseManifest(manifestJson);
    image = path.join(imageDir, manifest.files.diskImage!.path);
    Object.assign(figures, {
      format: manifest.boot?.format,
      imageFileBytes: manifest.files.diskImage?.bytes,
      diskBytes: manifest.boot?.diskBytes,
      rootfsTarBytes: manifest.files.rootfs.bytes,
      kernel: manifest.boot?.kernel,
    });
    server = await startServer('main', stateDirs[0], {
      TAGSCHED_BOOT_TIMEOUT_SECONDS: String(BOOT_TIMEOUT_MS / 1000),
      // The agent drains and the machine powers off well within this.
      TAGSCHED_STOP_GRACE_SECONDS: String(POWER_OFF_TIMEOUT_MS / 1000),
    });
  }, BUILD_TIMEOUT_MS + 300_000);

  afterAll(async () => {
    for (const vm of vms) await vm.kill();
    for (const s of servers) await s.stop();
    // Machines outlive their server (detached QEMU): none may outlive the test.
    for (const stateDir of stateDirs) for (const machine of machineDirs(stateDir)) killVm(machine);
    for (const db of dbs) await db.drop();
    process.stderr.write(`boot figures: ${JSON.stringify(figures)}\n`);
    if (enabled) fs.writeFileSync(path.join(ARTIFACTS, 'boot-figures.json'), `${JSON.stringify(figures, null, 2)}\n`);
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('has a manifest that says how the disk boots', async () => {
    expect(manifest.boot).toMatchObject({
      format: 'qcow2',
      bootModes: ['bios', 'uefi'],
      cloudInitDatasources: ['NoCloud', 'Ec2', 'Hetzner', 'None'],
    });
    expect(manifest.boot!.kernel).toMatch(/^\d+\.\d+\.\d+.*-cloud-amd64$/);
    expect(manifest.boot!.partitions.map((p) => p.name)).toEqual(['bios-boot', 'esp', 'root']);
    expect(await virtualSize(image)).toBe(manifest.boot!.diskBytes);
    expect(fs.statSync(image).size).toBe(manifest.files.diskImage!.bytes);
    const versions = new Map(manifest.packages.map((p) => [p.name, p.version]));
    for (const name of [
      'cloud-init',
      'cloud-guest-utils',
      'grub-pc-bin',
      'grub-efi-amd64-bin',
      'linux-image-cloud-amd64',
      'systemd-timesyncd',
      'nodejs',
      'sbuild',
    ]) {
      expect(versions.get(name), `package ${name}`).toMatch(/^\S+$/);
    }
    expect(versions.has('openssh-server'), 'no ssh server without keys in the recipe').toBe(false);
  });

  it(
    'a qemu pool boots it from BIOS when work waits, completes a noop and an sbuild run, and its idle timeout powers the machine off',
    async () => {
      await createQemuPool(server, 'qemu-pool');
      const submitted = Date.now();
      const noop = await submit(server, 'noop', {});
      const sbuild = await submit(server, 'sbuild', {
        source_package: 'hello',
        host_architecture: manifest.recipe.architecture,
        backend: 'unshare',
      });
      const launched = await until(
        () => 'the qemu pool to launch an instance',
        async () => (await instancesOf(server, 'qemu-pool'))[0],
        5 * 60_000,
        1_000,
      );
      const name = launched.name;
      const machine = path.join(stateDirs[0], 'qemu-pool', name);
      const pid = await until(
        () => `${name}'s pid file`,
        () => readPid(machine),
        5 * 60_000,
        500,
      );
      try {
        const running = await until(
          () => `${name} to connect`,
          async () =>
            (await instancesOf(server, 'qemu-pool')).find(
              (i) => i.name === name && (i.startedAt || i.state === 'TERMINATED' || i.state === 'FAILED'),
            ),
          BOOT_TIMEOUT_MS,
          2_000,
        );
        if (!running.startedAt)
          throw new Error(
            `${name} ended ${running.state} before it connected${GUEST_PANIC.test(await consoleOf(server, name)) ? ': its kernel panicked' : ''}`,
          );
        figures.qemuPoolBootToConnectedSeconds = seconds(running.requestedAt, running.startedAt!);
        expect(running.state).toBe('RUNNING');
        const worker = (
          await gql(`query($n: String!) { worker(name: $n) { pool { name } providedTags { tag provenance } } }`, {
            n: name,
          })
        ).worker;
        expect(worker.pool.name).toBe('qemu-pool');

        const done = await until(
          () => `the noop ${noop} to complete`,
          async () => {
            const r = (await gql(WORK, { id: noop })).workRequest;
            return r.status === 'COMPLETED' && r;
          },
          BOOT_TIMEOUT_MS,
          500,
        );
        figures.qemuPoolSubmitToNoopCompletedSeconds = seconds(submitted, Date.now());
        expect(done).toMatchObject({ result: 'SUCCESS', worker: { name } });

        // The agent found on the machine every tag its image's manifest promised (its own facts, such
        // as the CPU count, memory and further tools found, come on top).
        const reported: string[] = (
          await gql(`query($n: String!) { worker(name: $n) { providedTags { tag provenance } } }`, { n: name })
        ).worker.providedTags
          .filter((t: { provenance: string }) => t.provenance === 'WORKER')
          .map((t: { tag: string }) => t.tag);
        for (const { tag } of manifest.tags) expect(reported, `the manifest promised ${tag}`).toContain(tag);
        figures.qemuPoolReportedBeyondManifest = reported.filter((t) => !manifest.tags.some((m) => m.tag === t)).sort();

        // sbuild, run by the image's handler as the worker's user in unshare mode: no network here, so
        // it cannot make its chroot, but it gets there only after its three user-namespace steps worked
        // (unshare(CLONE_NEWUSER), `unshare --map-users` with the user's subordinate ids, and
        // sbuild-usernsexec), each of which prints its own error when it fails.
        const built = await until(
          () => `the sbuild request ${sbuild} to complete`,
          async () => {
            const r = (await gql(WORK, { id: sbuild })).workRequest;
            return r.status === 'COMPLETED' && r;
          },
          BOOT_TIMEOUT_MS,
          1_000,
        );
        figures.qemuPoolSubmitToSbuildCompletedSeconds = seconds(submitted, Date.now());
        const log = built.log.text as string;
        fs.writeFileSync(path.join(ARTIFACTS, 'boot-sbuild-run.log'), log);
        expect(built.worker.name).toBe(name);
        expect(log).toContain('tagsched-handler: running sbuild --verbose --chroot-mode=unshare');
        const version = /sbuild \(Debian sbuild\) (\S+)/.exec(log);
        expect(version, 'sbuild printed its version').not.toBeNull();
        expect(manifest.packages.find((p) => p.name === 'sbuild')!.version.startsWith(version![1])).toBe(true);
        for (const failure of [
          'E: unable to to unshare',
          'E: unshare failed',
          'invalid idmap',
          'bad exit status',
          'E: unable to access',
        ])
          expect(log).not.toContain(failure);
        expect(log).toMatch(/E: auto-creating chroot failed|E: session cannot start without chroot/);
        // Measured in a memory cgroup of its own on the guest's unified hierarchy: the image's service
        // delegates the memory controller to the agent (Delegate=memory), and Debian's kernel has memory.peak.
        expect(built.statistics).toMatchObject({ memoryMethod: 'CGROUP_V2' });
        expect(built.statistics.peakMemoryBytes).toBeGreaterThan(1024 * 1024);
        figures.qemuPoolSbuildRunStatistics = built.statistics;

        // Nothing more to do: the idle timeout stops it, the agent drains, the machine powers off.
        const ended = await until(
          () => `${name} to end after the idle timeout`,
          async () =>
            (await instancesOf(server, 'qemu-pool')).find(
              (i) => i.name === name && (i.state === 'TERMINATED' || i.state === 'FAILED'),
            ),
          IDLE_TIMEOUT_SECONDS * 1000 + POWER_OFF_TIMEOUT_MS + 60_000,
          1_000,
        );
        expect(ended).toMatchObject({ state: 'TERMINATED', error: null });
        figures.qemuPoolIdleStopToTerminatedSeconds = seconds(ended.stoppingAt!, ended.terminatedAt!);
        expect(qemuAlive(pid), 'no QEMU is left').toBe(false);
        expect(vmRunning(machine)).toBe(false);
        // Its console is kept after its directory is gone, and it shows an orderly power-off.
        await until(
          () => `${name}'s directory to be removed`,
          () => !fs.existsSync(machine),
          60_000,
          1_000,
        );
        const consoleText = await consoleOf(server, name);
        fs.writeFileSync(path.join(ARTIFACTS, 'boot-qemu-pool-serial.log'), consoleText);
        // GRUB booted the kernel: it names the image it loaded on the kernel's command line.
        expect(consoleText).toMatch(/Command line: BOOT_IMAGE=\/vmlinuz root=UUID=/);
        // systemd stopped the agent's unit (SIGTERM: the agent drains) before the machine powered off.
        const plain = consoleText.replace(/\u001b\[[0-9;]*m/g, '');
        expect(plain).toMatch(/Stopped tagsched-worker\.service/);
        expect(plain.indexOf('Stopped tagsched-worker.service')).toBeLessThan(plain.lastIndexOf('reboot: Power down'));
      } catch (err) {
        process.stderr.write(
          `\n--- serial console of ${name} ---\n${(await consoleOf(server, name).catch(() => '')).slice(-20_000)}\n--- end of the console ---\n`,
        );
        throw err;
      } finally {
        // No more machines of this pool while the next test boots its own.
        await gql(`mutation { updateWorkerPool(input: { name: "qemu-pool", enabled: false }) { __typename } }`);
        killVm(machine);
      }
    },
    3 * BOOT_TIMEOUT_MS,
  );

  it(
    'boots from UEFI with only the provisioner user data, completes a noop, grew its root to the overlay and powers off',
    async () => {
      const firmware = 'uefi';
      const worker = `boot-${firmware}`;
      const serialLog = path.join(ARTIFACTS, `boot-${firmware}-serial.log`);
      // A pool of machines started by the test (none by the provisioner: at most 0 instances).
      const pool = await gql(
        `mutation { createWorkerPool(input: { name: "boot-pool", providerType: "local", maxActiveInstances: 0, specifications: { image: "${NAME}" } }) { __typename ... on Error { code message } } }`,
      );
      expect(pool.createWorkerPool).toEqual({ __typename: 'WorkerPool' });
      const activation = (
        await gql(
          `mutation { createActivationToken(input: { pool: "boot-pool" }) { ... on ActivationTokenPayload { token } } }`,
        )
      ).createActivationToken.token as string;
      const serverUrl = new URL(server.url);
      const userData = `${cloudInitUserData({ serverUrl: `http://${SERVER_IN_GUEST.guestAddress}${serverUrl.pathname}`, activationToken: activation, workerName: worker })}  - [sh, -c, 'echo "${ROOT_MARK} $(df -B1 --output=size / | tail -n 1)" > /dev/console']\n`;
      const diskBytes = manifest.boot!.diskBytes + GROWTH_BYTES;
      const accel = await probeAccel(image, manifest.boot!.format, dir);
      figures.accel = accel;
      const started = Date.now();
      const vm = await bootVm(
        {
          dir: path.join(dir, `vm-${firmware}`),
          image,
          imageFormat: manifest.boot!.format,
          firmware,
          accel,
          cpus: Math.min(2, os.cpus().length),
          memoryMib: 1024,
          diskBytes,
          forward: { ...SERVER_IN_GUEST, hostAddress: '127.0.0.1', hostPort: Number(serverUrl.port) },
          serialLog,
        },
        { userData, metaData: `instance-id: ${worker}\nlocal-hostname: ${worker}\n` },
      );
      vms.push(vm);
      try {
        const connected = await until(
          () => `${worker} to connect`,
          async () => {
            if (GUEST_PANIC.test(vm.serial())) return { panicked: true as const };
            const w = (
              await gql(`query($n: String!) { worker(name: $n) { connectedAt pool { name } } }`, { n: worker })
            ).worker;
            return w?.connectedAt ? (w as { connectedAt: string; pool: { name: string } }) : null;
          },
          BOOT_TIMEOUT_MS,
          2_000,
        );
        if ('panicked' in connected) throw new Error(`${worker}'s kernel panicked before it connected`);
        figures[`${firmware}BootToConnectedSeconds`] = Math.round((Date.now() - started) / 1000);
        // The boot started the agent's unit itself: systemd found no ordering cycle to break by dropping it.
        expect(vm.serial()).not.toMatch(/ordering cycle/i);
        expect(connected.pool.name).toBe('boot-pool');

        const submitted = Date.now();
        const id = await submit(server, 'noop', {});
        const done = await until(
          () => `noop ${id} to complete on ${worker}`,
          async () => {
            const r = (await gql(WORK, { id })).workRequest;
            return r.status === 'COMPLETED' && r;
          },
          BOOT_TIMEOUT_MS,
          500,
        );
        figures[`${firmware}SubmitToCompletedSeconds`] = seconds(submitted, Date.now());
        expect(done).toMatchObject({ result: 'SUCCESS', worker: { name: worker } });

        // cloud-init grew the root partition and its file system to the overlay's size.
        const rootBytes = Number(
          (
            await until(
              () => `the root's size on ${worker}'s console`,
              () => new RegExp(`${ROOT_MARK} (\\d+)`).exec(vm.serial()),
              BOOT_TIMEOUT_MS,
              1_000,
            )
          )[1],
        );
        const rootPartition = manifest.boot!.partitions.find((p) => p.name === 'root')!;
        figures[`${firmware}RootBytes`] = rootBytes;
        expect(rootBytes).toBeGreaterThan(rootPartition.bytes + GROWTH_BYTES * 0.9);
        expect(rootBytes).toBeLessThanOrEqual(diskBytes - rootPartition.offsetBytes);

        const poweringOff = Date.now();
        await vm.powerdown();
        const exit = await Promise.race([
          vm.exited.then(() => 'exited'),
          new Promise<null>((r) => setTimeout(() => r(null), POWER_OFF_TIMEOUT_MS)),
        ]);
        expect(exit, 'QEMU ends when the machine powers off').toBe('exited');
        expect(vm.serial()).toMatch(/reboot: Power down/);
        figures[`${firmware}PowerOffSeconds`] = Math.round((Date.now() - poweringOff) / 1000);
      } catch (err) {
        process.stderr.write(
          `\n--- serial console of ${worker} (${serialLog}) ---\n${vm.serial().slice(-20_000)}\n--- end of the console ---\n`,
        );
        throw err;
      } finally {
        await vm.kill();
      }
    },
    3 * BOOT_TIMEOUT_MS,
  );

  it(
    'an instance given a wrong server URL ends FAILED by the boot timeout, its console kept and its QEMU stopped',
    async () => {
      // Port 9 (discard) on this host: nothing listens there, so the agent never reaches a server.
      const wrong = await startServer('wrong-url', stateDirs[1], {
        TAGSCHED_AGENT_SERVER_URL: 'http://127.0.0.1:9/graphql',
        TAGSCHED_BOOT_TIMEOUT_SECONDS: String(WRONG_URL_BOOT_TIMEOUT_SECONDS),
        TAGSCHED_STOP_GRACE_SECONDS: '10',
      });
      await createQemuPool(wrong, 'wrong-url-pool');
      await submit(wrong, 'noop', {});
      const launched = await until(
        () => 'an instance',
        async () => (await instancesOf(wrong, 'wrong-url-pool'))[0],
        5 * 60_000,
        1_000,
      );
      const machine = path.join(stateDirs[1], 'wrong-url-pool', launched.name);
      const pid = await until(
        () => `${launched.name}'s pid file`,
        () => readPid(machine),
        5 * 60_000,
        500,
      );
      const failed = await until(
        () => `${launched.name} to fail by the boot timeout`,
        async () =>
          (await instancesOf(wrong, 'wrong-url-pool')).find((i) => i.name === launched.name && i.state !== 'LAUNCHING'),
        WRONG_URL_BOOT_TIMEOUT_SECONDS * 1000 + 5 * 60_000,
        1_000,
      );
      // No more launches for the work that waits.
      await gqlOn(
        wrong,
        `mutation { updateWorkerPool(input: { name: "wrong-url-pool", enabled: false }) { __typename } }`,
      );
      expect(failed.state).toBe('FAILED');
      expect(failed.error).toMatch(/did not connect within 60 s/);
      // The provider was asked to stop it (ACPI, then SIGKILL after the grace period).
      await until(
        () => `${launched.name}'s QEMU to be stopped`,
        () => !qemuAlive(pid),
        3 * 60_000,
        1_000,
      );
      const consoleText = await consoleOf(wrong, launched.name);
      fs.writeFileSync(path.join(ARTIFACTS, 'boot-wrong-url-serial.log'), consoleText);
      expect(consoleText).toMatch(/Command line: BOOT_IMAGE=\/vmlinuz root=UUID=/); // it booted, and kept its console
    },
    3 * BOOT_TIMEOUT_MS,
  );
});
