/**
 * `tagsched-image publish --provider hetzner` against the Hetzner stand-in and its rescue system (a
 * real SSH server): a temporary key and server, the rescue system, the disk streamed into dd and
 * read back, a labelled snapshot holding the disk byte for byte, and nothing temporary left; a
 * failed attempt leaves no server, key or half-made snapshot behind, and publishing again is one
 * new attempt.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { hetznerPublishPlan, HETZNER_PUBLISH_LABELS } from '../../src/cli/image/publish-hetzner.js';
import { openPublishImage, PublishError, runPublishPlan } from '../../src/cli/image/publish.js';
import { startHetznerStandIn, type HetznerStandIn } from '../provisioner/stand-ins/hetzner.js';
import { makePublishImage, type PublishFixture } from './publish-image.js';

const TOKEN = 'hz-publish-token-Wq93kLm2Zx';
let api: HetznerStandIn;
let raw: PublishFixture;
let qcow2: PublishFixture;

beforeAll(async () => {
  api = await startHetznerStandIn({ tokens: [TOKEN] });
  raw = makePublishImage('pub-hz-raw');
  qcow2 = makePublishImage('pub-hz-qcow', { format: 'qcow2', architecture: 'arm64' });
});
afterAll(async () => {
  await api.close();
  raw.remove();
  qcow2.remove();
});
beforeEach(() => {
  api.servers.clear();
  api.sshKeys.clear();
  api.images.clear();
  api.requests.length = 0;
  api.rescue.commands.length = 0;
  api.rescue.failWrites = false;
  api.failActions.clear();
  api.actionPolls = 1;
});

const publish = async (fixture: PublishFixture) => {
  const image = await openPublishImage(fixture.dir, fixture.name);
  try {
    return await runPublishPlan(
      hetznerPublishPlan(image, {
        token: TOKEN,
        apiUrl: api.url,
        location: 'nbg1',
        sshPort: api.rescuePort,
        pollMs: 5,
        waitMs: 10_000,
      }),
    );
  } finally {
    image.dispose();
  }
};
const failure = (fixture: PublishFixture) =>
  publish(fixture).then(
    () => {
      throw new Error('the publish did not fail');
    },
    (e: unknown) => e as Error,
  );
const posts = (path: RegExp) => api.requests.filter((r) => r.method === 'POST' && path.test(r.path));

describe('publishing to Hetzner', () => {
  it('writes the disk through the rescue system, snapshots it with its labels, and deletes the temporary server and key', async () => {
    const { providerImageId, region } = await publish(raw);
    expect(region).toBe('global');
    const snapshot = api.images.get(Number(providerImageId))!;
    expect(snapshot.status).toBe('available');
    expect(snapshot.labels).toEqual({
      [HETZNER_PUBLISH_LABELS.image]: 'pub-hz-raw',
      [HETZNER_PUBLISH_LABELS.manifestSha256First]: raw.manifestSha256.slice(0, 32),
      [HETZNER_PUBLISH_LABELS.manifestSha256Second]: raw.manifestSha256.slice(32),
    });
    expect(snapshot.description).toContain(raw.manifestSha256);
    expect(snapshot.disk.equals(raw.raw)).toBe(true);
    expect(api.servers.size).toBe(0);
    expect(api.sshKeys.size).toBe(0);
    const [server] = posts(/^\/v1\/servers$/);
    expect(server!.body).toMatchObject({
      server_type: 'cx22',
      location: 'nbg1',
      image: 'debian-12',
      start_after_create: false,
    });
    expect(posts(/\/actions\/enable_rescue$/)[0]!.body).toMatchObject({
      type: 'linux64',
      ssh_keys: [expect.any(Number)],
    });
    expect(api.rescue.commands.map((c) => c.command)).toEqual([
      'dd of=/dev/sda bs=4M conv=fsync status=none',
      `head -c ${raw.raw.length} /dev/sda | sha256sum`,
    ]);
    expect(api.requests.every((r) => r.authorization === `Bearer ${TOKEN}`)).toBe(true);
  });

  it('converts a qcow2 disk and boots an arm64 server type for an arm64 image', async () => {
    const { providerImageId } = await publish(qcow2);
    expect(api.images.get(Number(providerImageId))!.disk.equals(qcow2.raw)).toBe(true);
    expect(posts(/^\/v1\/servers$/)[0]!.body).toMatchObject({ server_type: 'cax11' });
  });

  it('deletes the server and key when the disk cannot be written, and a retry is one new attempt', async () => {
    api.rescue.failWrites = true;
    const err = await failure(raw);
    expect(err).toBeInstanceOf(PublishError);
    expect(err.message).toMatch(
      /dd on the rescue system failed \(exit 1\): dd: error writing '\/dev\/sda': No space left on device; removed what this attempt made: server \d+, SSH key \d+/,
    );
    expect(err.message).not.toContain(TOKEN);
    expect(api.servers.size + api.sshKeys.size + api.images.size).toBe(0);
    expect(posts(/^\/v1\/servers$/)).toHaveLength(1);

    api.rescue.failWrites = false;
    api.requests.length = 0;
    const { providerImageId } = await publish(raw);
    expect(posts(/^\/v1\/servers$/)).toHaveLength(1);
    expect(posts(/^\/v1\/ssh_keys$/)).toHaveLength(1);
    expect([...api.images.keys()]).toEqual([Number(providerImageId)]);
    expect(api.servers.size + api.sshKeys.size).toBe(0);
  });

  it('deletes a half-made snapshot with the server and key when the snapshot fails', async () => {
    api.failActions.set('create_image', 1);
    const err = await failure(raw);
    expect(err.message).toMatch(
      /create the snapshot: create_image failed \(action_failed\); removed what this attempt made: snapshot \d+, server \d+, SSH key \d+/,
    );
    expect(api.servers.size + api.sshKeys.size + api.images.size).toBe(0);
  });

  it('says so and removes what it made when the API refuses a call, without the token', async () => {
    api.failActions.set('start_server', 1);
    const err = await failure(raw);
    expect(err.message).toMatch(/power on: start_server failed/);
    expect(api.servers.size + api.sshKeys.size).toBe(0);
    const bad = await openPublishImage(raw.dir, raw.name);
    try {
      await expect(
        runPublishPlan(
          hetznerPublishPlan(bad, {
            token: 'not-the-token-x1',
            apiUrl: api.url,
            location: 'nbg1',
            sshPort: api.rescuePort,
            pollMs: 5,
          }),
        ),
      ).rejects.toThrow(/create the SSH key: unable to authenticate \(unauthorized\)$/);
    } finally {
      bad.dispose();
    }
  });
});
