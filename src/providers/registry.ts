/**
 * The provider registry: a pool's `providerType` names one of these. Each entry makes the provider
 * of its type for one server process (the provisioner makes it the first time a pool of that type
 * needs it), and may check a pool of that type when it is created or changed. Adding a provider is
 * adding its file under providers/ and its entries here.
 */
import type { ProvidersConfig } from '../core/config/providers.js';
import type { InputProblem } from '../core/errors.js';
import type { ProviderFactory } from './provider.js';
import { createEc2Provider, validateEc2Pool } from './ec2.js';
import { createExecProvider, validateExecPool } from './exec.js';
import { createHetznerProvider, validateHetznerPool } from './hetzner.js';
import { createLocalProvider } from './local.js';
import { createQemuProvider, validateQemuPool } from './qemu.js';
import type { PoolProviderInput } from './spec-checks.js';

/** Checks a pool of one provider type (its name, specifications and account): every problem, none thrown. */
export type PoolValidator = (pool: PoolProviderInput, config: ProvidersConfig) => InputProblem[];

const PROVIDERS = new Map<string, ProviderFactory>([
  // tagsched-worker processes on the server's own machine (development, demos, tests, one-host farms).
  ['local', createLocalProvider],
  // A command of the site's, allowed by TAGSCHED_EXEC_COMMANDS, speaking JSON on stdin and stdout.
  [
    'exec',
    ({ config, log }) =>
      createExecProvider({
        allowedCommands: config.providers.execCommands,
        environment: config.providers.execEnvironment,
        logger: log,
      }),
  ],
  // Hetzner Cloud servers, at TAGSCHED_HETZNER_API_URL.
  ['hetzner', ({ config, log }) => createHetznerProvider({ apiUrl: config.providers.hetznerApiUrl, logger: log })],
  // AWS EC2 instances through the official SDK, at TAGSCHED_EC2_ENDPOINT or the region's endpoint.
  ['ec2', ({ config, log }) => createEc2Provider({ endpoint: config.providers.ec2Endpoint, logger: log })],
  // QEMU virtual machines on the server's own host, booted from a registered image's disk (TAGSCHED_QEMU_IMAGE_DIR).
  ['qemu', createQemuProvider],
]);

const VALIDATORS = new Map<string, PoolValidator>([
  ['exec', (pool, config) => validateExecPool(pool, { allowedCommands: config.execCommands })],
  ['hetzner', (pool) => validateHetznerPool(pool)],
  ['ec2', (pool) => validateEc2Pool(pool)],
  ['qemu', (pool, config) => validateQemuPool(pool, config)],
]);

/** Provider types whose agents run the pool's `handlers` on the server's own machine (pool-specifications.ts). */
const RUNS_HANDLERS = new Set(['local']);

/** Whether pools of this provider type run `handlers`. */
export function runsHandlers(type: string): boolean {
  return RUNS_HANDLERS.has(type);
}

/**
 * Provider types that run machines on the host of the process that launches them and list them from
 * that host's files: a pool of one names its host (worker_pool.host, scheduler/rules/pool-host.ts).
 */
const HOST_BOUND = new Set(['local', 'qemu']);

/** Whether pools of this provider type run only on one host. */
export function hostBound(type: string): boolean {
  return HOST_BOUND.has(type);
}

/** The provider types a pool may name, in registry order. */
export function providerTypes(): string[] {
  return [...PROVIDERS.keys()];
}

/** The factory of a provider type, if this build has one. */
export function providerFactory(type: string): ProviderFactory | undefined {
  return PROVIDERS.get(type);
}

/** What the pool's provider finds wrong with it; none for a type that checks nothing of its own. */
export function poolProviderProblems(type: string, pool: PoolProviderInput, config: ProvidersConfig): InputProblem[] {
  return VALIDATORS.get(type)?.(pool, config) ?? [];
}

/**
 * Adds (or replaces) a provider type at run time: tests register stand-ins this way, in their own
 * process or in a server process they start (a module given to `node --import`). Returns a function
 * that puts back what was there before.
 */
export function registerProvider(
  type: string,
  factory: ProviderFactory,
  options: { runsHandlers?: boolean; hostBound?: boolean } = {},
): () => void {
  const before = PROVIDERS.get(type);
  const handled = RUNS_HANDLERS.has(type);
  const bound = HOST_BOUND.has(type);
  PROVIDERS.set(type, factory);
  if (options.runsHandlers) RUNS_HANDLERS.add(type);
  else RUNS_HANDLERS.delete(type);
  if (options.hostBound) HOST_BOUND.add(type);
  else HOST_BOUND.delete(type);
  return () => {
    if (before) PROVIDERS.set(type, before);
    else PROVIDERS.delete(type);
    if (handled) RUNS_HANDLERS.add(type);
    else RUNS_HANDLERS.delete(type);
    if (bound) HOST_BOUND.add(type);
    else HOST_BOUND.delete(type);
  };
}
