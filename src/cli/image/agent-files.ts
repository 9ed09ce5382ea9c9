/**
 * The files that make an image boot as a worker: where the agent and its handler live, the
 * system user its handlers run as, the systemd unit, and the settings the image fixes (image.env). The
 * server URL and the activation token come from /etc/tagsched-worker/config, which cloud-init
 * user data writes (src/providers/user-data.ts) or an operator writes by hand.
 */
import path from 'node:path';
import { EXIT_CODES } from '../../agent/agent.js';
import { AGENT_CONFIG_PATH } from '../../providers/user-data.js';
import { HANDLER_ENV } from './handlers.js';

/** Paths inside the image. */
export const IMAGE_PATHS = {
  libDir: '/usr/lib/tagsched-worker',
  agent: '/usr/lib/tagsched-worker/tagsched-worker.mjs',
  handler: '/usr/lib/tagsched-worker/tagsched-handler.mjs',
  /** The licenses of the packages bundled in the agent and the handler. */
  licenses: '/usr/lib/tagsched-worker/LICENSES',
  unit: '/usr/lib/systemd/system/tagsched-worker.service',
  imageEnv: '/etc/tagsched-worker/image.env',
  config: AGENT_CONFIG_PATH,
  /** The handler user's home: the agent's work directory (runs/) and sbuild's cache. */
  home: '/var/lib/tagsched-worker',
  /** The agent's state file (its worker token), in a directory of root's that handlers never see (agent/isolation.ts). */
  stateFile: '/var/lib/tagsched-agent/state.json',
} as const;

/** The system user handlers run as (the agent runs as root and starts them as this user, TAGSCHED_HANDLER_USER). */
export const AGENT_USER = 'tagsched-worker';

/** Subordinate user and group ids of the handler user, for unshare builds (sbuild, autopkgtest). */
export const SUBORDINATE_IDS = { first: 100000, count: 65536 } as const;

/** The agent's exit codes that a restart cannot cure: token refused, bad usage. */
const NO_RESTART_EXIT_CODES = [EXIT_CODES.tokenRefused, EXIT_CODES.usage];

/** The `TAGSCHED_HANDLERS` value: each handled task run by the image's handler. */
export function handlersValue(tasks: readonly string[]): string {
  return tasks.map((task) => `${task}=/usr/bin/node ${IMAGE_PATHS.handler} ${task}`).join(';');
}

/** /etc/tagsched-worker/image.env: what the image fixes, read before the site's config (which may override it). */
export function imageEnvFile(options: { suite: string; architecture: string; tasks: readonly string[] }): string {
  return [
    '# Written by tagsched-image. /etc/tagsched-worker/config is read after this file and may override it.',
    `TAGSCHED_WORK_DIR=${IMAGE_PATHS.home}`,
    `TAGSCHED_HANDLERS=${handlersValue(options.tasks)}`,
    `${HANDLER_ENV.suite}=${options.suite}`,
    `${HANDLER_ENV.architecture}=${options.architecture}`,
    '',
  ].join('\n');
}

/**
 * The agent's unit. It starts once the config file exists, after cloud-init is done (cloud-init
 * also restarts it after writing the file). It is wanted by multi-user.target but ordered after
 * cloud-init.target, which comes after multi-user.target: with systemd's default dependencies
 * multi-user.target would be ordered after the unit too, a cycle that systemd breaks at boot by
 * dropping the unit's start, so the unit states its defaults itself (DefaultDependencies=no: the
 * target adds no ordering) and keeps the rest of them: after sysinit and basic, stopped before
 * shutdown. systemd reads both environment files as root, so the config may stay 0600 root. A
 * stop sends SIGTERM to the agent only (KillMode=mixed), which drains: running builds finish and
 * are reported, and only after TimeoutStopSec is everything left killed. The agent runs as root and
 * its handlers as AGENT_USER, so that no handler can read the worker token; the state file lives in
 * a directory only root may enter (StateDirectory, 0700). The environment files may override both.
 */
export function agentUnit(): string {
  return [
    '[Unit]',
    'Description=tagsched worker agent',
    'DefaultDependencies=no',
    'Requires=sysinit.target',
    'Wants=network-online.target',
    'After=sysinit.target basic.target network-online.target cloud-init.target',
    'Conflicts=shutdown.target',
    'Before=shutdown.target',
    `ConditionPathExists=${IMAGE_PATHS.config}`,
    '',
    '[Service]',
    'Type=exec',
    `Environment=TAGSCHED_HANDLER_USER=${AGENT_USER}`,
    `Environment=TAGSCHED_STATE_FILE=${IMAGE_PATHS.stateFile}`,
    `StateDirectory=${path.posix.basename(path.posix.dirname(IMAGE_PATHS.stateFile))}`,
    'StateDirectoryMode=0700',
    `EnvironmentFile=${IMAGE_PATHS.imageEnv}`,
    `EnvironmentFile=${IMAGE_PATHS.config}`,
    `WorkingDirectory=${IMAGE_PATHS.home}`,
    `ExecStart=/usr/bin/node ${IMAGE_PATHS.agent}`,
    'Restart=on-failure',
    'RestartSec=10s',
    `RestartPreventExitStatus=${NO_RESTART_EXIT_CODES.join(' ')}`,
    // Its cgroup's memory controller is the agent's to hand down: each run gets a leaf of its own (src/agent/cgroup.ts).
    'Delegate=memory',
    'KillMode=mixed',
    'TimeoutStopSec=6h',
    '',
    '[Install]',
    'WantedBy=multi-user.target',
    '',
  ].join('\n');
}
