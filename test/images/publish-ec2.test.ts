/**
 * `tagsched-image publish --provider ec2` against the EC2 stand-in (EBS direct APIs and the Query
 * API): the snapshot holds the disk byte for byte (all-zero blocks skipped), the AMI boots it with
 * the image's architecture, ENA and boot mode, both tagged with the image and its manifest's sha256;
 * a failed attempt leaves no snapshot nor AMI behind, and publishing again is one new attempt.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ec2PublishPlan, EBS_BLOCK, EC2_PUBLISH_TAGS } from '../../src/cli/image/publish-ec2.js';
import { openPublishImage, PublishError, runPublishPlan } from '../../src/cli/image/publish.js';
import { snapshotBytes } from '../provisioner/stand-ins/ebs.js';
import { startEc2StandIn, type Ec2StandIn } from '../provisioner/stand-ins/ec2.js';
import { makePublishImage, type PublishFixture } from './publish-image.js';

const KEY_ID = 'AKIAZ7TAGSCHEDPUBEC2';
const SECRET = 'publish-ec2-secret-access-key-77';
const account = { accessKeyId: KEY_ID, secretAccessKey: SECRET, region: 'eu-central-1' };
let ec2: Ec2StandIn;
let raw: PublishFixture;
let qcow2: PublishFixture;

beforeAll(async () => {
  ec2 = await startEc2StandIn({ credentials: { [KEY_ID]: { secretAccessKey: SECRET } }, images: [] });
  raw = makePublishImage('pub-ec2-raw');
  qcow2 = makePublishImage('pub-ec2-qcow', { format: 'qcow2', bootModes: ['uefi'], architecture: 'arm64' });
});
afterAll(async () => {
  await ec2.close();
  raw.remove();
  qcow2.remove();
});
beforeEach(() => {
  ec2.snapshots.clear();
  ec2.registeredImages.clear();
  ec2.ebsFaults.length = 0;
  ec2.requests.length = 0;
  ec2.snapshotPolls = 0;
});

const publish = async (fixture: PublishFixture) => {
  const image = await openPublishImage(fixture.dir, fixture.name);
  try {
    return await runPublishPlan(
      ec2PublishPlan(image, { account, ec2Endpoint: ec2.url, ebsEndpoint: ec2.url, pollMs: 5 }),
    );
  } finally {
    image.dispose();
  }
};
const count = (action: string) => ec2.requests.filter((r) => r.action === action).length;
const START = 'POST /snapshots';

describe('publishing to EC2', () => {
  it('writes the disk to a snapshot block by block, waits for it, and registers an AMI that boots it', async () => {
    ec2.snapshotPolls = 2;
    const { providerImageId, region } = await publish(raw);
    expect(region).toBe('eu-central-1');
    const ami = ec2.registeredImages.get(providerImageId)!;
    expect(ami).toMatchObject({
      name: `pub-ec2-raw-${raw.manifestSha256.slice(0, 12)}`,
      architecture: 'x86_64',
      rootDeviceName: '/dev/xvda',
      volumeType: 'gp3',
      enaSupport: true,
      bootMode: 'uefi-preferred',
      virtualizationType: 'hvm',
      tags: { [EC2_PUBLISH_TAGS.image]: 'pub-ec2-raw', [EC2_PUBLISH_TAGS.manifestSha256]: raw.manifestSha256 },
    });
    const snapshot = ec2.snapshots.get(ami.snapshotId)!;
    expect(snapshot.state).toBe('completed');
    expect(snapshot.volumeSizeGib).toBe(1);
    expect(snapshot.tags).toEqual({
      [EC2_PUBLISH_TAGS.image]: 'pub-ec2-raw',
      [EC2_PUBLISH_TAGS.manifestSha256]: raw.manifestSha256,
    });
    expect(snapshotBytes(snapshot, raw.raw.length).equals(raw.raw)).toBe(true);
    // 11 blocks: 0-1 data, 2-5 zeros, 6 data, 7-9 zeros, 10 the partial last one (padded with zeros).
    expect([...snapshot.blocks.keys()].sort((a, b) => a - b)).toEqual([0, 1, 6, 10]);
    expect(count(`PUT /snapshots/${snapshot.id}/blocks/2`)).toBe(0);
    expect(snapshot.blocks.get(10)!.length).toBe(EBS_BLOCK);
    expect(count('DescribeSnapshots')).toBe(3);
    expect(ec2.requests.every((r) => r.accessKeyId === KEY_ID)).toBe(true);
  });

  it('converts a qcow2 disk to raw, and registers an arm64 UEFI image', async () => {
    const { providerImageId } = await publish(qcow2);
    const ami = ec2.registeredImages.get(providerImageId)!;
    expect(ami).toMatchObject({ architecture: 'arm64', bootMode: 'uefi' });
    expect(snapshotBytes(ec2.snapshots.get(ami.snapshotId)!, qcow2.raw.length).equals(qcow2.raw)).toBe(true);
  });

  it('deletes the half-made snapshot when a block cannot be written, and a retry is one new attempt', async () => {
    ec2.ebsFaults.push({
      operation: 'PutSnapshotBlock',
      blockIndex: 6,
      status: 500,
      type: 'InternalServerException',
      message: 'disk on fire',
      times: 10,
    });
    const err = await publish(raw).then(
      () => null,
      (e: unknown) => e as Error,
    );
    expect(err).toBeInstanceOf(PublishError);
    expect(err!.message).toMatch(
      /PutSnapshotBlock 6 failed: InternalServerException: disk on fire; removed what this attempt made: snapshot snap-/,
    );
    expect(err!.message).not.toContain(SECRET);
    expect(err!.message).not.toContain(KEY_ID);
    expect(ec2.snapshots.size).toBe(0);
    expect(ec2.registeredImages.size).toBe(0);
    expect(count(START)).toBe(1);
    // The SDK retried the block (server errors are retried), then gave up.
    expect(
      count(
        `PUT /snapshots/${
          [...ec2.requests]
            .reverse()
            .find((r) => r.action.includes('/blocks/6'))!
            .action.split('/')[2]
        }/blocks/6`,
      ),
    ).toBe(4);

    ec2.ebsFaults.length = 0;
    ec2.requests.length = 0;
    const { providerImageId } = await publish(raw);
    expect(count(START)).toBe(1);
    expect(ec2.snapshots.size).toBe(1);
    expect([...ec2.registeredImages.keys()]).toEqual([providerImageId]);
  });

  it('deregisters nothing it did not make and deletes the completed snapshot when the AMI cannot be registered', async () => {
    // An AMI of the same name exists already: RegisterImage refuses.
    await publish(raw);
    const before = new Set(ec2.snapshots.keys());
    ec2.requests.length = 0;
    const err = await publish(raw).then(
      () => null,
      (e: unknown) => e as Error,
    );
    expect(err!.message).toMatch(/RegisterImage failed: InvalidAMIName.Duplicate/);
    expect(new Set(ec2.snapshots.keys())).toEqual(before);
    expect(ec2.registeredImages.size).toBe(1);
    expect(count('DeregisterImage')).toBe(0);
    expect(count('DeleteSnapshot')).toBe(1);
  });

  it('refuses a bad checksum at the stand-in: the aggregated checksum is checked', async () => {
    ec2.ebsFaults.push({
      operation: 'CompleteSnapshot',
      status: 400,
      type: 'ValidationException',
      message: 'The aggregated checksum does not match the blocks',
      times: 1,
    });
    await expect(publish(raw)).rejects.toThrow(
      /CompleteSnapshot failed: ValidationException: The aggregated checksum does not match the blocks; removed what this attempt made: snapshot/,
    );
    expect(ec2.snapshots.size).toBe(0);
  });
});
