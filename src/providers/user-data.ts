/**
 * How a new machine learns where its server is and how to activate: one small file,
 * `/etc/tagsched-worker/config`, in the `KEY=VALUE` form that systemd's `EnvironmentFile=` and the
 * agent's environment both read. Cloud providers carry it in cloud-init user data, which writes it
 * before the agent's unit starts; worker images read only this file (docs/design.md: pools and instances and images).
 */

/** Where the agent's unit in a worker image reads its settings. */
export const AGENT_CONFIG_PATH = '/etc/tagsched-worker/config';

/** What a new machine needs to become a worker: the server, a one-shot activation token, its name. */
export interface AgentBootstrap {
  /** The GraphQL endpoint the agent connects to (`https://ci.example.org/graphql`). */
  readonly serverUrl: string;
  readonly activationToken: string;
  readonly workerName: string;
}

// Values go into a file that systemd and shells read: nothing that could be taken for quoting,
// an expansion or a second line.
const SAFE_VALUE = /^[A-Za-z0-9:/._~%+@=,-]+$/;

function checked(key: string, value: string): string {
  if (!SAFE_VALUE.test(value)) throw new Error(`${key}: the value has characters a config file cannot carry safely`);
  return value;
}

/** The agent's config file for a bootstrap: the three variables the agent reads. */
export function agentConfigFile(agent: AgentBootstrap): string {
  return [
    `TAGSCHED_SERVER_URL=${checked('serverUrl', agent.serverUrl)}`,
    `TAGSCHED_ACTIVATION_TOKEN=${checked('activationToken', agent.activationToken)}`,
    `TAGSCHED_WORKER_NAME=${checked('workerName', agent.workerName)}`,
    '',
  ].join('\n');
}

/** Reads a config file back into variables (blank lines and `#` comments skipped). */
export function parseAgentConfigFile(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!line || line.startsWith('#')) continue;
    const eq = line.indexOf('=');
    if (eq <= 0) throw new Error(`not KEY=VALUE: "${line.slice(0, 80)}"`);
    out[line.slice(0, eq)] = line.slice(eq + 1);
  }
  return out;
}

/**
 * Cloud-init user data that writes the config file (root only: it holds the activation token) and
 * restarts the agent's unit, so that a unit started before cloud-init wrote the file reads it. The
 * restart does not wait (--no-block): the image's unit is ordered after cloud-init.target, which
 * waits for cloud-init's final stage, the one that runs this command, so a restart that waited for
 * the unit would wait for itself and the agent would never start.
 */
export function cloudInitUserData(agent: AgentBootstrap): string {
  const content = agentConfigFile(agent)
    .split('\n')
    .map((line) => (line ? `      ${line}` : line))
    .join('\n');
  return [
    '#cloud-config',
    'write_files:',
    `  - path: ${AGENT_CONFIG_PATH}`,
    "    permissions: '0600'",
    '    owner: root:root',
    '    content: |',
    content.trimEnd(),
    'runcmd:',
    '  - [systemctl, --no-block, restart, tagsched-worker.service]',
    '',
  ].join('\n');
}
