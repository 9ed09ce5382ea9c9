/**
 * The agent's look for EC2's spot interruption notice (src/agent/interruption.ts), against the
 * instance metadata stand-in (IMDSv2): a session token first, then no notice (404), then the notice.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ec2SpotNotice } from '../../src/agent/interruption.js';
import { startMetadataStandIn, type MetadataStandIn } from '../provisioner/stand-ins/ec2-metadata.js';

let imds: MetadataStandIn;
beforeAll(async () => {
  imds = await startMetadataStandIn();
});
afterAll(() => imds.close());

describe('the EC2 spot interruption notice', () => {
  it('is none until the provider schedules one, then says what and when; one session token serves every look', async () => {
    const look = ec2SpotNotice(`${imds.url}/`, 2_000);
    expect(await look()).toBeNull();
    expect(await look()).toBeNull();
    imds.interrupt({ action: 'terminate', time: '2026-11-28T08:02:00Z' });
    expect(await look()).toEqual({ action: 'terminate', time: '2026-11-28T08:02:00.000Z' });
    expect(imds.requests.filter((r) => r === 'PUT /latest/api/token')).toHaveLength(1);
    expect(imds.requests.filter((r) => r === 'GET /latest/meta-data/spot/instance-action')).toHaveLength(3);
  });

  it('throws when the service cannot be reached, for the agent to try again', async () => {
    await expect(ec2SpotNotice('http://127.0.0.1:9', 500)()).rejects.toThrow();
  });
});
