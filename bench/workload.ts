/**
 * The seeded workload of the benchmark: a Debian-like build farm (bench/farm.ts), site and
 * per-workspace task rules, and a queue of pending work requests over 50 workspaces and 20,000
 * source packages.
 *
 * Request tags come from the real `analyzeWorkRequest` with the site's and the workspace's rules,
 * run once per request *variant* (workspace, task, architecture, backend, memory requirement, and
 * which package-naming rules of that workspace name the package). Within a variant two requests
 * differ only by their source package, hence by one provided tag, `task:source-package:NAME`,
 * which the loader fills in per row (bench/load.ts checks a sample of rows, and one row per rule,
 * against the service's own analysis of their input).
 */
import {
  analyzeWorkRequest,
  validateTaskInput,
  type TaskRule,
  type WorkRequestAnalysisInput,
} from '../src/core/tasks/analyze.js';
import type { TagEntry } from '../src/core/tags/types.js';
import {
  CUSTOMER_WORKSPACES,
  FREEXIAN_KEY_TAG,
  generateFarm,
  KALI_TAG,
  LARGE_CLASS_TAG,
  SECURITY_CLASS_TAG,
  type BenchPool,
  type BenchWorker,
} from './farm.js';
import { Random, WeightedChoice, WeightedIndex, zipfWeights } from './prng.js';

/** How big a workload to generate. */
export interface WorkloadSize {
  readonly workers: number;
  readonly requests: number;
}

/** One workspace, `scope/name`. */
export interface BenchWorkspace {
  readonly scope: string;
  readonly name: string;
}

/** Everything that decides a request's tags except its source package. */
export interface RequestVariant {
  readonly workspace: number;
  readonly taskName: string;
  /** The validated taskData without `source_package` (the loader adds it per row). */
  readonly taskData: Record<string, unknown>;
  readonly userRequiredTags: readonly string[];
  /** The provided tags without the source package tag, sorted like the analysis sorts them. */
  readonly providedTags: readonly string[];
  readonly requiredTags: readonly string[];
  readonly providedEntries: readonly TagEntry[];
  readonly requiredEntries: readonly TagEntry[];
}

/** The queue, one entry per request, in creation order (ids and created_at grow together). */
export interface RequestRows {
  readonly variant: Int32Array;
  readonly sourcePackage: Int32Array;
  readonly creator: Int32Array;
  readonly priorityBase: Int32Array;
  readonly priorityAdjustment: Int32Array;
}

/** A whole generated workload. */
export interface Workload {
  readonly seed: number;
  readonly workspaces: readonly BenchWorkspace[];
  readonly users: readonly string[];
  /** Every user is a member of this site group of the `debian` scope (`task:group:debian::Debian`). */
  readonly group: { readonly scope: string; readonly name: string };
  readonly sourcePackages: readonly string[];
  readonly siteRules: readonly TaskRule[];
  /** The task rules of each workspace (by workspace index), in creation order. */
  readonly workspaceRules: readonly (readonly TaskRule[])[];
  readonly pools: readonly BenchPool[];
  readonly workers: readonly BenchWorker[];
  readonly variants: readonly RequestVariant[];
  readonly rows: RequestRows;
}

/** The workspace whose workers are exclusive to it. */
export const SECURITY_WORKSPACE = 'debian/security';
/** Packages an admin rule sends to `worker:class:large` machines. */
export const HEAVY_PACKAGES = [
  'linux',
  'libreoffice',
  'chromium',
  'firefox-esr',
  'llvm-toolchain-19',
  'gcc-14',
  'rustc',
  'openjdk-21',
  'qtwebengine-opensource-src',
  'thunderbird',
];
/** Big packages of some teams, which their workspace's rules send to `worker:class:large`. */
const TEAM_BIG_PACKAGES = {
  haskell: ['ghc', 'agda', 'haskell-pandoc'],
  science: ['paraview', 'vtk9', 'trilinos', 'deal.ii'],
  ml: ['pytorch', 'tensorflow', 'onnxruntime'],
  java: ['openjdk-17', 'netbeans', 'eclipse-platform'],
} as const;
const SOURCE_PACKAGE_COUNT = 20_000;
const USER_COUNT = 10;
/** Spread of the creation times of the queue: two weeks, in seconds. */
export const QUEUE_SPAN_SECONDS = 14 * 24 * 3600;

