/**
 * The configuration advisor's rules (`tagsched-worker advise`, docs/reference/host-speed.md), as pure code:
 * from the host's facts and a few answers, the worker configuration it proposes (how many requests
 * at once or the resources to offer, each run's -jN and memory limit, the cache size, the executors
 * the agent will find) and the environment file that says it. The questions, their defaults and how
 * an answer is read are here too, so that the terminal program (advise-main.ts) only asks and prints.
 */
import type { HostSpeed } from './speed.js';

/** What the advisor reads of the host. */
export interface HostFacts {
  readonly hostname: string;
  readonly cpuCount: number;
  readonly memoryBytes: number;
  /** The file system of the work directory: its size and what is free, in bytes (null when unknown). */
  readonly disk: { readonly dir: string; readonly totalBytes: number | null; readonly freeBytes: number | null };
  readonly kvm: boolean;
  /** Architectures it runs natively (dpkg, then `arch-test -n`). */
  readonly native: readonly string[];
  /** Architectures it runs only by emulation (`arch-test` without `-n`, binfmt and qemu-user). */
  readonly emulated: readonly string[];
  /** The executors the agent will report (facts.ts: executorsFrom). */
  readonly executors: readonly string[];
  /** The tools the agent reports (sbuild, autopkgtest, …) that are installed. */
  readonly tools: readonly string[];
  readonly speed: HostSpeed | null;
  /** The image handler (tagsched-handler.mjs) when one is installed, else null. */
  readonly handler: string | null;
}

/** The kinds of work a worker may be set up for. */
export const JOB_KINDS = ['builds', 'tests', 'images', 'mixed'] as const;
export type JobKind = (typeof JOB_KINDS)[number];

/** What one request of each kind takes, as a starting figure: CPUs, memory and disk in GiB. */
export const JOB_NEEDS: Readonly<Record<JobKind, { cpus: number; memoryGib: number; diskGib: number }>> = {
  builds: { cpus: 4, memoryGib: 4, diskGib: 20 },
  tests: { cpus: 2, memoryGib: 2, diskGib: 10 },
  images: { cpus: 2, memoryGib: 4, diskGib: 30 },
  mixed: { cpus: 2, memoryGib: 3, diskGib: 20 },
};

/** What a VM adds to a request's memory (its kernel, its own page cache), in GiB. */
export const VM_MEMORY_GIB = 1;

/** The answers to the questions. */
export interface Answers {
  readonly jobs: JobKind;
  readonly vms: boolean;
  readonly keepCpus: number;
  readonly keepMemoryGib: number;
  readonly keepDiskGib: number;
}

const GIB = 2 ** 30;
const gib = (bytes: number) => Math.floor(bytes / GIB);

/** The answers taken when none is given (`--yes`, or an empty line): the most common case. */
export function defaultAnswers(f: HostFacts): Answers {
  const memoryGib = gib(f.memoryBytes);
  return {
    jobs: 'mixed',
    vms: f.kvm && (f.executors.includes('qemu') || f.executors.includes('incus-vm')),
    keepCpus: f.cpuCount > 2 ? 1 : 0,
    keepMemoryGib: Math.max(1, Math.min(4, Math.floor(memoryGib / 10))),
    keepDiskGib: Math.max(5, Math.min(50, Math.floor(gib(f.disk.totalBytes ?? f.disk.freeBytes ?? 0) / 20))),
  };
}

/** One question: its key, its words, how its answer is read (or why it is refused), and its default in words. */
export interface Question<K extends keyof Answers = keyof Answers> {
  readonly key: K;
  readonly text: string;
  readonly read: (answer: string, f: HostFacts) => { value: Answers[K] } | { error: string };
  readonly shown: (value: Answers[K]) => string;
}

const yesNo = (answer: string): { value: boolean } | { error: string } => {
  const a = answer.trim().toLowerCase();
  if (['y', 'yes'].includes(a)) return { value: true };
  if (['n', 'no'].includes(a)) return { value: false };
  return { error: 'answer yes or no' };
};

const whole =
  (max: (f: HostFacts) => number, unit: string) =>
  (answer: string, f: HostFacts): { value: number } | { error: string } => {
    const a = answer.trim();
    const n = Number(a);
    const top = Math.max(0, max(f));
    if (!/^\d+$/.test(a) || !Number.isSafeInteger(n) || n > top)
      return { error: `answer a whole number of ${unit} from 0 to ${top}` };
    return { value: n };
  };

