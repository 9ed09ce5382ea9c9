/**
 * The workers and pools of a Debian-like build farm: architectures, hardware, executors, tools,
 * admin classes, workers exclusive to a workspace (security, two customers), admin tags that
 * workspace rules ask for (a distribution, a signing key) and signing workers. Tags come from the
 * real `computeWorkerTags`, fed with metadata shaped like what the worker agent and admins report.
 */
import { poolTagInput } from '../src/scheduler/storage/pool-templates.js';
import { DEFAULT_SIZE_THRESHOLDS } from '../src/core/tags/size-class.js';
import {
  computeWorkerTags,
  type ComputedWorkerTags,
  type PoolSpecifications,
  type WorkerMetadata,
} from '../src/core/tags/worker-tags.js';
import { TASKS } from '../src/core/tasks/registry.js';
import { Random, WeightedChoice } from './prng.js';

/** The tag the exclusive security workers require (docs/design.md: tags and provenance). */
export const SECURITY_WORKSPACE_TAG = 'task:workspace:debian:security';
/** The admin class of big machines; a site rule makes heavy packages require it, and some workspace rules their own big packages. */
export const LARGE_CLASS_TAG = 'worker:class:large';
/** The admin class of the security machines; the security workspace's rule requires it, so its work stays on them. */
export const SECURITY_CLASS_TAG = 'worker:class:security';
/** Workspaces with machines of their own (exclusive: those machines require the workspace's tag and run nothing else). */
export const CUSTOMER_WORKSPACES = ['freexian/customer-a'] as const;
/** An admin tag of the workers that build for Kali; the Kali workspaces' rules require it. */
export const KALI_TAG = 'worker:distribution:kali';
/** An admin tag of the workers holding the Freexian ELTS signing key; the ELTS/LTS workspaces' sbuild rules require it. */
export const FREEXIAN_KEY_TAG = 'worker:signing-key:freexian-elts';

/** The tag a worker exclusive to workspace `scope/name` requires. */
export const workspaceTag = (full: string) => `task:workspace:${full.replace('/', ':')}`;

const GIB = 1024 ** 3;

/** The share of the fleet per native architecture family; amd64 workers also run i386. */
const FAMILIES = new WeightedChoice<Family>([
  ['amd64', 52],
  ['arm64', 16],
  ['ppc64el', 9],
  ['riscv64', 8],
  ['s390x', 7],
  ['armhf', 5],
  ['i386', 3],
]);
type Family = 'amd64' | 'arm64' | 'ppc64el' | 'riscv64' | 's390x' | 'armhf' | 'i386';

interface Hardware {
  readonly cpu: number;
  readonly memoryGib: number;
  readonly diskGib: readonly [number, number];
  readonly large: boolean;
}

const HW = {
  small: { cpu: 4, memoryGib: 8, diskGib: [60, 300], large: false },
  medium: { cpu: 16, memoryGib: 32, diskGib: [200, 1000], large: false },
  big: { cpu: 32, memoryGib: 128, diskGib: [500, 2000], large: true },
  huge: { cpu: 64, memoryGib: 256, diskGib: [1000, 4000], large: true },
  board: { cpu: 4, memoryGib: 4, diskGib: [30, 120], large: false },
  ampere: { cpu: 80, memoryGib: 256, diskGib: [1000, 3000], large: true },
  power: { cpu: 64, memoryGib: 256, diskGib: [1000, 2000], large: true },
  mainframe: { cpu: 8, memoryGib: 32, diskGib: [200, 500], large: false },
} as const satisfies Record<string, Hardware>;

const HARDWARE: Record<Family, WeightedChoice<Hardware>> = {
  amd64: new WeightedChoice<Hardware>([
    [HW.small, 25],
    [HW.medium, 45],
    [HW.big, 20],
    [HW.huge, 10],
  ]),
  arm64: new WeightedChoice<Hardware>([
    [HW.small, 30],
    [HW.medium, 50],
    [HW.ampere, 20],
  ]),
  ppc64el: new WeightedChoice<Hardware>([
    [HW.medium, 60],
    [HW.power, 40],
  ]),
  riscv64: new WeightedChoice<Hardware>([
    [HW.board, 70],
    [HW.small, 30],
  ]),
  s390x: new WeightedChoice<Hardware>([[HW.mainframe, 100]]),
  armhf: new WeightedChoice<Hardware>([[HW.board, 100]]),
  i386: new WeightedChoice<Hardware>([[HW.small, 100]]),
};

