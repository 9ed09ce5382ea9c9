/**
 * Creating and changing `qemu` pools through the API: a pool names a registered image whose disk
 * image is in TAGSCHED_QEMU_IMAGE_DIR with the manifest's size, and a size the host can give; every
 * problem is named at once, nothing written. The machines boot in test/images/boot.test.ts.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Manifest } from '../../src/core/manifest-format.js';
import { freeBytes } from '../../src/providers/qemu.js';
import { missingPrograms } from '../../src/providers/qemu-vm.js';
import { useTestApp } from '../helpers/app.js';
import { ERROR_FIELDS, expectResult, snapshot } from '../helpers/fixtures.js';
import { imageManifest } from '../helpers/image-manifest.js';

const imageDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tagsched-qemu-pools-'));
fs.writeFileSync(path.join(imageDir, 'vm-image.qcow2'), 'a qcow2 file of 25 bytes\n');
// Made by the first launch: a pool's disk is judged by the free space of the directory it will be in.
const stateDir = path.join(imageDir, 'state', 'qemu');
const t = useTestApp({ providers: { qemuImageDir: imageDir, qemuStateDir: stateDir } });

const REGISTER = `mutation($m: JSON!) { registerWorkerImage(input: { manifest: $m }) { __typename ${ERROR_FIELDS} } }`;
const POOL = `mutation($i: WorkerPoolInput!) { createWorkerPool(input: $i) { __typename ... on WorkerPool { name providerType specifications { image cpuCount memoryGib diskGib } }
  ${ERROR_FIELDS} ... on InputError { problems { code path message } } } }`;
const UPDATE = `mutation($i: WorkerPoolInput!) { updateWorkerPool(input: $i) { __typename ... on WorkerPool { name maxActiveInstances } ${ERROR_FIELDS} ... on InputError { problems { path message } } } }`;

/** A manifest with a bootable qcow2 disk image of `bytes`. */
function bootable(name: string, bytes: number): Manifest {
  const m = imageManifest(name);
  return {
    ...m,
    files: { ...m.files, diskImage: { path: `${name}.qcow2`, bytes, sha256: 'c'.repeat(64) } },
    boot: {
      format: 'qcow2',
      diskBytes: 2 * 2 ** 30,
      kernel: '6.12.118+deb13-cloud-amd64',
      bootModes: ['bios', 'uefi'],
      partitions: [{ number: 3, name: 'root', type: 'linux', offsetBytes: 2 ** 20, bytes: 2 * 2 ** 30 - 2 ** 21 }],
      rootUuid: '0f0e0d0c-0b0a-0908-0706-050403020100',
      cloudInitDatasources: ['NoCloud', 'Ec2', 'Hetzner', 'None'],
    },
  };
}

// Every problem but the host's programs, which .ci/run installs (each a problem of its own, named with its package).
const poolProblems = (r: Record<string, unknown>) =>
  (r.problems as { path: string; message: string }[]).filter((p) => !p.message.includes('programs on the server'));