/** The questions, in the order they are asked. */
export const QUESTIONS: readonly Question[] = [
  {
    key: 'jobs',
    text: `What will this worker mostly run? (${JOB_KINDS.join(', ')})`,
    read: (answer) => {
      const a = answer.trim().toLowerCase();
      return (JOB_KINDS as readonly string[]).includes(a)
        ? { value: a as JobKind }
        : { error: `answer one of ${JOB_KINDS.join(', ')}` };
    },
    shown: (v) => String(v),
  } satisfies Question<'jobs'>,
  {
    key: 'vms',
    text: 'Run each job in a virtual machine? (yes, no)',
    read: (answer, f) => {
      const r = yesNo(answer);
      if ('value' in r && r.value && !f.kvm)
        return { error: 'this host has no /dev/kvm: a VM would run at emulation speed; answer no' };
      return r;
    },
    shown: (v) => (v ? 'yes' : 'no'),
  } satisfies Question<'vms'>,
  {
    key: 'keepCpus',
    text: 'CPUs to keep for the host',
    read: whole((f) => f.cpuCount - 1, 'CPUs'),
    shown: (v) => String(v),
  } satisfies Question<'keepCpus'>,
  {
    key: 'keepMemoryGib',
    text: 'Memory to keep for the host, in GiB',
    read: whole((f) => gib(f.memoryBytes) - 1, 'GiB'),
    shown: (v) => String(v),
  } satisfies Question<'keepMemoryGib'>,
  {
    key: 'keepDiskGib',
    text: 'Disk to keep free in the work directory, in GiB',
    read: whole((f) => gib(f.disk.freeBytes ?? 0), 'GiB'),
    shown: (v) => String(v),
  } satisfies Question<'keepDiskGib'>,
] as unknown as readonly Question[];

/** What the advisor proposes. */
export interface Proposal {
  /** Requests at once (the worker's concurrency). */
  readonly concurrency: number;
  /** What each run gets: -jN and its memory limit in MiB. */
  readonly parallel: number;
  readonly memoryLimitMib: number;
  /** What the host offers when it shares its resources instead of fixed slots. */
  readonly offer: { readonly cpus: number; readonly memoryGib: number; readonly diskGib: number };
  /** The compiler and package cache (ccache, apt) the host keeps, in GiB. */
  readonly cacheGib: number;
  /** The executors the agent will report; the first is the one jobs should ask for. */
  readonly executors: readonly string[];
  /** What stops the proposal being a good one, in words. */
  readonly warnings: readonly string[];
}

/** The share of the usable disk the cache takes, and its largest size in GiB. */
const CACHE_SHARE = 0.2;
const CACHE_MAX_GIB = 50;

/** The proposal for this host and these answers. */
export function propose(f: HostFacts, a: Answers): Proposal {
  const need = JOB_NEEDS[a.jobs];
  const warnings: string[] = [];
  const cpus = Math.max(1, f.cpuCount - a.keepCpus);
  const memoryGib = Math.max(1, gib(f.memoryBytes) - a.keepMemoryGib);
  const freeGib = f.disk.freeBytes === null ? null : Math.max(0, gib(f.disk.freeBytes) - a.keepDiskGib);
  const cacheGib = freeGib === null ? 0 : Math.min(CACHE_MAX_GIB, Math.floor(freeGib * CACHE_SHARE));
  const diskGib = freeGib === null ? null : freeGib - cacheGib;
  const perJobMemory = need.memoryGib + (a.vms ? VM_MEMORY_GIB : 0);
  const byCpu = Math.floor(cpus / need.cpus);
  const byMemory = Math.floor(memoryGib / perJobMemory);
  const byDisk = diskGib === null ? Infinity : Math.floor(diskGib / need.diskGib);
  const concurrency = Math.max(1, Math.min(byCpu, byMemory, byDisk));
  if (byMemory < 1)
    warnings.push(`${memoryGib} GiB of memory to share is less than one ${a.jobs} job takes (${perJobMemory} GiB)`);
  if (byDisk < 1)
    warnings.push(`${diskGib} GiB of disk to share is less than one ${a.jobs} job takes (${need.diskGib} GiB)`);
  if (freeGib === null) warnings.push(`the free disk of ${f.disk.dir} is unknown: the disk was not counted`);
  const vmExecutor = f.executors.find((e) => e === 'qemu' || e === 'incus-vm');
  if (a.vms && !vmExecutor) warnings.push('no VM executor was found (qemu-system with /dev/kvm, or incus)');
  if (!a.vms && !f.executors.includes('unshare') && !f.executors.includes('incus-lxc'))
    warnings.push('no container executor was found (unshare with ip, or incus)');
  const preferred = a.vms ? vmExecutor : f.executors.find((e) => e === 'unshare' || e === 'incus-lxc');
  const executors = preferred ? [preferred, ...f.executors.filter((e) => e !== preferred)] : [...f.executors];
  return {
    concurrency,
    parallel: Math.max(1, Math.floor(cpus / concurrency)),
    memoryLimitMib: Math.max(4, Math.floor((memoryGib * 1024) / concurrency)),
    offer: { cpus, memoryGib, diskGib: diskGib ?? 0 },
    cacheGib,
    executors,
    warnings,
  };
}