const ARCHES = new WeightedChoice<string>([
  ['amd64', 45],
  ['arm64', 15],
  ['i386', 10],
  ['armhf', 10],
  ['ppc64el', 8],
  ['s390x', 7],
  ['riscv64', 5],
]);
const TASK_KINDS = new WeightedChoice<string>([
  ['sbuild', 35],
  ['autopkgtest', 30],
  ['lintian', 15],
  ['piuparts', 10],
  ['blhc', 10],
]);
const AUTOPKGTEST_BACKENDS = new WeightedChoice<string>([
  ['auto', 60],
  ['incus-lxc', 25],
  ['qemu', 15],
]);
const SBUILD_BACKENDS = new WeightedChoice<string>([
  ['auto', 85],
  ['unshare', 15],
]);
/** `worker:memory-gib>=N` as users ask for it; nobody has 512 GiB, so those wait forever (and show as unschedulable). */
const MEMORY_MINIMUMS = new WeightedChoice<number>([
  [8, 40],
  [16, 30],
  [32, 20],
  [64, 9],
  [512, 1],
]);
const PRIORITIES = new WeightedChoice<[number, number]>([
  [[0, 0], 80],
  [[-10, 0], 10], // archive rebuilds
  [[10, 0], 7],
  [[50, 0], 2],
  [[0, 100], 1], // raised by an admin
]);

function workspaces(): BenchWorkspace[] {
  const debian = [
    'main',
    'security',
    'backports',
    'experimental',
    'proposed-updates',
    'lts',
    'elts',
    'ports',
    'reproducible',
    'bootstrap',
  ];
  const teams = [
    'perl',
    'python',
    'js',
    'ruby',
    'go',
    'rust',
    'haskell',
    'ocaml',
    'r',
    'java',
    'games',
    'multimedia',
    'science',
    'med',
    'gnome',
    'kde',
    'xfce',
    'qt',
    'lua',
    'php',
    'golang-tools',
    'clojure',
    'emacsen',
    'tex',
    'fonts',
    'printing',
    'hamradio',
    'security-tools',
    'cloud',
    'ml',
  ];
  return [
    ...debian.map((name) => ({ scope: 'debian', name })),
    ...teams.map((t) => ({ scope: 'debian', name: `team-${t}` })),
    ...['elts', 'lts-stretch', 'lts-buster', 'customer-a', 'customer-b'].map((name) => ({ scope: 'freexian', name })),
    ...['rolling', 'bleeding-edge', 'kali-dev', 'experimental', 'arm'].map((name) => ({ scope: 'kali', name })),
  ];
}

/** 20,000 plausible source package names: the heavy ones among the most popular, the rest made of syllables. */
function sourcePackages(random: Random): string[] {
  const known = [
    'glibc',
    'python3.12',
    'perl',
    'systemd',
    'openssl',
    'curl',
    'coreutils',
    'bash',
    'apt',
    'dpkg',
    'gtk4',
    'qtbase-opensource-src',
    'mesa',
    'hello',
  ];
  const prefixes = [
    'lib',
    'python-',
    'golang-',
    'r-cran-',
    'node-',
    'ruby-',
    'libghc-',
    'php-',
    'rust-',
    'ocaml-',
    '',
    '',
    '',
    '',
  ];
  const syllables = [
    'ar',
    'bo',
    'ca',
    'de',
    'ex',
    'fi',
    'gno',
    'hy',
    'io',
    'ju',
    'ka',
    'lo',
    'mu',
    'ne',
    'op',
    'pa',
    'qu',
    'ri',
    'st',
    'tu',
    'vo',
    'wa',
    'xy',
    'ze',
  ];
  const names = new Set<string>();
  // Heavy packages (the site's and the teams') get a top-100 rank, so they are built often, as in real life.
  for (const n of [
    ...known.slice(0, 5),
    ...HEAVY_PACKAGES,
    ...known.slice(5),
    ...Object.values(TEAM_BIG_PACKAGES).flat(),
  ])
    names.add(n);
  while (names.size < SOURCE_PACKAGE_COUNT) {
    let n = random.pick(prefixes);
    for (let k = random.int(2, 4); k > 0; k--) n += random.pick(syllables);
    if (random.chance(0.15)) n += String(random.int(1, 9));
    names.add(n);
  }
  return [...names];
}

