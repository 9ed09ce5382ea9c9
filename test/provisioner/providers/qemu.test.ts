/**
 * The pure parts of the qemu provider (src/providers/qemu.ts, qemu-vm.ts): QEMU's
 * arguments, the list read from pid files, the checks of a pool, where the guest's server connections
 * go, and a machine's size. The machines themselves boot in test/images/boot.test.ts (npm run test:boot).
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { Manifest } from '../../../src/core/manifest-format.js';
import { diskImageOf, guestServer, listMachines, machineSize, validateQemuPool } from '../../../src/providers/qemu.js';
import { OVMF, qemuArgs, type VmOptions } from '../../../src/providers/qemu-vm.js';

const GIB = 2 ** 30;
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tagsched-qemu-unit-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

const vm: VmOptions = {
  dir: '/var/lib/tagsched/qemu/vms/vms-1a2b',
  image: '/images/img.qcow2',
  imageFormat: 'qcow2',
  firmware: 'bios',
  accel: 'tcg',
  cpus: 2,
  memoryMib: 1536,
  diskBytes: 5 * GIB,
  forward: { guestAddress: '10.0.2.100', guestPort: 80, hostAddress: '127.0.0.1', hostPort: 4000 },
  serialLog: '/var/lib/tagsched/instance-logs/vms-1a2b.log',
  node: '/usr/bin/node',
};

/** The value after each occurrence of an option. */
const values = (args: string[], option: string) => args.flatMap((a, i) => (a === option ? [args[i + 1]] : []));

describe('QEMU arguments', () => {
  it('run a detached machine of the given size, its console in the log, its monitor on a socket, its network restricted to one forward', () => {
    const args = qemuArgs(vm);
    expect(values(args, '-accel')).toEqual(['tcg,thread=single']);
    expect(args).not.toContain('-cpu');
    expect(values(args, '-smp')).toEqual(['2']);
    expect(values(args, '-m')).toEqual(['1536']);
    expect(args).toContain('-daemonize');
    expect(values(args, '-pidfile')).toEqual(['/var/lib/tagsched/qemu/vms/vms-1a2b/qemu.pid']);
    expect(values(args, '-monitor')).toEqual(['unix:monitor.sock,server=on,wait=off']);
    expect(values(args, '-serial')).toEqual(['file:/var/lib/tagsched/instance-logs/vms-1a2b.log']);
    expect(values(args, '-drive')).toEqual([
      'file=/var/lib/tagsched/qemu/vms/vms-1a2b/overlay.qcow2,if=virtio,format=qcow2',
      'file=/var/lib/tagsched/qemu/vms/vms-1a2b/seed.vfat,if=virtio,format=raw,readonly=on',
    ]);
    expect(values(args, '-netdev')).toEqual([
      "user,id=net0,restrict=on,guestfwd=tcp:10.0.2.100:80-cmd:'/usr/bin/node' '/var/lib/tagsched/qemu/vms/vms-1a2b/tcp-pipe.mjs' '127.0.0.1' '4000'",
    ]);
    expect(args).not.toContain('-nic');
  });

  it('use KVM with the host CPU, OVMF for UEFI, and quote what QEMU and the shell would split', () => {
    const args = qemuArgs({ ...vm, accel: 'kvm', firmware: 'uefi', dir: "/srv/a,b/it's" });
    expect(values(args, '-accel')).toEqual(['kvm']);
    expect(values(args, '-cpu')).toEqual(['host']);
    const drives = values(args, '-drive');
    expect(drives[0]).toBe("file=/srv/a,,b/it's/overlay.qcow2,if=virtio,format=qcow2");
    expect(drives.slice(2)).toEqual([
      `if=pflash,format=raw,unit=0,readonly=on,file=${OVMF.code}`,
      "if=pflash,format=raw,unit=1,file=/srv/a,,b/it's/uefi-vars.fd",
    ]);
    expect(values(args, '-netdev')[0]).toContain(`'/srv/a,,b/it'\\''s/tcp-pipe.mjs'`);
  });
});

