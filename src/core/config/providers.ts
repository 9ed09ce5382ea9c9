import path from 'node:path';
import { ConfigError, intVar, positiveIntVar, urlVar } from './variables.js';

/** Server variables an exec command inherits: a search path, a locale, a home, proxies; nothing else. */
export const EXEC_ENVIRONMENT_VARIABLES = [
  'PATH',
  'HOME',
  'LANG',
  'LC_ALL',
  'TZ',
  'TMPDIR',
  'HTTP_PROXY',
  'HTTPS_PROXY',
  'NO_PROXY',
  'http_proxy',
  'https_proxy',
  'no_proxy',
] as const;

/** What the provider drivers (src/providers/) may run and call, where they keep their files, and how long a call or a stop may take. */
export interface ProvidersConfig {
  /** The longest one provider call (launch, terminate, list) may take before it counts as a timeout, in milliseconds. */
  readonly callTimeoutMs: number;
  /** Between asking an instance to stop (SIGTERM for local agents) and forcing it (SIGKILL), in milliseconds. */
  readonly stopGraceMs: number;
  /** The commands `exec` pools may run (absolute paths); empty means exec pools are off. */
  readonly execCommands: readonly string[];
  /** The environment an `exec` command runs with: a few variables of the server's, never its secrets. */
  readonly execEnvironment: Readonly<Record<string, string>>;
  /** The Hetzner Cloud API base URL (`…/v1`), without a trailing slash. For tests: they point it at a stand-in. */
  readonly hetznerApiUrl: string;
  /** The EC2 endpoint URL; null means the SDK's own endpoint for the account's region. For tests: they point it at a stand-in. */
  readonly ec2Endpoint: string | null;
  /** Where the qemu provider finds the disk images of registered worker images (the output directory of `tagsched-image build`); null: no qemu pool can be made. */
  readonly qemuImageDir: string | null;
  /** Where the qemu provider keeps each virtual machine's overlay, seed, pid file and monitor socket. */
  readonly qemuStateDir: string;
  /** The qemu provider's accelerator: `auto` probes KVM once per image and falls back to TCG. */
  readonly qemuAccel: 'auto' | 'kvm' | 'tcg';
  /** Where providers keep each instance's log (agent output, serial console), also after the instance is gone. */
  readonly instanceLogDir: string;
  /** How long an instance log untouched for that long is kept, in milliseconds. */
  readonly instanceLogRetentionMs: number;
}

/** Reads the providers section from the environment; its directories default to places under the server's `dataDir`. */
export function readProvidersConfig(env: NodeJS.ProcessEnv, dataDir: string): ProvidersConfig {
  return {
    callTimeoutMs: intVar(env, 'TAGSCHED_PROVIDER_TIMEOUT_SECONDS', 60) * 1000, // one minute
    stopGraceMs: intVar(env, 'TAGSCHED_STOP_GRACE_SECONDS', 60) * 1000, // one minute
    execCommands: commandListVar(env, 'TAGSCHED_EXEC_COMMANDS'),
    execEnvironment: pickEnvironment(env, EXEC_ENVIRONMENT_VARIABLES),
    hetznerApiUrl: urlVar(env, 'TAGSCHED_HETZNER_API_URL', 'https://api.hetzner.cloud/v1'), // for tests
    ec2Endpoint: urlVar(env, 'TAGSCHED_EC2_ENDPOINT', null), // for tests
    qemuImageDir: env.TAGSCHED_QEMU_IMAGE_DIR ? path.resolve(env.TAGSCHED_QEMU_IMAGE_DIR) : null,
    qemuStateDir: path.resolve(env.TAGSCHED_QEMU_STATE_DIR || path.join(dataDir, 'qemu')),
    qemuAccel: qemuAccelVar(env),
    instanceLogDir: path.join(dataDir, 'instance-logs'),
    instanceLogRetentionMs: positiveIntVar(env, 'TAGSCHED_INSTANCE_LOG_RETENTION_DAYS', 14) * 24 * 60 * 60 * 1000, // two weeks
  };
}

/** Parses `/usr/local/bin/a,/opt/b` into absolute, normalised paths. */
function commandListVar(env: NodeJS.ProcessEnv, name: string): string[] {
  const raw = env[name];
  if (!raw) return [];
  return raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((command) => {
      if (!path.isAbsolute(command) || path.normalize(command) !== command) {
        throw new ConfigError(
          `${name}: "${command}" is not an absolute, normalised path (like /usr/local/bin/provider)`,
        );
      }
      return command;
    });
}

function qemuAccelVar(env: NodeJS.ProcessEnv): ProvidersConfig['qemuAccel'] {
  const value = env.TAGSCHED_QEMU_ACCEL || 'auto';
  if (value === 'auto' || value === 'kvm' || value === 'tcg') return value;
  throw new ConfigError(`TAGSCHED_QEMU_ACCEL must be auto, kvm or tcg, not "${value.slice(0, 40)}"`);
}

function pickEnvironment(env: NodeJS.ProcessEnv, names: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of names) {
    const value = env[name];
    if (value !== undefined) out[name] = value;
  }
  return out;
}
