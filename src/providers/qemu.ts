/**
 * The `qemu` provider: each instance is a QEMU virtual machine on the server's own host, booted from
 * the disk image of the registered worker image its pool names (found in TAGSCHED_QEMU_IMAGE_DIR,
 * the output directory of `tagsched-image build --disk-image`, and checked against the manifest's
 * size and sha256), with the machinery of qemu-vm.ts: a qcow2 overlay per instance, a NoCloud seed
 * holding the provisioner's user data, the pool's cpuCount, memoryGib and diskGib, KVM when the probe
 * says it works (TAGSCHED_QEMU_ACCEL), and user-mode networking in which the guest reaches the server
 * and nothing else: the agent is given `http://10.0.2.100/graphql`, which QEMU forwards to the
 * server's own address and port.
 *
 * Each machine has a directory `<TAGSCHED_QEMU_STATE_DIR>/<pool>/<name>/` (overlay, seed, pid file,
 * monitor socket, `instance.json`); its serial console goes to its instance log (instance-logs.ts),
 * kept after the directory is deleted. QEMU runs detached, so machines outlive a server restart; the
 * list is read from those directories and their pid files. Stop is an ACPI power-off (the agent
 * drains under systemd, then the machine powers off and QEMU exits), then SIGKILL once
 * TAGSCHED_STOP_GRACE_SECONDS are over and the stop is asked again.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { ProvidersConfig } from '../core/config/providers.js';
import type { ServerConfig } from '../core/config/server.js';
import type { Manifest } from '../core/manifest-format.js';
import type { PoolSpecifications } from '../core/tags/worker-tags.js';
import { prepareInstanceLog } from './instance-logs.js';
import type { LaunchSpec, Provider, ProviderDeps, ProviderInstance } from './provider.js';
import { ProviderError } from './provider.js';
import { cloudInitUserData } from './user-data.js';
import {
  killVm,
  missingPrograms,
  powerdown,
  probeAccel,
  readPid,
  startVm,
  vmRunning,
  type VmOptions,
} from './qemu-vm.js';
import {
  ACCOUNT_PATH,
  foreignFields,
  problem,
  problemsMessage,
  SPECIFICATIONS_PATH,
  specValue,
  type PoolProviderInput,
} from './spec-checks.js';
import type { InputProblem } from '../core/errors.js';
import { instanceNames, readInstanceRecord, writeInstanceRecord } from './instance-record.js';

/** The guest address and port that reach the server: the agent's server URL is `http://10.0.2.100/…`. */
export const SERVER_IN_GUEST = { guestAddress: '10.0.2.100', guestPort: 80 } as const;

/** What a machine gets when its pool's specifications say nothing. */
export const QEMU_DEFAULTS = { cpuCount: 1, memoryGib: 1 } as const;
/** The least memory the image's kernel, systemd and agent boot in. */
const MIN_MEMORY_MIB = 512;
/** The largest disk a machine is given, whatever the host has free: 16 TiB, the largest file ext4 holds (with 4 KiB blocks). */
export const MAX_DISK_GIB = 16_384;
const MIB = 2 ** 20;
const GIB = 2 ** 30;

/** Specifications of other providers, which a qemu pool would silently ignore. */
const FOREIGN: Readonly<Record<string, string>> = {
  instanceType: 'hetzner and ec2',
  location: 'hetzner and ec2',
  offerings: 'hetzner and ec2',
  providerImage: 'hetzner and ec2',
  subnetId: 'ec2',
  securityGroupIds: 'ec2',
  command: 'exec',
};

/** What the provider writes next to each machine. */
interface InstanceRecord {
  name: string;
  pool: string;
  pid: number;
  createdAt: string;
  stopRequestedAt: string | null;
}

/** The disk image of a registered image: its file in the image directory, and how it boots. */
export interface DiskImage {
  readonly file: string;
  readonly format: 'raw' | 'qcow2';
  readonly bytes: number;
  readonly sha256: string;
  readonly diskBytes: number;
  readonly bootModes: readonly ('bios' | 'uefi')[];
}