/** One worker pool, as its row is written. */
export interface BenchPool {
  readonly name: string;
  readonly providerType: 'local' | 'exec';
  readonly family: Family;
  readonly architectures: readonly string[];
  readonly executors: readonly string[];
  readonly tools: readonly string[];
  readonly specifications: PoolSpecifications;
  readonly providedTags: readonly string[];
  readonly requiredTags: readonly string[];
  readonly maxActiveInstances: number;
  readonly minIdleInstances: number;
  readonly targetLatencySeconds: number;
  readonly concurrency: number;
}

/** One worker, with the metadata it reports and the tags the real code derives from it. */
export interface BenchWorker {
  readonly name: string;
  readonly type: 'worker' | 'signing';
  /** Index into the pools, or null for a static worker. */
  readonly pool: number | null;
  readonly concurrency: number;
  readonly staticMetadata: WorkerMetadata;
  readonly dynamicMetadata: WorkerMetadata;
  readonly tags: ComputedWorkerTags;
}

const workerTasks = TASKS.filter((t) => t.type === 'worker');

/** What a worker agent reports it can run: every worker task of its version, minus those needing a tool it lacks. */
function reportedTasks(tools: readonly string[]): { type: string; name: string; version: number }[] {
  const needs: Record<string, string> = {
    sbuild: 'sbuild',
    autopkgtest: 'autopkgtest',
    mmdebstrap: 'mmdebstrap',
    simplesystemimagebuild: 'mmdebstrap',
  };
  return workerTasks
    .filter((t) => !needs[t.name] || tools.includes(needs[t.name]))
    .map((t) => ({ type: t.type, name: t.name, version: t.version }));
}

const architecturesOf = (family: Family, random: Random): string[] => {
  if (family === 'amd64') return ['amd64', 'i386'];
  if (family === 'arm64') return random.chance(0.4) ? ['arm64', 'armhf'] : ['arm64']; // only some arm64 cores run AArch32
  return [family];
};

/** Reported memory is a little under the nominal size (firmware, kernel), as `psutil` shows it. */
const reportedMemory = (gib: number, random: Random) => Math.floor(gib * GIB * (0.965 + random.next() * 0.03));

