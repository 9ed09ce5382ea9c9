/**
 * Everything the service can be told, in sections, read once from the environment: nobody else reads
 * process.env. Each section's file holds its type, its variables and their defaults; the composition
 * root (src/server/app.ts) hands each module the sections it uses, and a module declares only those
 * (`SchedulerConfig`, or `Pick<Config, 'leases' | 'workers'>` for one that reads two).
 *
 * A few settings exist for tests and benchmarks: TAGSCHED_SCHEDULER=manual (scheduler.ts), and
 * TAGSCHED_HETZNER_API_URL and TAGSCHED_EC2_ENDPOINT (providers.ts), which point the providers at
 * stand-ins. The line that reads each carries a `// for tests` comment, and the reference, grouped by the same
 * sections, marks them **For tests** (docs/reference/configuration.md; test/docs/settings.test.ts
 * checks that the two agree).
 */
import { readApiConfig, type ApiConfig } from './api.js';
import { readInputConfig, type InputConfig } from './input.js';
import { readLeasesConfig, type LeasesConfig } from './leases.js';
import { readLimitsConfig, type LimitsConfig } from './limits.js';
import { readProvidersConfig, type ProvidersConfig } from './providers.js';
import { readProvisionerConfig, type ProvisionerConfig } from './provisioner.js';
import { readSchedulerConfig, type SchedulerConfig } from './scheduler.js';
import { readServerConfig, type ServerConfig } from './server.js';
import { readServerWorkersConfig, type ServerWorkersConfig } from './server-workers.js';
import { readStatisticsConfig, type StatisticsConfig } from './statistics.js';
import { readTagsConfig, type TagsConfig } from './tags.js';
import { readWorkersConfig, type WorkersConfig } from './workers.js';

/** The whole configuration: one frozen object per section. */
export interface Config {
  readonly server: ServerConfig;
  readonly api: ApiConfig;
  readonly limits: LimitsConfig;
  readonly input: InputConfig;
  readonly tags: TagsConfig;
  readonly scheduler: SchedulerConfig;
  readonly leases: LeasesConfig;
  readonly workers: WorkersConfig;
  readonly statistics: StatisticsConfig;
  readonly serverWorkers: ServerWorkersConfig;
  readonly provisioner: ProvisionerConfig;
  readonly providers: ProvidersConfig;
}

/** Settings put over those the environment gives, section by section (a test's, a benchmark's): each names only what it changes. */
export type ConfigOverrides = { readonly [S in keyof Config]?: Partial<Config[S]> };

/** A section's values with its overrides on top, frozen. */
function section<T extends object>(values: T, overrides: Partial<T> | undefined): T {
  return Object.freeze({ ...values, ...overrides });
}

/** Reads the configuration from an environment (process.env by default) into frozen sections, with `overrides` on top. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, overrides: ConfigOverrides = {}): Config {
  const server = readServerConfig(env);
  return Object.freeze({
    server: section(server, overrides.server),
    tags: section(readTagsConfig(env), overrides.tags),
    workers: section(readWorkersConfig(env), overrides.workers),
    scheduler: section(readSchedulerConfig(env), overrides.scheduler),
    statistics: section(readStatisticsConfig(env), overrides.statistics),
    input: section(readInputConfig(env), overrides.input),
    leases: section(readLeasesConfig(env), overrides.leases),
    limits: section(readLimitsConfig(env), overrides.limits),
    api: section(readApiConfig(env), overrides.api),
    providers: section(readProvidersConfig(env, server.dataDir), overrides.providers),
    serverWorkers: section(readServerWorkersConfig(env), overrides.serverWorkers),
    provisioner: section(readProvisionerConfig(env), overrides.provisioner),
  });
}