/** The disk image a manifest describes, or why there is none usable. */
export function diskImageOf(manifest: Manifest, imageDir: string): DiskImage | string {
  const file = manifest.files.diskImage;
  if (!file || !manifest.boot) return 'has no disk image (build it with tagsched-image build --disk-image)';
  if (file.path !== path.basename(file.path) || file.path.startsWith('.'))
    return `names its disk image file "${file.path.slice(0, 80)}", not a plain file name`;
  return {
    file: path.join(imageDir, file.path),
    format: manifest.boot.format,
    bytes: file.bytes,
    sha256: file.sha256,
    diskBytes: manifest.boot.diskBytes,
    bootModes: manifest.boot.bootModes,
  };
}

/** A machine's size from its pool's specifications (validated by validateQemuPool). */
export function machineSize(
  specifications: PoolSpecifications,
  disk: Pick<DiskImage, 'diskBytes'>,
): { cpus: number; memoryMib: number; diskBytes: number } {
  const memoryGib = specifications.memoryGib ?? QEMU_DEFAULTS.memoryGib;
  return {
    cpus: specifications.cpuCount ?? QEMU_DEFAULTS.cpuCount,
    memoryMib: Math.round(memoryGib * 1024),
    // A qcow2 overlay's size is whole MiB here; never smaller than the image.
    diskBytes: specifications.diskGib
      ? Math.max(disk.diskBytes, Math.ceil((specifications.diskGib * GIB) / MIB) * MIB)
      : disk.diskBytes,
  };
}

/**
 * Where the guest's connections to SERVER_IN_GUEST go, and the server URL the agent is given, from the
 * URL the provisioner gives agents: an http URL is forwarded to its own host and port (a wildcard host
 * to 127.0.0.1); an https one (a proxy in front of the server) to the server's own port on this host.
 */
export function guestServer(
  agentServerUrl: string,
  config: Pick<ServerConfig, 'host' | 'port'>,
): { serverUrl: string; hostAddress: string; hostPort: number } {
  const url = new URL(agentServerUrl);
  const local = (host: string) =>
    host === '0.0.0.0' || host === '::' || host === '[::]' || host === ''
      ? '127.0.0.1'
      : host.replace(/^\[(.*)\]$/, '$1');
  let hostAddress: string;
  let hostPort: number;
  if (url.protocol === 'http:') {
    hostAddress = local(url.hostname);
    hostPort = url.port ? Number(url.port) : 80;
  } else {
    if (!config.port)
      throw new ProviderError(
        'invalid',
        `the agents' server URL is ${url.protocol} and PORT is 0: give qemu pools an http URL of this server (TAGSCHED_AGENT_SERVER_URL)`,
      );
    hostAddress = local(config.host);
    hostPort = config.port;
  }
  const port = SERVER_IN_GUEST.guestPort === 80 ? '' : `:${SERVER_IN_GUEST.guestPort}`;
  return {
    serverUrl: `http://${SERVER_IN_GUEST.guestAddress}${port}${url.pathname}${url.search}`,
    hostAddress,
    hostPort,
  };
}

/**
 * The bytes free (to an unprivileged user) in the file system of `dir`, read from its nearest
 * directory that exists (the state directory is made at the first launch); null when none can be read.
 */
export function freeBytes(dir: string): number | null {
  for (let at = path.resolve(dir); ; at = path.dirname(at)) {
    try {
      const fsStats = fs.statfsSync(at);
      return fsStats.bavail * fsStats.bsize;
    } catch {
      if (at === path.dirname(at)) return null;
    }
  }
}

/**
 * Checks a qemu pool: the server can run machines, the image has a disk image here, the machine's size
 * is one QEMU can give: its disk (`diskGib`) no larger than MAX_DISK_GIB and than what the file system of
 * TAGSCHED_QEMU_STATE_DIR, where each machine's overlay grows, has free now (`qemuStateDir` absent: the
 * bound alone). A launch checks again, with what is free then.
 */
