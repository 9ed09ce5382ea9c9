import { describe, expect, it } from 'vitest';
import {
  agentConfigFile,
  AGENT_CONFIG_PATH,
  cloudInitUserData,
  parseAgentConfigFile,
} from '../../src/providers/user-data.js';

const agent = {
  serverUrl: 'https://ci.example.org:4000/graphql',
  activationToken: 'tsk_activation_AbC-d_9',
  workerName: 'amd64-large-0001',
};

describe('agent bootstrap files', () => {
  it('writes the three variables the agent reads, and reads them back', () => {
    expect(parseAgentConfigFile(agentConfigFile(agent))).toEqual({
      TAGSCHED_SERVER_URL: agent.serverUrl,
      TAGSCHED_ACTIVATION_TOKEN: agent.activationToken,
      TAGSCHED_WORKER_NAME: agent.workerName,
    });
  });

  it('puts the same file in cloud-init user data, root-only, and restarts the unit', () => {
    const data = cloudInitUserData(agent);
    expect(data.startsWith('#cloud-config\n')).toBe(true);
    expect(data).toContain(`path: ${AGENT_CONFIG_PATH}`);
    expect(data).toContain("permissions: '0600'");
    expect(data).toContain(`      TAGSCHED_ACTIVATION_TOKEN=${agent.activationToken}\n`);
    expect(data).toContain('[systemctl, --no-block, restart, tagsched-worker.service]');
  });

  it.each([
    ['a newline', { ...agent, workerName: 'a\nTAGSCHED_SERVER_URL=http://evil' }],
    ['a quote', { ...agent, serverUrl: 'http://x/"graphql' }],
    ['a space', { ...agent, activationToken: 'tsk a' }],
    ['an expansion', { ...agent, workerName: '$(reboot)' }],
    ['nothing', { ...agent, workerName: '' }],
  ])('refuses a value with %s', (_what, bad) => {
    expect(() => agentConfigFile(bad)).toThrow(/cannot carry safely/);
  });

  it('refuses a line that is not KEY=VALUE', () => {
    expect(() => parseAgentConfigFile('# comment\n\nno equals sign\n')).toThrow(/not KEY=VALUE/);
  });
});
