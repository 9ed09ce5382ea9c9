import { DEFAULT_SIZE_THRESHOLDS, type SizeThresholds } from '../tags/size-class.js';
import { ConfigError } from './variables.js';

/** The tags the server derives itself: the architecture of executor tasks that name none, and the size classes of workers. */
export interface TagsConfig {
  readonly defaultArchitecture: string;
  readonly sizeThresholds: SizeThresholds;
}

/** Reads the tags section from the environment. */
export function readTagsConfig(env: NodeJS.ProcessEnv): TagsConfig {
  return {
    defaultArchitecture: env.TAGSCHED_DEFAULT_ARCHITECTURE || 'amd64',
    sizeThresholds: {
      medium: floorVar(env, 'TAGSCHED_SIZE_MEDIUM', DEFAULT_SIZE_THRESHOLDS.medium),
      big: floorVar(env, 'TAGSCHED_SIZE_BIG', DEFAULT_SIZE_THRESHOLDS.big),
    },
  };
}

/** Parses `cpu=4,memory=8,disk=50` (memory and disk in GiB). */
function floorVar(env: NodeJS.ProcessEnv, name: string, fallback: SizeThresholds['medium']): SizeThresholds['medium'] {
  const raw = env[name];
  if (!raw) return fallback;
  const out = { cpuCount: fallback.cpuCount, memoryGib: fallback.memoryGib, diskGib: fallback.diskGib };
  for (const part of raw.split(',')) {
    const [key, value] = part.split('=').map((s) => s.trim());
    const n = Number(value);
    if (!Number.isFinite(n) || n < 0) throw new ConfigError(`${name}: "${part}" is not key=number`);
    if (key === 'cpu') out.cpuCount = n;
    else if (key === 'memory') out.memoryGib = n;
    else if (key === 'disk') out.diskGib = n;
    else throw new ConfigError(`${name}: unknown key "${key}" (expected cpu, memory or disk)`);
  }
  return out;
}
