/**
 * A worker image that boots (docs/design.md: images), proven in a real virtual machine: `tagsched-image build
 * --disk-image --disk-format qcow2` makes the disk, then QEMU boots it twice, from BIOS (SeaBIOS)
 * and from UEFI (OVMF), each time on a fresh overlay bigger than the image with a NoCloud seed
 * holding the user data the provisioner sends (src/provisioner/user-data.ts), the guest able to
 * reach the test server only. Each machine's cloud-init writes the agent's config, the agent
 * activates into the image's pool, reports the manifest's tags and completes a noop; the root file
 * system has grown to the overlay, and an ACPI power-off ends QEMU. The serial consoles are kept in
 * test/artifacts/ and printed when a check fails; the figures (build time, sizes, boot to
 * connected, submit to COMPLETED) go to stderr and test/artifacts/boot-figures.json.
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
import { parseManifest, type Manifest } from '../../src/images/manifest-format.js';
import { cloudInitUserData } from '../../src/provisioner/user-data.js';
import { until } from '../faults/harness.js';
import { createTestDatabase } from '../helpers/db.js';
import { httpGql, startServerProcess, type ServerProcess } from '../helpers/server-process.js';
import { probeAccel, startVm, virtualSize, type Vm } from './qemu-vm.js';

const enabled = process.env.TAGSCHED_TEST_BOOT === '1';
const prebuilt = process.env.TAGSCHED_TEST_BOOT_IMAGE_DIR;
const ADMIN = 'tsk_admin_boot-test-0123456789abcdef';
const NAME = 'boot-image';
const BUILD_TIMEOUT_MS = 30 * 60_000; // a slow mirror on a busy machine
const BOOT_TIMEOUT_MS = 15 * 60_000; // TCG on two cores shared with other work: minutes, not seconds
const POWER_OFF_TIMEOUT_MS = 3 * 60_000;
/** The machine's disk: the overlay over the image, 2 GiB bigger than it. */
const GROWTH_BYTES = 2 * 2 ** 30;
/** The one guest address that reaches the host: the test server, as http://10.0.2.100/graphql. */
const SERVER_IN_GUEST = { guestAddress: '10.0.2.100', guestPort: 80 } as const;
const ARTIFACTS = path.resolve('test/artifacts');
/** A line the test's user data adds to the provisioner's, for the check of the grown root. */
const ROOT_MARK = 'tagsched-boot-check root-bytes';