function poolDefinitions(): BenchPool[] {
  const sbuildTools = ['sbuild', 'autopkgtest', 'mmdebstrap'];
  const def = (
    name: string,
    family: Family,
    architectures: string[],
    spec: { cpuCount: number; memoryGib: number; diskGib: number; instanceType: string },
    extra: {
      executors?: string[];
      tools?: string[];
      provided?: string[];
      required?: string[];
      max?: number;
      concurrency?: number;
    } = {},
  ): BenchPool => {
    const executors = extra.executors ?? ['unshare'];
    const tools = extra.tools ?? sbuildTools;
    const providedTags = [
      ...architectures.map((a) => `worker:build-arch:${a}`),
      ...executors.map((e) => `worker:executor:${e}`),
      ...tools.map((t) => `worker:cap:${t}`),
      ...reportedTasks(tools).map((t) => `worker:task:${t.type}:${t.name}:version:${t.version}`),
      ...(extra.provided ?? []),
    ];
    return {
      name,
      providerType: name.startsWith('local-') ? 'local' : 'exec',
      family,
      architectures,
      executors,
      tools,
      specifications: { ...spec, concurrency: extra.concurrency ?? 1 },
      providedTags,
      requiredTags: extra.required ?? [],
      maxActiveInstances: extra.max ?? 100,
      minIdleInstances: 0,
      targetLatencySeconds: 1800,
      concurrency: extra.concurrency ?? 1,
    };
  };
  const amd = ['amd64', 'i386'];
  return [
    def(
      'aws-amd64-medium',
      'amd64',
      amd,
      { cpuCount: 8, memoryGib: 32, diskGib: 200, instanceType: 'm7i.2xlarge' },
      { max: 600, concurrency: 2 },
    ),
    def(
      'aws-amd64-large',
      'amd64',
      amd,
      { cpuCount: 64, memoryGib: 256, diskGib: 1000, instanceType: 'm7i.16xlarge' },
      { provided: [LARGE_CLASS_TAG], max: 100, concurrency: 2 },
    ),
    def(
      'aws-arm64-medium',
      'arm64',
      ['arm64'],
      { cpuCount: 16, memoryGib: 64, diskGib: 300, instanceType: 'm7g.4xlarge' },
      { max: 300, concurrency: 2 },
    ),
    def(
      'hetzner-arm64-large',
      'arm64',
      ['arm64'],
      { cpuCount: 80, memoryGib: 256, diskGib: 1500, instanceType: 'rx170' },
      { provided: [LARGE_CLASS_TAG], max: 20, concurrency: 2 },
    ),
    def(
      'gce-amd64-vm',
      'amd64',
      amd,
      { cpuCount: 16, memoryGib: 64, diskGib: 400, instanceType: 'n2-standard-16' },
      {
        executors: ['unshare', 'incus-lxc', 'incus-vm', 'qemu'],
        tools: [...sbuildTools, 'kvm'],
        max: 150,
      },
    ),
    def(
      'osuosl-ppc64el',
      'ppc64el',
      ['ppc64el'],
      { cpuCount: 16, memoryGib: 64, diskGib: 300, instanceType: 'power9.large' },
      { max: 30 },
    ),
    def(
      'ibm-s390x',
      's390x',
      ['s390x'],
      { cpuCount: 8, memoryGib: 32, diskGib: 200, instanceType: 'bz2-8x32' },
      { max: 20 },
    ),
    def(
      'local-riscv64',
      'riscv64',
      ['riscv64'],
      { cpuCount: 8, memoryGib: 16, diskGib: 200, instanceType: 'board' },
      { max: 30 },
    ),
    def(
      'local-armhf',
      'armhf',
      ['armhf'],
      { cpuCount: 4, memoryGib: 4, diskGib: 100, instanceType: 'board' },
      { max: 30 },
    ),
    def(
      'aws-amd64-security',
      'amd64',
      amd,
      { cpuCount: 16, memoryGib: 64, diskGib: 400, instanceType: 'm7i.4xlarge' },
      { provided: [SECURITY_CLASS_TAG], required: [SECURITY_WORKSPACE_TAG], max: 20, concurrency: 2 },
    ),
  ];
}

/**
 * The farm: pools, then workers, 20% of them started by pools, 5% exclusive to the security
 * workspace; of the other static workers (every architecture), 2% are exclusive to one of the
 * customers' workspaces, and of the rest 8% carry the Kali tag and 6% the ELTS signing key (admin
 * static metadata).
 */
export function generateFarm(workerCount: number, random: Random): { pools: BenchPool[]; workers: BenchWorker[] } {
  const pools = poolDefinitions();
  const poolsOf = (family: Family) =>
    pools.map((p, i) => ({ p, i })).filter(({ p }) => p.family === family && !p.requiredTags.length);
  const securityPool = pools.findIndex((p) => p.requiredTags.length);
  const signingCount = Math.max(1, Math.round(workerCount * 0.005));
  const workers: BenchWorker[] = [];
  const members = pools.map(() => 0);
  const width = String(workerCount).length;
  for (let i = 0; i < workerCount; i++) {
    const id = String(i).padStart(width, '0');
    if (i < signingCount) {
      workers.push(signingWorker(`signing-${id}`, random));
      continue;
    }
    const security = random.chance(0.05); // security builds run on every release architecture
    const family = FAMILIES.draw(random);
    const familyPools = poolsOf(family);
    let poolIndex: number | null = null;
    if (security && family === 'amd64' && random.chance(0.3)) poolIndex = securityPool;
    else if (!security && familyPools.length && random.chance(0.2)) poolIndex = random.pick(familyPools).i;
    // A pool runs at most 60% of its maximum: the rest is room for the demand to launch into.
    if (poolIndex !== null && members[poolIndex]++ >= pools[poolIndex].maxActiveInstances * 0.6) poolIndex = null;
    if (poolIndex !== null) {
      workers.push(poolWorker(`${pools[poolIndex].name}-${id}`, pools, poolIndex, random));
      continue;
    }
    const admin: { provided: string[]; required: string[] } = { provided: [], required: [] };
    if (security) {
      admin.provided.push(SECURITY_CLASS_TAG);
      admin.required.push(SECURITY_WORKSPACE_TAG);
    } else if (random.chance(0.02)) admin.required.push(workspaceTag(random.pick(CUSTOMER_WORKSPACES)));
    else {
      if (random.chance(0.08)) admin.provided.push(KALI_TAG);
      if (random.chance(0.06)) admin.provided.push(FREEXIAN_KEY_TAG);
    }
    workers.push(staticWorker(`${family}-${id}`, family, admin, random));
  }
  return { pools, workers };
}