describe('the list of machines', () => {
  it('is the directories whose pid file names a live process started with that pid file', async () => {
    const state = path.join(dir, 'state');
    const machine = (name: string, pid: number, stopRequestedAt: string | null = null) => {
      const d = path.join(state, 'vms', name);
      fs.mkdirSync(d, { recursive: true });
      fs.writeFileSync(
        path.join(d, 'instance.json'),
        JSON.stringify({ name, pool: 'vms', pid, createdAt: '2026-11-26T20:00:00.000Z', stopRequestedAt }),
      );
      fs.writeFileSync(path.join(d, 'qemu.pid'), `${pid}\n`);
      return d;
    };
    // A process whose command line names its machine's pid file, as QEMU's does.
    const pidFile = path.join(state, 'vms', 'vms-live', 'qemu.pid');
    const child = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)', pidFile], { stdio: 'ignore' });
    await new Promise((r) => child.once('spawn', r));
    try {
      machine('vms-live', child.pid!);
      machine('vms-stopping', child.pid!, '2026-11-26T20:05:00.000Z'); // its pid file is not in that command line
      machine('vms-reused', process.pid); // a pid now used by another program
      const gone = spawn(process.execPath, ['-e', '']);
      await new Promise((r) => gone.once('exit', r));
      machine('vms-gone', gone.pid!);
      expect(listMachines(state, 'vms')).toEqual([
        { id: 'vms-live', name: 'vms-live', state: 'running', createdAt: new Date('2026-11-26T20:00:00.000Z') },
      ]);
      expect(listMachines(state, 'other')).toEqual([]);
    } finally {
      child.kill('SIGKILL');
    }
  });
});

function manifest(overrides: Partial<Manifest> = {}): Manifest {
  return {
    format: 1,
    name: 'img',
    createdAt: '2026-11-26T20:00:00Z',
    builtWith: { tagsched: '0.1.0', mmdebstrap: '1.5' },
    recipe: {
      suite: 'trixie',
      architecture: 'amd64',
      mirror: null,
      source: null,
      enable_backends: ['unshare'],
      enable_tasks: ['sbuild'],
    },
    files: {
      rootfs: { path: 'img.tar', bytes: 1, sha256: 'a'.repeat(64) },
      diskImage: { path: 'img.qcow2', bytes: 4, sha256: 'b'.repeat(64) },
    },
    boot: {
      format: 'qcow2',
      diskBytes: 3 * GIB,
      kernel: '6.12.0-1-cloud-amd64',
      bootModes: ['bios', 'uefi'],
      partitions: [],
      rootUuid: 'x',
      cloudInitDatasources: ['NoCloud'],
    },
    agent: { path: 'a', sha256: 'c'.repeat(64), handlers: [], tasksWithoutHandler: [] },
    packages: [],
    tags: [],
    ...overrides,
  };
}