export function validateQemuPool(
  pool: PoolProviderInput,
  config: Pick<ProvidersConfig, 'qemuImageDir'> & Partial<Pick<ProvidersConfig, 'qemuStateDir'>>,
): InputProblem[] {
  const problems: InputProblem[] = [];
  const specs = pool.specifications;
  if (!config.qemuImageDir)
    problems.push(
      problem(
        'input.providerType',
        'qemu pools need TAGSCHED_QEMU_IMAGE_DIR, the directory of the disk images, set on the server',
      ),
    );
  const missing = missingPrograms();
  if (missing.length)
    problems.push(
      problem('input.providerType', `qemu pools need these programs on the server's host: ${missing.join(', ')}`),
    );
  problems.push(...foreignFields(specs, 'qemu', FOREIGN));
  if (pool.account && Object.keys(pool.account).length)
    problems.push(problem(ACCOUNT_PATH, 'a qemu pool has no account: leave it out'));

  const cpuCount = specValue(specs, 'cpuCount');
  const hostCpus = os.cpus().length;
  if (typeof cpuCount === 'number' && cpuCount > hostCpus)
    problems.push(problem(`${SPECIFICATIONS_PATH}.cpuCount`, `is ${cpuCount}; this host has ${hostCpus} CPUs`));
  const memoryGib = specValue(specs, 'memoryGib');
  if (typeof memoryGib === 'number') {
    const mib = memoryGib * 1024;
    const hostMib = Math.floor(os.totalmem() / MIB);
    if (!Number.isInteger(mib))
      problems.push(
        problem(
          `${SPECIFICATIONS_PATH}.memoryGib`,
          `must be a whole number of MiB (a multiple of 1/1024), not ${memoryGib}`,
        ),
      );
    else if (mib < MIN_MEMORY_MIB)
      problems.push(
        problem(
          `${SPECIFICATIONS_PATH}.memoryGib`,
          `must be at least ${MIN_MEMORY_MIB / 1024} (${MIN_MEMORY_MIB} MiB)`,
        ),
      );
    else if (mib > hostMib)
      problems.push(
        problem(
          `${SPECIFICATIONS_PATH}.memoryGib`,
          `is ${memoryGib}; this host has ${(hostMib / 1024).toFixed(1)} GiB`,
        ),
      );
  }

  const imageName = specValue(specs, 'image');
  if (imageName === undefined) {
    problems.push(
      problem(
        `${SPECIFICATIONS_PATH}.image`,
        'is required: a qemu pool boots the disk image of a registered worker image',
      ),
    );
    return problems;
  }
  // An image that is not registered is named by the pool's own check (worker-images.ts).
  if (!pool.image) return problems;
  const disk = diskImageOf(pool.image.manifest, config.qemuImageDir ?? '');
  if (typeof disk === 'string') {
    problems.push(problem(`${SPECIFICATIONS_PATH}.image`, `the worker image "${pool.image.name}" ${disk}`));
    return problems;
  }
  if (config.qemuImageDir) {
    let size: number | null = null;
    try {
      size = fs.statSync(disk.file).size;
    } catch {
      problems.push(
        problem(
          `${SPECIFICATIONS_PATH}.image`,
          `the disk image of "${pool.image.name}" is not in TAGSCHED_QEMU_IMAGE_DIR: copy ${path.basename(disk.file)} there`,
        ),
      );
    }
    if (size !== null && size !== disk.bytes) {
      problems.push(
        problem(
          `${SPECIFICATIONS_PATH}.image`,
          `${path.basename(disk.file)} in TAGSCHED_QEMU_IMAGE_DIR has ${size} bytes; the manifest of "${pool.image.name}" says ${disk.bytes}`,
        ),
      );
    }
  }
  const diskGib = specValue(specs, 'diskGib');
  if (typeof diskGib === 'number') {
    const free = config.qemuStateDir ? freeBytes(config.qemuStateDir) : null;
    const at = `${SPECIFICATIONS_PATH}.diskGib`;
    if (diskGib * GIB < disk.diskBytes) {
      problems.push(
        problem(
          at,
          `is ${diskGib}; the image's disk is ${(disk.diskBytes / GIB).toFixed(2)} GiB and a machine's disk cannot be smaller`,
        ),
      );
    } else if (diskGib > MAX_DISK_GIB) {
      problems.push(problem(at, `is ${diskGib}; a qemu machine's disk is at most ${MAX_DISK_GIB} GiB (16 TiB)`));
    } else if (free !== null && machineSize(specs, disk).diskBytes > free) {
      problems.push(
        problem(
          at,
          `is ${diskGib}; the file system of TAGSCHED_QEMU_STATE_DIR, where a machine's disk grows, has ${(free / GIB).toFixed(1)} GiB free`,
        ),
      );
    }
  }
  return problems;
}