/** A task rule, and the source packages its expression names (none: it does not depend on the package). */
interface RuleSpec {
  readonly rule: TaskRule;
  readonly packages: readonly string[];
}

const anyPackage = (packages: readonly string[]) => packages.map((p) => `task:source-package:${p}`).join(' or ');
const rule = (
  name: string,
  taskName: string | null,
  requiredTags: string[],
  expression: string | null = null,
  packages: readonly string[] = [],
): RuleSpec => ({
  rule: { name, taskName, expression, providedTags: [], requiredTags },
  packages,
});
const bigPackages = (name: string, taskName: string | null, packages: readonly string[], requiredTags: string[]) =>
  rule(name, taskName, requiredTags, anyPackage(packages), packages);
/** Only amd64 workers have VMs; a rule asking for one leaves other architectures alone. */
const ON_X86 = 'worker:build-arch:amd64 or worker:build-arch:i386';

function siteRules(): RuleSpec[] {
  return [bigPackages('heavy-packages', 'sbuild', HEAVY_PACKAGES, [LARGE_CLASS_TAG])];
}

/** The rules of each workspace (`scope/name`) that has some, as their owners would write them. */
function workspaceRuleSpecs(): Record<string, RuleSpec[]> {
  // Kali's builds, tests and installs need its chroots and keyring; lintian and blhc only read artifacts.
  const kali = ['sbuild', 'autopkgtest', 'piuparts'].map((task) => rule(`kali-${task}`, task, [KALI_TAG]));
  const elts = [rule('elts-signing-key', 'sbuild', [FREEXIAN_KEY_TAG])];
  return {
    // Embargoed work stays on the security machines (which in turn run nothing else).
    'debian/security': [rule('embargoed', null, [SECURITY_CLASS_TAG])],
    'debian/team-haskell': [
      rule('ghc-memory', 'sbuild', ['worker:memory-gib>=16']),
      bigPackages('big-haskell', 'sbuild', TEAM_BIG_PACKAGES.haskell, [LARGE_CLASS_TAG]),
    ],
    'debian/team-science': [
      bigPackages('big-builds', 'sbuild', TEAM_BIG_PACKAGES.science, [LARGE_CLASS_TAG]),
      bigPackages('big-tests', 'autopkgtest', TEAM_BIG_PACKAGES.science, [LARGE_CLASS_TAG]),
    ],
    'debian/team-ml': [
      bigPackages('big-models', 'autopkgtest', TEAM_BIG_PACKAGES.ml, [LARGE_CLASS_TAG, 'worker:memory-gib>=64']),
    ],
    'debian/team-java': [
      bigPackages('big-java', 'sbuild', TEAM_BIG_PACKAGES.java, [LARGE_CLASS_TAG]),
      rule('jvm-tests', 'autopkgtest', ['worker:memory-gib>=8']),
    ],
    'debian/team-rust': [rule('rustc-memory', 'sbuild', ['worker:memory-gib>=12'])],
    'debian/team-cloud': [rule('cloud-images', 'autopkgtest', ['worker:executor:qemu'], ON_X86)],
    'debian/bootstrap': [rule('piuparts-in-vm', 'piuparts', ['worker:executor:incus-vm'], ON_X86)],
    'freexian/elts': elts,
    'freexian/lts-stretch': elts,
    'freexian/lts-buster': elts,
    ...Object.fromEntries(
      ['rolling', 'bleeding-edge', 'kali-dev', 'experimental', 'arm'].map((n) => [`kali/${n}`, kali]),
    ),
  };
}