/** The tasks the image handler runs that a tool of the host serves. */
const HANDLED_BY_TOOL: Readonly<Record<string, string>> = {
  sbuild: 'sbuild',
  autopkgtest: 'autopkgtest',
  mmdebstrap: 'mmdebstrap',
};

/** A value as both a shell (`. file`) and systemd's EnvironmentFile read it: single-quoted unless plain. */
export const envValue = (v: string): string =>
  /^[A-Za-z0-9_./:=@%+,-]*$/.test(v) ? v : `'${v.replace(/'/g, `'\\''`)}'`;

const gibText = (bytes: number | null) => (bytes === null ? 'unknown' : `${gib(bytes)} GiB`);

/**
 * The environment file of the proposal: the agent's own variables (TAGSCHED_*), ccache's size, and
 * comments that say what was read and how to register the worker. `token`: a worker token to put in
 * it (only ever into a file, never on the terminal); `register`: the name it was registered as.
 */
export function envFile(
  f: HostFacts,
  a: Answers,
  p: Proposal,
  options: { server: string; now: Date; name?: string; token?: string },
): string {
  const speed = f.speed ? `, speed ${f.speed.single} on one core and ${f.speed.all} on ${f.speed.threads}` : '';
  const handled = f.tools.filter((t) => HANDLED_BY_TOOL[t]);
  const lines = [
    `# tagsched-worker configuration proposed by \`tagsched-worker advise\` on ${f.hostname}, ${options.now.toISOString()}`,
    `# host: ${f.cpuCount} CPUs${speed}, ${gib(f.memoryBytes)} GiB of memory, ${gibText(f.disk.freeBytes)} free of ${gibText(f.disk.totalBytes)} in ${f.disk.dir}, KVM ${f.kvm ? 'yes' : 'no'}`,
    `# runs natively: ${f.native.join(' ') || 'unknown'}; by emulation: ${f.emulated.join(' ') || 'none'}`,
    `# executors: ${p.executors.join(' ') || 'none'}; tools: ${f.tools.join(' ') || 'none'}`,
    `# answers: ${a.jobs}, VMs ${a.vms ? 'yes' : 'no'}, kept for the host: ${a.keepCpus} CPUs, ${a.keepMemoryGib} GiB of memory, ${a.keepDiskGib} GiB of disk`,
    ...p.warnings.map((w) => `# warning: ${w}`),
    '#',
    `# ${p.concurrency} request${p.concurrency === 1 ? '' : 's'} at once, each with -j${p.parallel} and ${p.memoryLimitMib} MiB; or shared: ${p.offer.cpus} CPUs, ${p.offer.memoryGib} GiB, ${p.offer.diskGib} GiB`,
    options.name
      ? `# registered as ${options.name} with concurrency ${p.concurrency} and these facts`
      : `# register it (an admin): tagsched-admin worker register ${f.hostname} --concurrency ${p.concurrency}`,
    `TAGSCHED_SERVER_URL=${envValue(options.server)}`,
    ...(options.token ? [`TAGSCHED_WORKER_TOKEN=${options.token}`] : []),
    `TAGSCHED_HANDLER_MEMORY_LIMIT=${p.memoryLimitMib}`,
    ...(handled.length && f.handler
      ? [
          `TAGSCHED_HANDLERS=${envValue(handled.map((t) => `${HANDLED_BY_TOOL[t]}=node ${f.handler} ${HANDLED_BY_TOOL[t]}`).join(';'))}`,
        ]
      : handled.length
        ? [
            `# ${handled.join(', ')} installed: give each a handler, e.g. TAGSCHED_HANDLERS=${handled[0]}=/usr/local/bin/run-${handled[0]}`,
          ]
        : []),
    `# each run's -jN is TAGSCHED_PARALLEL, which the agent sets from the idle CPUs (about ${p.parallel} here)`,
    `CCACHE_MAXSIZE=${p.cacheGib}G`,
    '',
  ];
  return lines.join('\n');
}
