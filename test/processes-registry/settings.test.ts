import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/core/config/config.js';
import { ConfigError } from '../../src/core/config/variables.js';

describe('the process registry settings', () => {
  it('default to a heartbeat every 3 s and a timeout of 15 s, read in seconds', () => {
    expect(loadConfig({}).server).toMatchObject({ processHeartbeatMs: 3_000, processTimeoutMs: 15_000 });
    const set = loadConfig({ TAGSCHED_PROCESS_HEARTBEAT_SECONDS: '0.5', TAGSCHED_PROCESS_TIMEOUT_SECONDS: '4' });
    expect(set.server).toMatchObject({ processHeartbeatMs: 500, processTimeoutMs: 4_000 });
  });

  it.each([
    [{ TAGSCHED_PROCESS_HEARTBEAT_SECONDS: '0' }, /TAGSCHED_PROCESS_HEARTBEAT_SECONDS must be above 0/],
    [{ TAGSCHED_PROCESS_TIMEOUT_SECONDS: 'soon' }, /TAGSCHED_PROCESS_TIMEOUT_SECONDS must be a non-negative number/],
    [
      { TAGSCHED_PROCESS_TIMEOUT_SECONDS: '5' },
      /TAGSCHED_PROCESS_TIMEOUT_SECONDS \(5\) must be at least twice TAGSCHED_PROCESS_HEARTBEAT_SECONDS \(3\)/,
    ],
  ])('refuse %j', (env, message) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(message);
  });
});