describe.runIf(enabled)('a bootable worker image in QEMU', () => {
  const dir = enabled ? fs.mkdtempSync(path.join(os.tmpdir(), 'tagsched-boot-test-')) : '';
  const imageDir = prebuilt ?? dir;
  let manifest: Manifest;
  let image: string;
  let db: Awaited<ReturnType<typeof createTestDatabase>>;
  let server: ServerProcess;
  let accel: 'kvm' | 'tcg';
  const vms: Vm[] = [];
  const figures: Record<string, unknown> = {};

  const gql = async (query: string, variables: Record<string, unknown> = {}) => {
    const r = await httpGql(server.url, query, variables, ADMIN);
    if (r.status !== 200 || r.errors?.length) throw new Error(`${query}: ${JSON.stringify(r)}`);
    return r.data!;
  };

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
      if (build.status !== 0) throw new Error(`tagsched-image build failed (${build.status}):\n${build.stderr.slice(-4000)}`);
    }
    manifest = parseManifest(JSON.parse(fs.readFileSync(path.join(imageDir, `${NAME}.manifest.json`), 'utf8')));
    image = path.join(imageDir, manifest.files.diskImage!.path);
    Object.assign(figures, {
      format: manifest.boot?.format,
      imageFileBytes: manifest.files.diskImage?.bytes,
      diskBytes: manifest.boot?.diskBytes,
      rootfsTarBytes: manifest.files.rootfs.bytes,
      kernel: manifest.boot?.kernel,
    });
    accel = await probeAccel(image, manifest.boot!.format, dir);
    figures.accel = accel;

    db = await createTestDatabase();
    server = await startServerProcess({
      DATABASE_URL: db.url,
      TAGSCHED_ADMIN_TOKEN: ADMIN,
      TAGSCHED_SECRET_KEY: 'boot-test-secret-key',
      TAGSCHED_DATA_DIR: path.join(dir, 'data'),
      NODE_ENV: 'production',
      // The machines here are started by the test, not by a provider.
      TAGSCHED_PROVISIONER: 'off',
    });
    await gql(`mutation { createWorkspace(input: { name: "debian/main" }) { __typename } }`);
    const registered = await gql(`mutation($m: JSON!) { registerWorkerImage(input: { manifest: $m }) { __typename ... on Error { code message } } }`, {
      m: JSON.parse(fs.readFileSync(path.join(imageDir, `${NAME}.manifest.json`), 'utf8')),
    });
    expect(registered.registerWorkerImage).toEqual({ __typename: 'WorkerImage' });
    const pool = await gql(
      `mutation { createWorkerPool(input: { name: "boot-pool", providerType: "local", specifications: { image: "${NAME}" } }) { __typename ... on Error { code message } } }`,
    );
    expect(pool.createWorkerPool).toEqual({ __typename: 'WorkerPool' });
  }, BUILD_TIMEOUT_MS + 120_000);

  afterAll(async () => {
    for (const vm of vms) await vm.kill();
    await server?.stop();
    await db?.drop();
    process.stderr.write(`boot figures: ${JSON.stringify(figures)}\n`);
    if (enabled) fs.writeFileSync(path.join(ARTIFACTS, 'boot-figures.json'), `${JSON.stringify(figures, null, 2)}\n`);
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('has a manifest that says how the disk boots', () => {
    expect(manifest.boot).toMatchObject({ format: 'qcow2', bootModes: ['bios', 'uefi'], cloudInitDatasources: ['NoCloud', 'Ec2', 'Hetzner', 'None'] });
    expect(manifest.boot!.kernel).toMatch(/^\d+\.\d+\.\d+.*-cloud-amd64$/);
    expect(manifest.boot!.partitions.map((p) => p.name)).toEqual(['bios-boot', 'esp', 'root']);
    expect(virtualSize(image)).toBe(manifest.boot!.diskBytes);
    expect(fs.statSync(image).size).toBe(manifest.files.diskImage!.bytes);
    const versions = new Map(manifest.packages.map((p) => [p.name, p.version]));
    for (const name of ['cloud-init', 'cloud-guest-utils', 'grub-pc-bin', 'grub-efi-amd64-bin', 'linux-image-cloud-amd64', 'systemd-timesyncd', 'nodejs', 'sbuild']) {
      expect(versions.get(name), `package ${name}`).toMatch(/^\S+$/);
    }
    expect(versions.has('openssh-server'), 'no ssh server without keys in the recipe').toBe(false);
  });

  for (const firmware of ['bios', 'uefi'] as const) {
    it(
      `boots from ${firmware.toUpperCase()}, becomes a worker with only the provisioner's user data, completes a noop, grew its root and powers off`,
      async () => {
        const worker = `boot-${firmware}`;
        const serialLog = path.join(ARTIFACTS, `boot-${firmware}-serial.log`);
        const activation = (await gql(`mutation { createActivationToken(input: { pool: "boot-pool" }) { ... on ActivationTokenPayload { token } } }`)).createActivationToken
          .token as string;
        const hostPort = Number(new URL(server.url).port);
        const serverUrl = `http://${SERVER_IN_GUEST.guestAddress}:${SERVER_IN_GUEST.guestPort}${new URL(server.url).pathname}`;
        // The provisioner's user data, and one more command of the test's: the root's size on the console.
        const userData = `${cloudInitUserData({ serverUrl, activationToken: activation, workerName: worker })}  - [sh, -c, 'echo "${ROOT_MARK} $(df -B1 --output=size / | tail -n 1)" > /dev/console']\n`;
        const diskBytes = manifest.boot!.diskBytes + GROWTH_BYTES;
        const started = Date.now();
        const vm = await startVm({
          dir,
          image,
          imageFormat: manifest.boot!.format,
          firmware,
          accel,
          diskBytes,
          userData,
          metaData: `instance-id: ${worker}\nlocal-hostname: ${worker}\n`,
          forward: { ...SERVER_IN_GUEST, hostPort },
          serialLog,
        });
        vms.push(vm);
        try {
          const connected = await until(
            () => `${worker} to connect`,
            async () => {
              const w = (await gql(`query($n: String!) { worker(name: $n) { connectedAt status pool { name } providedTags { tag provenance } } }`, { n: worker })).worker;
              return w?.connectedAt ? w : null;
            },
            BOOT_TIMEOUT_MS,
            2_000,
          );
          figures[`${firmware}BootToConnectedSeconds`] = Math.round((Date.now() - started) / 1000);
          // The boot started the agent's unit itself: systemd found no ordering cycle to break by dropping it.
          expect(vm.serial()).not.toMatch(/ordering cycle/i);
          expect(connected.pool.name).toBe('boot-pool');
          const reported = await until(
            () => `${worker} to report its tags`,
            async () => {
              const w = (await gql(`query($n: String!) { worker(name: $n) { providedTags { tag provenance } } }`, { n: worker })).worker;
              const tags = w.providedTags.filter((t: { provenance: string }) => t.provenance === 'WORKER').map((t: { tag: string }) => t.tag as string);
              return tags.length ? tags : null;
            },
            BOOT_TIMEOUT_MS,
            1_000,
          );
          for (const { tag } of manifest.tags) expect(reported, `the manifest promised ${tag}`).toContain(tag);

          const submitted = Date.now();
          const created = await gql(
            `mutation { createWorkRequest(input: { workspace: "debian/main", taskType: "worker", taskName: "noop", taskData: {} }) { ... on WorkRequest { id } ... on Error { code message } } }`,
          );
          const id = created.createWorkRequest.id as string;
          const done = await until(
            () => `noop ${id} to complete on ${worker}`,
            async () => {
              const r = (await gql(`query($id: ID!) { workRequest(id: $id) { status result worker { name } } }`, { id })).workRequest;
              return r.status === 'COMPLETED' && r;
            },
            BOOT_TIMEOUT_MS,
            500,
          );
          figures[`${firmware}SubmitToCompletedSeconds`] = Math.round((Date.now() - submitted) / 100) / 10;
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
          vm.powerdown();
          const exit = await Promise.race([vm.exited, new Promise<null>((r) => setTimeout(() => r(null), POWER_OFF_TIMEOUT_MS))]);
          expect(exit, 'QEMU ends when the machine powers off').toEqual({ code: 0, signal: null });
          figures[`${firmware}PowerOffSeconds`] = Math.round((Date.now() - poweringOff) / 1000);
        } catch (err) {
          process.stderr.write(`\n--- serial console of ${worker} (${serialLog}) ---\n${vm.serial().slice(-20_000)}\n--- end of the console ---\n`);
          throw err;
        } finally {
          await vm.kill();
        }
      },
      3 * BOOT_TIMEOUT_MS,
    );
  }
});