describe('a qemu pool', () => {
  const imageDir = path.join(dir, 'images');
  fs.mkdirSync(imageDir, { recursive: true });
  fs.writeFileSync(path.join(imageDir, 'img.qcow2'), 'qcow');
  const config = { qemuImageDir: imageDir };
  // Problems of the pool itself, not of this host's programs (which .ci/run installs).
  const check = (
    specifications: Record<string, unknown>,
    image: Manifest | null = manifest(),
    account: Record<string, unknown> | null = null,
    c: { qemuImageDir: string | null } = config,
  ) =>
    validateQemuPool({ name: 'vms', specifications, account, image: image && { name: 'img', manifest: image } }, c)
      .filter((p) => !p.message.includes('programs'))
      .map((p) => p.message);

  it('is fine with an image whose disk is in the image directory and a size the host has', () => {
    expect(check({ image: 'img', cpuCount: 1, memoryGib: 0.5, diskGib: 3 })).toEqual([]);
  });

  it('names every problem at once', () => {
    expect(
      check(
        {
          image: 'img',
          cpuCount: os.cpus().length + 1,
          memoryGib: 0.3,
          diskGib: 2,
          instanceType: 'cx22',
          command: ['x'],
        },
        manifest(),
        { token: 'secret' },
      ),
    ).toEqual([
      'input.specifications.instanceType: is for hetzner and ec2 pools; a qemu pool does not use it',
      'input.specifications.command: is for exec pools; a qemu pool does not use it',
      'input.providerAccount: a qemu pool has no account: leave it out',
      `input.specifications.cpuCount: is ${os.cpus().length + 1}; this host has ${os.cpus().length} CPUs`,
      'input.specifications.memoryGib: must be a whole number of MiB (a multiple of 1/1024), not 0.3',
      "input.specifications.diskGib: is 2; the image's disk is 3.00 GiB and a machine's disk cannot be smaller",
    ]);
    expect(check({ image: 'img', memoryGib: 0.25 })).toEqual([
      'input.specifications.memoryGib: must be at least 0.5 (512 MiB)',
    ]);
    expect(check({ image: 'img', memoryGib: 1_000_000 })[0]).toMatch(
      /^input\.specifications\.memoryGib: is 1000000; this host has/,
    );
  });

  it('needs an image with a disk image, that disk in the image directory, and the directory set', () => {
    expect(check({})).toEqual([
      'input.specifications.image: is required: a qemu pool boots the disk image of a registered worker image',
    ]);
    expect(check({ image: 'img' }, manifest({ boot: null }))).toEqual([
      'input.specifications.image: the worker image "img" has no disk image (build it with tagsched-image build --disk-image)',
    ]);
    const elsewhere = manifest();
    expect(
      check(
        { image: 'img' },
        {
          ...elsewhere,
          files: { ...elsewhere.files, diskImage: { path: '../img.qcow2', bytes: 4, sha256: 'b'.repeat(64) } },
        },
      ),
    ).toEqual([
      'input.specifications.image: the worker image "img" names its disk image file "../img.qcow2", not a plain file name',
    ]);
    expect(
      check(
        { image: 'img' },
        {
          ...elsewhere,
          files: { ...elsewhere.files, diskImage: { path: 'other.qcow2', bytes: 4, sha256: 'b'.repeat(64) } },
        },
      ),
    ).toEqual([
      'input.specifications.image: the disk image of "img" is not in TAGSCHED_QEMU_IMAGE_DIR: copy other.qcow2 there',
    ]);
    expect(
      check(
        { image: 'img' },
        {
          ...elsewhere,
          files: { ...elsewhere.files, diskImage: { path: 'img.qcow2', bytes: 5, sha256: 'b'.repeat(64) } },
        },
      ),
    ).toEqual([
      'input.specifications.image: img.qcow2 in TAGSCHED_QEMU_IMAGE_DIR has 4 bytes; the manifest of "img" says 5',
    ]);
    expect(check({ image: 'img' }, manifest(), null, { qemuImageDir: null })).toEqual([
      'input.providerType: qemu pools need TAGSCHED_QEMU_IMAGE_DIR, the directory of the disk images, set on the server',
    ]);
  });

  it('gets the size its specifications give, or one CPU, 1 GiB and the image’s disk', () => {
    const disk = diskImageOf(manifest(), imageDir);
    expect(disk).toMatchObject({
      file: path.join(imageDir, 'img.qcow2'),
      format: 'qcow2',
      diskBytes: 3 * GIB,
      bootModes: ['bios', 'uefi'],
    });
    expect(machineSize({}, { diskBytes: 3 * GIB })).toEqual({ cpus: 1, memoryMib: 1024, diskBytes: 3 * GIB });
    expect(machineSize({ cpuCount: 2, memoryGib: 1.5, diskGib: 5.0001 }, { diskBytes: 3 * GIB })).toEqual({
      cpus: 2,
      memoryMib: 1536,
      diskBytes: 5 * GIB + 2 ** 20,
    });
  });
});

describe("the guest's server", () => {
  it('is 10.0.2.100 in the guest, forwarded to the http URL agents are given, or to the server’s own port behind https', () => {
    expect(guestServer('http://127.0.0.1:4000/graphql', { host: '0.0.0.0', port: 4000 })).toEqual({
      serverUrl: 'http://10.0.2.100/graphql',
      hostAddress: '127.0.0.1',
      hostPort: 4000,
    });
    expect(guestServer('http://0.0.0.0:8080/x/graphql', { host: '0.0.0.0', port: 0 })).toEqual({
      serverUrl: 'http://10.0.2.100/x/graphql',
      hostAddress: '127.0.0.1',
      hostPort: 8080,
    });
    expect(guestServer('http://[::1]/graphql', { host: '::', port: 0 })).toEqual({
      serverUrl: 'http://10.0.2.100/graphql',
      hostAddress: '::1',
      hostPort: 80,
    });
    expect(guestServer('https://ci.example.org/graphql', { host: '0.0.0.0', port: 4000 })).toEqual({
      serverUrl: 'http://10.0.2.100/graphql',
      hostAddress: '127.0.0.1',
      hostPort: 4000,
    });
    expect(() => guestServer('https://ci.example.org/graphql', { host: '0.0.0.0', port: 0 })).toThrow(
      /TAGSCHED_AGENT_SERVER_URL/,
    );
  });
});