/** The analysis input of one request, exactly as the service would build it from the database. */
export function analysisInput(
  w: Pick<Workload, 'workspaces' | 'group' | 'siteRules' | 'workspaceRules'>,
  workspace: number,
  taskName: string,
  taskData: unknown,
  userRequiredTags: readonly string[],
): WorkRequestAnalysisInput {
  const ws = w.workspaces[workspace];
  return {
    scope: ws.scope,
    workspace: ws.name,
    creatorGroups: ws.scope === w.group.scope ? [{ scope: w.group.scope, workspace: null, name: w.group.name }] : [],
    taskType: 'worker',
    taskName,
    taskData,
    environment: null,
    defaultArchitecture: 'amd64',
    userProvidedTags: [],
    userRequiredTags,
    userProvidablePrefixes: [],
    workspaceRules: w.workspaceRules[workspace],
    siteRules: w.siteRules,
  };
}

/** Draws one request's task: its name, data (without the package) and user tags. */
function drawTask(random: Random): { taskName: string; taskData: Record<string, unknown>; userRequiredTags: string[] } {
  const taskName = TASK_KINDS.draw(random);
  const data: Record<string, unknown> = {};
  switch (taskName) {
    case 'sbuild':
      data.host_architecture = ARCHES.draw(random);
      data.backend = SBUILD_BACKENDS.draw(random);
      break;
    case 'autopkgtest': {
      const arch = ARCHES.draw(random);
      data.host_architecture = arch;
      // Containers and VMs are asked for where the farm has them (qemu: amd64 and i386 only).
      const backend =
        arch === 'amd64' || arch === 'i386' || arch === 'arm64' ? AUTOPKGTEST_BACKENDS.draw(random) : 'auto';
      data.backend = backend === 'qemu' && arch === 'arm64' ? 'incus-lxc' : backend;
      break;
    }
    case 'piuparts':
      data.host_architecture = random.chance(0.7) ? 'amd64' : ARCHES.draw(random);
      break;
    default: // lintian and blhc read artifacts: pinned to an architecture only sometimes
      if (random.chance(0.2)) data.host_architecture = ARCHES.draw(random);
  }
  const memoryChance = taskName === 'sbuild' ? 0.06 : taskName === 'autopkgtest' ? 0.03 : 0;
  const userRequiredTags = random.chance(memoryChance) ? [`worker:memory-gib>=${MEMORY_MINIMUMS.draw(random)}`] : [];
  return { taskName, taskData: data, userRequiredTags };
}