describe('qemu pools', () => {
  it('are made from an image whose disk image is in the image directory, with the size asked for', async () => {
    await expectResult(t, 'WorkerImage', REGISTER, { m: bootable('vm-image', 25) });
    const input = {
      i: {
        name: 'vms',
        providerType: 'qemu',
        specifications: { image: 'vm-image', cpuCount: 1, memoryGib: 1, diskGib: 4 },
      },
    };
    const missing = missingPrograms();
    if (missing.length) {
      // A host without QEMU's programs: the pool is refused, naming each with its Debian package.
      const refused = await expectResult(t, 'InputError', POOL, input);
      expect(refused.problems).toEqual([
        { code: 'INVALID_INPUT', path: 'input.providerType', message: expect.stringContaining(missing.join(', ')) },
      ]);
      return;
    }
    const pool = await expectResult(t, 'WorkerPool', POOL, input);
    expect(pool).toMatchObject({
      providerType: 'qemu',
      specifications: { image: 'vm-image', cpuCount: 1, memoryGib: 1, diskGib: 4 },
    });
    // A change that leaves the specifications is judged with the image the pool names.
    expect(await expectResult(t, 'WorkerPool', UPDATE, { i: { name: 'vms', maxActiveInstances: 3 } })).toMatchObject({
      maxActiveInstances: 3,
    });
  });

  it('refuse, naming every problem at once and writing nothing, what QEMU cannot do here', async () => {
    await expectResult(t, 'WorkerImage', REGISTER, { m: imageManifest('rootfs-only') });
    await expectResult(t, 'WorkerImage', REGISTER, { m: bootable('not-copied', 25) });
    await expectResult(t, 'WorkerImage', REGISTER, {
      m: {
        ...bootable('vm-image-2', 26),
        files: {
          ...bootable('vm-image-2', 26).files,
          diskImage: { path: 'vm-image.qcow2', bytes: 26, sha256: 'c'.repeat(64) },
        },
      },
    });
    const before = await snapshot(t, ['worker_pool']);

    const tooBig = await expectResult(t, 'InputError', POOL, {
      i: {
        name: 'too-big',
        providerType: 'qemu',
        providerAccount: { token: 'x' },
        specifications: { image: 'rootfs-only', cpuCount: os.cpus().length + 1, memoryGib: 0.1, instanceType: 'cx22' },
      },
    });
    expect(poolProblems(tooBig)).toEqual([
      {
        code: 'INVALID_INPUT',
        path: 'input.specifications.instanceType',
        message: 'input.specifications.instanceType: is for hetzner and ec2 pools; a qemu pool does not use it',
      },
      {
        code: 'INVALID_INPUT',
        path: 'input.providerAccount',
        message: 'input.providerAccount: a qemu pool has no account: leave it out',
      },
      {
        code: 'INVALID_INPUT',
        path: 'input.specifications.cpuCount',
        message: `input.specifications.cpuCount: is ${os.cpus().length + 1}; this host has ${os.cpus().length} CPUs`,
      },
      {
        code: 'INVALID_INPUT',
        path: 'input.specifications.memoryGib',
        message: 'input.specifications.memoryGib: must be a whole number of MiB (a multiple of 1/1024), not 0.1',
      },
      {
        code: 'INVALID_INPUT',
        path: 'input.specifications.image',
        message:
          'input.specifications.image: the worker image "rootfs-only" has no disk image (build it with tagsched-image build --disk-image)',
      },
    ]);

    const cases: [Record<string, unknown>, string[]][] = [
      [{}, ['input.specifications.image: is required: a qemu pool boots the disk image of a registered worker image']],
      [
        { image: 'not-copied' },
        [
          'input.specifications.image: the disk image of "not-copied" is not in TAGSCHED_QEMU_IMAGE_DIR: copy not-copied.qcow2 there',
        ],
      ],
      [
        { image: 'vm-image-2' },
        [
          'input.specifications.image: vm-image.qcow2 in TAGSCHED_QEMU_IMAGE_DIR has 25 bytes; the manifest of "vm-image-2" says 26',
        ],
      ],
      [
        { image: 'vm-image', diskGib: 1 },
        ["input.specifications.diskGib: is 1; the image's disk is 2.00 GiB and a machine's disk cannot be smaller"],
      ],
      [
        { image: 'vm-image', diskGib: 1e6 },
        ["input.specifications.diskGib: is 1000000; a qemu machine's disk is at most 16384 GiB (16 TiB)"],
      ],
      [
        { image: 'never-registered' },
        ['input.specifications.image: no worker image "never-registered" is registered (tagsched-admin images list)'],
      ],
    ];
    for (const [specifications, messages] of cases) {
      const refused = await expectResult(t, 'InputError', POOL, {
        i: { name: 'refused', providerType: 'qemu', specifications },
      });
      expect(
        poolProblems(refused).map((p) => p.message),
        JSON.stringify(specifications),
      ).toEqual(messages);
    }
    // A disk larger than the state directory's file system has free (under the 16 TiB bound).
    const free = freeBytes(stateDir)!;
    expect(free).toBeGreaterThan(0);
    const overFree = Math.ceil(free / 2 ** 30) + 2;
    if (overFree <= 16_384) {
      const refused = await expectResult(t, 'InputError', POOL, {
        i: { name: 'refused', providerType: 'qemu', specifications: { image: 'vm-image', diskGib: overFree } },
      });
      expect(poolProblems(refused)).toEqual([
        {
          code: 'INVALID_INPUT',
          path: 'input.specifications.diskGib',
          message: expect.stringMatching(
            new RegExp(
              `^input\\.specifications\\.diskGib: is ${overFree}; the file system of TAGSCHED_QEMU_STATE_DIR, where a machine's disk grows, has \\d+\\.\\d GiB free$`,
            ),
          ),
        },
      ]);
      expect(refused.message).not.toContain(imageDir);
    }
    expect(await snapshot(t, ['worker_pool'])).toEqual(before);
  });
});
