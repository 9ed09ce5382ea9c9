/**
 * Publishing a worker image to EC2: its raw disk becomes an EBS snapshot through the EBS direct APIs
 * (StartSnapshot, PutSnapshotBlock for each 512 KiB block that is not all zeros, with its SHA256,
 * CompleteSnapshot with the count of blocks and their LINEAR aggregated checksum), through the
 * official SDK's EBS client; once DescribeSnapshots says `completed`, RegisterImage makes an AMI of it
 * with the image's architecture, ENA support and boot mode. The snapshot and the AMI are tagged with
 * the image's name and its manifest's sha256. A failed attempt deletes what it made (the AMI, the
 * snapshot). Credentials come from the account file; nothing of them reaches a message.
 */
import { randomUUID, createHash } from 'node:crypto';
import fs from 'node:fs/promises';
import { CompleteSnapshotCommand, EBSClient, PutSnapshotBlockCommand, StartSnapshotCommand } from '@aws-sdk/client-ebs';
import {
  DeleteSnapshotCommand,
  DeregisterImageCommand,
  DescribeSnapshotsCommand,
  EC2Client,
  RegisterImageCommand,
  type BootModeValues,
} from '@aws-sdk/client-ec2';
import { accountRedactor } from '../../providers/redact.js';
import { PublishError, type PublishImage, type PublishPlan } from './publish.js';

/** The block size of EBS snapshots (the EBS direct APIs write whole blocks). */
export const EBS_BLOCK = 524_288;
const GIB = 2 ** 30;

/** The tags the snapshot and the AMI carry. */
export const EC2_PUBLISH_TAGS = { image: 'tagsched:image', manifestSha256: 'tagsched:manifest-sha256' } as const;

export interface Ec2Account {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  readonly sessionToken?: string;
  readonly region: string;
}

export interface Ec2PublishOptions {
  readonly account: Ec2Account;
  /** The EC2 endpoint (TAGSCHED_EC2_ENDPOINT) and the EBS one (TAGSCHED_EBS_ENDPOINT); null: the region's. */
  readonly ec2Endpoint: string | null;
  readonly ebsEndpoint: string | null;
  /** Blocks written at once. */
  readonly parallel?: number;
  /** Between two DescribeSnapshots, and how long to wait in all for `completed`. */
  readonly pollMs?: number;
  readonly waitMs?: number;
}

interface Ec2State {
  snapshotId: string | null;
  imageId: string | null;
  /** The blocks' checksums (base64 SHA256), by block index, of the blocks written. */
  checksums: Map<number, string>;
}

const ARCHITECTURES: Readonly<Record<string, 'x86_64' | 'arm64'>> = { amd64: 'x86_64', arm64: 'arm64' };

/** The AMI boot mode of an image that boots in these modes. */
export function ec2BootMode(modes: readonly string[]): BootModeValues {
  const bios = modes.includes('bios');
  const uefi = modes.includes('uefi');
  if (bios && uefi) return 'uefi-preferred';
  if (uefi) return 'uefi';
  if (bios) return 'legacy-bios';
  throw new PublishError('the manifest names no boot mode (bios or uefi)');
}