const readRecord = (dir: string) => readInstanceRecord<InstanceRecord>(dir);
const writeRecord = (dir: string, record: InstanceRecord) => writeInstanceRecord(dir, record);

/** The sha256 of a file, read as a stream. */
async function sha256Of(file: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of fs.createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

/** The machines of a pool as this provider's state directory records them (pure of QEMU: pid files and /proc). */
export function listMachines(stateDir: string, pool: string): ProviderInstance[] {
  const out: ProviderInstance[] = [];
  for (const name of instanceNames(stateDir, pool)) {
    const dir = path.join(stateDir, pool, name);
    const record = readRecord(dir);
    if (!record || !vmRunning(dir)) continue;
    out.push({
      id: record.name,
      name: record.name,
      state: record.stopRequestedAt ? 'stopping' : 'running',
      createdAt: new Date(record.createdAt),
    });
  }
  return out;
}

/** Creates the qemu provider of one server process. */
export function createQemuProvider({ config, log }: ProviderDeps): Provider {
  const root = config.providers.qemuStateDir;
  // Disk files whose sha256 matched their manifest, by path, size and modification time.
  const verified = new Set<string>();
  // The accelerator probed per disk image (once per process).
  const accels = new Map<string, Promise<'kvm' | 'tcg'>>();

  const dirOf = (pool: string, name: string) => path.join(root, pool, name);
  const findDir = (name: string): string | null => {
    let pools: string[];
    try {
      pools = fs.readdirSync(root);
    } catch {
      return null;
    }
    for (const pool of pools) if (fs.existsSync(dirOf(pool, name))) return dirOf(pool, name);
    return null;
  };

  async function checkedDisk(spec: LaunchSpec): Promise<DiskImage> {
    if (!config.providers.qemuImageDir)
      throw new ProviderError('invalid', 'TAGSCHED_QEMU_IMAGE_DIR is not set on this server');
    if (!spec.image) throw new ProviderError('invalid', `pool ${spec.pool} names no registered worker image`);
    const disk = diskImageOf(spec.image.manifest, config.providers.qemuImageDir);
    if (typeof disk === 'string') throw new ProviderError('invalid', `the worker image "${spec.image.name}" ${disk}`);
    let stat: fs.Stats;
    try {
      stat = fs.statSync(disk.file);
    } catch {
      throw new ProviderError(
        'invalid',
        `the disk image of "${spec.image.name}" is not in TAGSCHED_QEMU_IMAGE_DIR (${path.basename(disk.file)})`,
      );
    }
    const key = `${disk.file}:${stat.size}:${stat.mtimeMs}`;
    if (!verified.has(key)) {
      if (stat.size !== disk.bytes || (await sha256Of(disk.file)) !== disk.sha256) {
        throw new ProviderError(
          'invalid',
          `${path.basename(disk.file)} in TAGSCHED_QEMU_IMAGE_DIR is not the disk image the manifest of "${spec.image.name}" describes (size or sha256 differ)`,
        );
      }
      verified.add(key);
    }
    return disk;
  }

  function accelFor(disk: DiskImage): Promise<'kvm' | 'tcg'> {
    if (config.providers.qemuAccel !== 'auto') return Promise.resolve(config.providers.qemuAccel);
    let accel = accels.get(disk.file);
    if (!accel) {
      accel = probeAccel(disk.file, disk.format, path.join(root, '.probe')).then((a) => {
        log.info({ image: path.basename(disk.file), accel: a }, 'probed QEMU acceleration');
        return a;
      });
      accel.catch(() => accels.delete(disk.file));
      accels.set(disk.file, accel);
    }
    return accel;
  }

  return {
    async launch(spec) {
      const dir = dirOf(spec.pool, spec.name);
      if (readRecord(dir) && vmRunning(dir)) return { id: spec.name }; // launched already: once only
      const specifications = spec.specifications as PoolSpecifications;
      const problems = validateQemuPool(
        { name: spec.pool, specifications, image: spec.image ?? null },
        config.providers,
      );
      if (problems.length) throw new ProviderError('invalid', problemsMessage(problems));
      const disk = await checkedDisk(spec);
      const accel = await accelFor(disk);
      const server = guestServer(spec.agent.serverUrl, config.server);
      const size = machineSize(specifications, disk);
      const options: VmOptions = {
        dir,
        image: disk.file,
        imageFormat: disk.format,
        firmware: disk.bootModes.includes('bios') ? 'bios' : 'uefi',
        accel,
        ...size,
        forward: { ...SERVER_IN_GUEST, hostAddress: server.hostAddress, hostPort: server.hostPort },
        serialLog: prepareInstanceLog(config.providers.instanceLogDir, spec.name),
      };
      // The provisioner's user data (one function for every provider), with the URL the guest reaches.
      const userData = cloudInitUserData({ ...spec.agent, serverUrl: server.serverUrl });
      let pid: number;
      try {
        pid = await startVm(options, {
          userData,
          metaData: `instance-id: ${spec.name}\nlocal-hostname: ${spec.name}\n`,
        });
      } catch (err) {
        killVm(dir);
        throw new ProviderError(
          'unavailable',
          `cannot start the virtual machine ${spec.name}: ${(err as Error).message}`,
        );
      }
      writeRecord(dir, {
        name: spec.name,
        pool: spec.pool,
        pid,
        createdAt: new Date().toISOString(),
        stopRequestedAt: null,
      });
      log.info(
        {
          instance: spec.name,
          pool: spec.pool,
          pid,
          accel,
          cpus: size.cpus,
          memoryMib: size.memoryMib,
          diskBytes: size.diskBytes,
        },
        'virtual machine started',
      );
      return { id: spec.name };
    },

    async terminate(id) {
      const dir = findDir(id);
      if (!dir) return;
      const record = readRecord(dir);
      if (!vmRunning(dir)) {
        // Gone: its directory goes, its console stays in the instance log.
        fs.rmSync(dir, { recursive: true, force: true });
        return;
      }
      const now = Date.now();
      if (!record?.stopRequestedAt) {
        if (record) writeRecord(dir, { ...record, stopRequestedAt: new Date(now).toISOString() });
        try {
          await powerdown(dir);
          log.info({ instance: id, pid: readPid(dir) }, 'virtual machine asked to power off (ACPI)');
        } catch (err) {
          log.warn(
            { instance: id, error: (err as Error).message },
            'the monitor of a virtual machine did not take the power-off: killing it',
          );
          killVm(dir);
        }
      } else if (now - Date.parse(record.stopRequestedAt) >= config.providers.stopGraceMs) {
        log.warn(
          { instance: id, graceMs: config.providers.stopGraceMs },
          'virtual machine still running after the grace period: SIGKILL',
        );
        killVm(dir);
      }
    },

    async list(pool) {
      return listMachines(root, pool);
    },
  };
}