/** Generates the whole workload for a seed; the same seed and size always give the same workload. */
export function generateWorkload(size: WorkloadSize, seed: number): Workload {
  const random = new Random(seed);
  const spaces = workspaces();
  const packages = sourcePackages(random);
  const fullName = (s: BenchWorkspace) => `${s.scope}/${s.name}`;
  const specsByName = workspaceRuleSpecs();
  for (const name of [...Object.keys(specsByName), ...CUSTOMER_WORKSPACES]) {
    if (!spaces.some((s) => fullName(s) === name)) throw new Error(`the workload has no workspace ${name}`);
  }
  const sites = siteRules();
  const specs = spaces.map((s) => specsByName[fullName(s)] ?? []);
  const base = {
    workspaces: spaces,
    group: { scope: 'debian', name: 'Debian' },
    siteRules: sites.map((r) => r.rule),
    workspaceRules: specs.map((list) => list.map((r) => r.rule)),
  };
  const { pools, workers } = generateFarm(size.workers, random);

  const workspaceIndex = new WeightedIndex(
    spaces.map((_, i) => (i === 0 ? 30 : spaces[i].name === 'security' ? 3 : 10 / (i + 1) ** 0.5)),
  );
  const securityIndex = spaces.findIndex((s) => fullName(s) === SECURITY_WORKSPACE);
  const packageIndex = new WeightedIndex(zipfWeights(packages.length, 0.9));
  // Per workspace and task, the package-naming rules that may apply: a package's variant key names those that name it.
  const namingRules = spaces.map((_, i) => [...sites, ...specs[i]].filter((r) => r.packages.length));
  const named = new Set(namingRules.flat().flatMap((r) => r.packages));
  const packageMark = (workspace: number, taskName: string, pkg: string) =>
    !named.has(pkg)
      ? ''
      : namingRules[workspace]
          .filter((r) => (r.rule.taskName === null || r.rule.taskName === taskName) && r.packages.includes(pkg))
          .map((r) => r.rule.name)
          .join(',');

  const variants: RequestVariant[] = [];
  const variantOf = new Map<string, number>();
  const n = size.requests;
  const rows: RequestRows = {
    variant: new Int32Array(n),
    sourcePackage: new Int32Array(n),
    creator: new Int32Array(n),
    priorityBase: new Int32Array(n),
    priorityAdjustment: new Int32Array(n),
  };
  for (let i = 0; i < n; i++) {
    const workspace = workspaceIndex.draw(random);
    const task = drawTask(random);
    const pkg = packageIndex.draw(random);
    const mark = packageMark(workspace, task.taskName, packages[pkg]);
    const key = `${workspace}|${task.taskName}|${task.taskData.host_architecture ?? ''}|${task.taskData.backend ?? ''}|${task.userRequiredTags.join(' ')}|${mark}`;
    let v = variantOf.get(key);
    if (v === undefined) {
      v = variants.length;
      variants.push(analyzeVariant(base, workspace, task, packages[pkg]));
      variantOf.set(key, v);
    }
    const [priorityBase, priorityAdjustment] = workspace === securityIndex ? [50, 0] : PRIORITIES.draw(random);
    rows.variant[i] = v;
    rows.sourcePackage[i] = pkg;
    rows.creator[i] = random.int(0, USER_COUNT - 1);
    rows.priorityBase[i] = priorityBase;
    rows.priorityAdjustment[i] = priorityAdjustment;
  }
  return {
    seed,
    ...base,
    users: Array.from({ length: USER_COUNT }, (_, i) => `bench-user-${i}`),
    sourcePackages: packages,
    pools,
    workers,
    variants,
    rows,
  };
}

/**
 * Runs the real analysis (site and workspace rules included) once for a variant, on the package of
 * its first request, and takes out the package tag: the loader puts each row's own back.
 */
function analyzeVariant(
  base: Pick<Workload, 'workspaces' | 'group' | 'siteRules' | 'workspaceRules'>,
  workspace: number,
  task: { taskName: string; taskData: Record<string, unknown>; userRequiredTags: string[] },
  sourcePackage: string,
): RequestVariant {
  const taskData = { ...task.taskData, source_package: sourcePackage };
  const analysis = analyzeWorkRequest(analysisInput(base, workspace, task.taskName, taskData, task.userRequiredTags));
  if (!analysis.ok) throw new Error(`the workload generated an invalid request: ${JSON.stringify(analysis.errors)}`);
  const validation = validateTaskInput('worker', task.taskName, taskData);
  if (!validation.ok) throw new Error(validation.error.message);
  const { source_package: _dropped, ...stored } = validation.data as Record<string, unknown>;
  const packageTag = `task:source-package:${sourcePackage}`;
  return {
    workspace,
    taskName: task.taskName,
    taskData: stored,
    userRequiredTags: task.userRequiredTags,
    providedTags: analysis.providedTags.filter((t) => t !== packageTag),
    requiredTags: analysis.requiredTags,
    providedEntries: analysis.provided.filter((e) => e.tag !== packageTag),
    requiredEntries: analysis.required,
  };
}