/** Reads an EC2 account file's object: accessKeyId, secretAccessKey, region, and sessionToken (optional). */
export function ec2AccountOf(json: Record<string, unknown>): Ec2Account {
  const { accessKeyId, secretAccessKey, sessionToken, region } = json;
  if (
    typeof accessKeyId !== 'string' ||
    typeof secretAccessKey !== 'string' ||
    typeof region !== 'string' ||
    !/^[a-z]{2}(?:-[a-z]+)+-[0-9]{1,2}$/.test(region)
  ) {
    throw new PublishError(
      'the ec2 account file needs {"accessKeyId", "secretAccessKey", "region"} (and "sessionToken" for temporary credentials), as a pool\'s account',
    );
  }
  if (sessionToken !== undefined && typeof sessionToken !== 'string')
    throw new PublishError('the ec2 account file\'s "sessionToken" must be a string');
  return { accessKeyId, secretAccessKey, region, ...(sessionToken ? { sessionToken } : {}) };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The plan that publishes `image` to the account's region. */
export function ec2PublishPlan(image: PublishImage, options: Ec2PublishOptions): PublishPlan<Ec2State> {
  const { account } = options;
  const redact = accountRedactor({ ...account }, { fields: ['accessKeyId', 'secretAccessKey', 'sessionToken'] });
  const credentials = {
    accessKeyId: account.accessKeyId,
    secretAccessKey: account.secretAccessKey,
    ...(account.sessionToken ? { sessionToken: account.sessionToken } : {}),
  };
  const common = { region: account.region, credentials, ignoreConfiguredEndpointUrls: true };
  const ebs = new EBSClient({
    ...common,
    ...(options.ebsEndpoint ? { endpoint: options.ebsEndpoint } : {}),
    maxAttempts: 4,
  });
  const ec2 = new EC2Client({
    ...common,
    ...(options.ec2Endpoint ? { endpoint: options.ec2Endpoint } : {}),
    maxAttempts: 3,
  });
  const architecture = ARCHITECTURES[image.manifest.recipe.architecture];
  const sha = image.manifestSha256;
  const tags = [
    { Key: EC2_PUBLISH_TAGS.image, Value: image.name },
    { Key: EC2_PUBLISH_TAGS.manifestSha256, Value: sha },
  ];
  const description = `tagsched worker image ${image.name} (manifest sha256 ${sha})`;
  const blocks = Math.ceil(image.rawBytes / EBS_BLOCK);

  /** An SDK failure as a message: the call, the service's error code and message, no secret. */
  const failure = (what: string, err: unknown) => {
    const e = err as { name?: string; message?: string; Reason?: string };
    return new PublishError(
      redact(`${what} failed: ${e.name ?? 'Error'}: ${e.message ?? String(err)}${e.Reason ? ` (${e.Reason})` : ''}`),
    );
  };
  const call = async <T>(what: string, run: () => Promise<T>): Promise<T> => {
    try {
      return await run();
    } catch (err) {
      throw failure(what, err);
    }
  };

  const stages: PublishPlan<Ec2State>['stages'] = [
    {
      title: `Start an EBS snapshot of ${Math.ceil(image.rawBytes / GIB)} GiB in ${account.region} (StartSnapshot)`,
      async run(state) {
        if (!architecture)
          throw new PublishError(`EC2 has no ${image.manifest.recipe.architecture} machines (amd64 and arm64 only)`);
        ec2BootMode(image.boot.bootModes);
        const answer = await call('StartSnapshot', () =>
          ebs.send(
            new StartSnapshotCommand({
              VolumeSize: Math.ceil(image.rawBytes / GIB),
              Description: description,
              Tags: tags,
              Timeout: 60,
              ClientToken: randomUUID(),
            }),
          ),
        );
        if (!answer.SnapshotId) throw new PublishError('StartSnapshot named no snapshot');
        state.snapshotId = answer.SnapshotId;
        if (answer.BlockSize !== undefined && answer.BlockSize !== EBS_BLOCK)
          throw new PublishError(`the snapshot's block size is ${answer.BlockSize}, not ${EBS_BLOCK}`);
      },
    },
    {
      title: `Write the disk's ${blocks} blocks of 512 KiB, all-zero blocks skipped (PutSnapshotBlock)`,
      async run(state, report) {
        const file = await fs.open(image.rawPath, 'r');
        try {
          let next = 0;
          let done = 0;
          const worker = async () => {
            const buffer = Buffer.alloc(EBS_BLOCK);
            for (let index = next++; index < blocks; index = next++) {
              buffer.fill(0);
              await file.read(buffer, 0, EBS_BLOCK, index * EBS_BLOCK);
              done++;
              if (!buffer.some((b) => b !== 0)) continue;
              const checksum = createHash('sha256').update(buffer).digest('base64');
              await call(`PutSnapshotBlock ${index}`, () =>
                ebs.send(
                  new PutSnapshotBlockCommand({
                    SnapshotId: state.snapshotId!,
                    BlockIndex: index,
                    BlockData: Buffer.from(buffer),
                    DataLength: EBS_BLOCK,
                    Checksum: checksum,
                    ChecksumAlgorithm: 'SHA256',
                    Progress: Math.floor((done * 100) / blocks),
                  }),
                ),
              );
              state.checksums.set(index, checksum);
              report(`${done}/${blocks} blocks read, ${state.checksums.size} written`);
            }
          };
          await Promise.all(Array.from({ length: Math.max(1, options.parallel ?? 8) }, worker));
        } finally {
          await file.close();
        }
      },
    },
    {
      title: 'Complete the snapshot with the LINEAR checksum of its blocks (CompleteSnapshot)',
      async run(state) {
        const ordered = [...state.checksums.entries()]
          .sort(([a], [b]) => a - b)
          .map(([, c]) => Buffer.from(c, 'base64'));
        const aggregated = createHash('sha256').update(Buffer.concat(ordered)).digest('base64');
        const answer = await call('CompleteSnapshot', () =>
          ebs.send(
            new CompleteSnapshotCommand({
              SnapshotId: state.snapshotId!,
              ChangedBlocksCount: state.checksums.size,
              Checksum: aggregated,
              ChecksumAlgorithm: 'SHA256',
              ChecksumAggregationMethod: 'LINEAR',
            }),
          ),
        );
        if (answer.Status === 'error') throw new PublishError('CompleteSnapshot answered that the snapshot failed');
      },
    },
    {
      title: 'Wait for the snapshot to be completed (DescribeSnapshots)',
      async run(state, report) {
        const until = Date.now() + (options.waitMs ?? 3_600_000);
        for (;;) {
          const answer = await call('DescribeSnapshots', () =>
            ec2.send(new DescribeSnapshotsCommand({ SnapshotIds: [state.snapshotId!] })),
          );
          const snapshot = answer.Snapshots?.[0];
          if (snapshot?.State === 'completed') return;
          if (snapshot?.State === 'error')
            throw new PublishError(
              `the snapshot ${state.snapshotId} failed: ${snapshot.StateMessage ?? 'no reason given'}`,
            );
          report(`${snapshot?.State ?? 'unknown'} ${snapshot?.Progress ?? ''}`);
          if (Date.now() > until) throw new PublishError(`the snapshot ${state.snapshotId} was not completed in time`);
          await sleep(options.pollMs ?? 5000);
        }
      },
    },
    {
      title: `Register the AMI (RegisterImage: ${architecture ?? '?'}, ENA, boot mode ${image.boot.bootModes.join('+')})`,
      async run(state) {
        const answer = await call('RegisterImage', () =>
          ec2.send(
            new RegisterImageCommand({
              // An AMI name has no `+`: it becomes `_`.
              Name: `${image.name.replace(/\+/g, '_')}-${sha.slice(0, 12)}`,
              Description: description,
              Architecture: architecture,
              RootDeviceName: '/dev/xvda',
              BlockDeviceMappings: [
                {
                  DeviceName: '/dev/xvda',
                  Ebs: { SnapshotId: state.snapshotId!, DeleteOnTermination: true, VolumeType: 'gp3' },
                },
              ],
              VirtualizationType: 'hvm',
              EnaSupport: true,
              BootMode: ec2BootMode(image.boot.bootModes),
              TagSpecifications: [{ ResourceType: 'image', Tags: tags }],
            }),
          ),
        );
        if (!answer.ImageId) throw new PublishError('RegisterImage named no image');
        state.imageId = answer.ImageId;
      },
    },
  ];

  return {
    state: { snapshotId: null, imageId: null, checksums: new Map() },
    stages,
    async cleanUp(state) {
      const removed: string[] = [];
      const left: string[] = [];
      if (state.imageId) {
        try {
          await ec2.send(new DeregisterImageCommand({ ImageId: state.imageId }));
          removed.push(`AMI ${state.imageId}`);
        } catch (err) {
          left.push(`AMI ${state.imageId} (${failure('DeregisterImage', err).message})`);
        }
      }
      if (state.snapshotId) {
        try {
          await ec2.send(new DeleteSnapshotCommand({ SnapshotId: state.snapshotId }));
          removed.push(`snapshot ${state.snapshotId}`);
        } catch (err) {
          left.push(`snapshot ${state.snapshotId} (${failure('DeleteSnapshot', err).message})`);
        }
      }
      ebs.destroy();
      ec2.destroy();
      return { removed, left };
    },
    result(state) {
      ebs.destroy();
      ec2.destroy();
      return { providerImageId: state.imageId!, region: account.region };
    },
  };
}