/** A machine of the admins: `admin` holds the tags of its static metadata besides its class. */
function staticWorker(
  name: string,
  family: Family,
  admin: { provided: readonly string[]; required: readonly string[] },
  random: Random,
): BenchWorker {
  const hw = HARDWARE[family].draw(random);
  const executors = ['unshare'];
  const tools: string[] = [];
  if (random.chance(0.9)) tools.push('sbuild');
  if (random.chance(0.75)) tools.push('autopkgtest');
  if (random.chance(0.3)) tools.push('mmdebstrap');
  if ((family === 'amd64' || family === 'arm64') && random.chance(0.3)) executors.push('incus-lxc');
  if (family === 'amd64' && hw.cpu >= 16 && random.chance(0.25)) {
    executors.push('incus-vm', 'qemu');
    tools.push('kvm');
  }
  const dynamicMetadata: WorkerMetadata = {
    'system:architectures': architecturesOf(family, random),
    'system:cpu_count': hw.cpu,
    'system:total_physical_memory': reportedMemory(hw.memoryGib, random),
    'system:disk_free': random.int(hw.diskGib[0], hw.diskGib[1]) * GIB + random.int(0, GIB - 1),
    'system:executors': executors,
    'system:tools': tools,
    'system:tasks': reportedTasks(tools),
  };
  const staticMetadata: WorkerMetadata = {};
  const provided = [...(hw.large ? [LARGE_CLASS_TAG] : []), ...admin.provided];
  if (provided.length) staticMetadata.provided_tags = provided;
  if (admin.required.length) staticMetadata.required_tags = [...admin.required];
  const concurrency = hw.cpu >= 32 ? 2 : hw.cpu >= 16 ? random.int(1, 2) : 1;
  return finish({ name, type: 'worker', pool: null, concurrency, staticMetadata, dynamicMetadata }, null);
}

function poolWorker(name: string, pools: readonly BenchPool[], index: number, random: Random): BenchWorker {
  const pool = pools[index];
  const spec = pool.specifications as { cpuCount: number; memoryGib: number; diskGib: number };
  const dynamicMetadata: WorkerMetadata = {
    'system:architectures': [...pool.architectures],
    'system:cpu_count': spec.cpuCount,
    'system:total_physical_memory': reportedMemory(spec.memoryGib, random),
    'system:disk_free': Math.floor(spec.diskGib * GIB * (0.6 + random.next() * 0.35)),
    'system:executors': [...pool.executors],
    'system:tools': [...pool.tools],
    'system:tasks': reportedTasks(pool.tools),
  };
  return finish(
    { name, type: 'worker', pool: index, concurrency: pool.concurrency, staticMetadata: {}, dynamicMetadata },
    pool,
  );
}

function signingWorker(name: string, random: Random): BenchWorker {
  const tools = ['debsign', 'sbsign'];
  const dynamicMetadata: WorkerMetadata = {
    'system:architectures': ['amd64'],
    'system:cpu_count': 4,
    'system:total_physical_memory': reportedMemory(8, random),
    'system:disk_free': random.int(50, 100) * GIB,
    'system:tools': tools,
    'system:tasks': TASKS.filter((t) => t.type === 'signing').map((t) => ({
      type: t.type,
      name: t.name,
      version: t.version,
    })),
  };
  return finish({ name, type: 'signing', pool: null, concurrency: 1, staticMetadata: {}, dynamicMetadata }, null);
}

function finish(w: Omit<BenchWorker, 'tags'>, pool: BenchPool | null): BenchWorker {
  const tags = computeWorkerTags({
    type: w.type,
    pool: pool ? poolTagInput(pool) : null,
    staticMetadata: w.staticMetadata,
    dynamicMetadata: w.dynamicMetadata,
    sizeThresholds: DEFAULT_SIZE_THRESHOLDS,
  });
  return { ...w, tags };
}
