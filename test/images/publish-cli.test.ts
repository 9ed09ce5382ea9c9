/**
 * `tagsched-image publish` as the docs give it (docs/operating/bootable-images.md), one command per
 * cloud, run as a process against the cloud stand-ins and a real tagsched server over HTTP: it
 * publishes the built image, records the publication with the admin token, and the image lists it;
 * its failures say what went wrong without a secret.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEc2StandIn, type Ec2StandIn } from '../provisioner/stand-ins/ec2.js';
import { startHetznerStandIn, type HetznerStandIn } from '../provisioner/stand-ins/hetzner.js';
import { ADMIN_TOKEN, useTestApp } from '../helpers/app.js';
import { ok } from '../helpers/fixtures.js';
import { makePublishImage, type PublishFixture } from './publish-image.js';

const HZ_TOKEN = 'hz-cli-token-Lr83ZpQ1';
const KEY_ID = 'AKIAZ7TAGSCHEDPUBCLI';
const SECRET = 'publish-cli-secret-access-key-55';
let hetzner: HetznerStandIn;
let ec2: Ec2StandIn;
let fixture: PublishFixture;
let serverUrl: string;

const t = useTestApp();

beforeAll(async () => {
  hetzner = await startHetznerStandIn({ tokens: [HZ_TOKEN] });
  ec2 = await startEc2StandIn({ credentials: { [KEY_ID]: { secretAccessKey: SECRET } }, images: [] });
  fixture = makePublishImage('cli-trixie');
  fs.writeFileSync(path.join(fixture.dir, 'hetzner.json'), JSON.stringify({ token: HZ_TOKEN }));
  fs.writeFileSync(
    path.join(fixture.dir, 'ec2.json'),
    JSON.stringify({ accessKeyId: KEY_ID, secretAccessKey: SECRET, region: 'eu-central-1' }),
  );
  serverUrl = `${(await t.app.start()).url}`;
  const manifest = JSON.parse(fs.readFileSync(path.join(fixture.dir, 'cli-trixie.manifest.json'), 'utf8')) as unknown;
  const r = await ok(t, `mutation($m: JSON!) { registerWorkerImage(input: { manifest: $m }) { __typename } }`, {
    m: manifest,
  });
  expect(r.registerWorkerImage.__typename).toBe('WorkerImage');
});
afterAll(async () => {
  await hetzner?.close();
  await ec2?.close();
  fixture?.remove();
});

/** Runs the CLI in the image's output directory (as the docs do), with the environment given. */
function image(args: string[], env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [path.resolve('bin/tagsched-image.js'), ...args],
      {
        cwd: fixture.dir,
        env: {
          PATH: process.env.PATH,
          HOME: fixture.dir,
          TAGSCHED_SERVER_URL: `${serverUrl}/graphql`,
          TAGSCHED_TOKEN: ADMIN_TOKEN,
          ...env,
        },
        timeout: 120_000,
      },
      (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

/** tagsched-admin against the same server, as an admin. */
function admin(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [path.resolve('bin/tagsched-admin.js'), ...args],
      {
        env: {
          PATH: process.env.PATH,
          HOME: fixture.dir,
          TAGSCHED_SERVER_URL: `${serverUrl}/graphql`,
          TAGSCHED_TOKEN: ADMIN_TOKEN,
        },
        timeout: 60_000,
      },
      (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

const PUBLICATIONS = `{ workerImage(name: "cli-trixie") { publications { provider region providerImageId } } }`;

describe('tagsched-image publish', { timeout: 180_000 }, () => {
  it('publishes to the EC2 stand-in with one command and records the AMI on the server', async () => {
    const r = await image(
      ['publish', 'cli-trixie', '--provider', 'ec2', '--provider-account-file', 'ec2.json', '--images', '.'],
      {
        TAGSCHED_EC2_ENDPOINT: ec2.url,
        TAGSCHED_EBS_ENDPOINT: ec2.url,
      },
    );
    expect(r.stderr).toContain('published cli-trixie to ec2 (eu-central-1)');
    expect(r.code).toBe(0);
    const printed = JSON.parse(r.stdout) as { providerImageId: string };
    expect(ec2.registeredImages.has(printed.providerImageId)).toBe(true);
    const data = await ok(t, PUBLICATIONS);
    expect(data.workerImage.publications).toEqual([
      { provider: 'ec2', region: 'eu-central-1', providerImageId: printed.providerImageId },
    ]);
    const shown = await admin(['images', 'show', 'cli-trixie']);
    expect(shown.stdout).toMatch(new RegExp(`^Published:\\s+ec2 eu-central-1 ${printed.providerImageId} \\(`, 'm'));
    expect(`${r.stdout}${r.stderr}`).not.toContain(SECRET);
  });

  it('publishes to the Hetzner stand-in with one command (its rescue SSH port given) and records the snapshot', async () => {
    const r = await image(
      [
        'publish',
        'cli-trixie',
        '--provider',
        'hetzner',
        '--provider-account-file',
        'hetzner.json',
        '--images',
        '.',
        '--location',
        'hel1',
        '--rescue-ssh-port',
        String(hetzner.rescuePort),
      ],
      { TAGSCHED_HETZNER_API_URL: hetzner.url },
    );
    expect(r.stderr).toContain('published cli-trixie to hetzner (global)');
    expect(r.code).toBe(0);
    const printed = JSON.parse(r.stdout) as { providerImageId: string };
    expect(hetzner.images.get(Number(printed.providerImageId))!.disk.equals(fixture.raw)).toBe(true);
    expect(hetzner.servers.size + hetzner.sshKeys.size).toBe(0);
    const data = await ok(t, PUBLICATIONS);
    expect(data.workerImage.publications).toContainEqual({
      provider: 'hetzner',
      region: 'global',
      providerImageId: printed.providerImageId,
    });
    expect(`${r.stdout}${r.stderr}`).not.toContain(HZ_TOKEN);
  });

  it('checks the server and the token before it makes anything, and says why it fails without the secret', async () => {
    const before = ec2.requests.length;
    const noAdmin = await image(
      ['publish', 'cli-trixie', '--provider', 'ec2', '--provider-account-file', 'ec2.json', '--images', '.'],
      {
        TAGSCHED_TOKEN: 'tsk_admin_not-a-token-0000000000',
        TAGSCHED_EC2_ENDPOINT: ec2.url,
        TAGSCHED_EBS_ENDPOINT: ec2.url,
      },
    );
    expect(noAdmin.code).toBe(1);
    expect(noAdmin.stderr).toMatch(/tagsched-image: .*token/i);
    expect(noAdmin.stderr).not.toContain('tsk_admin_not-a-token');
    expect(ec2.requests.length).toBe(before);

    fs.writeFileSync(
      path.join(fixture.dir, 'ec2-bad.json'),
      JSON.stringify({ accessKeyId: KEY_ID, secretAccessKey: 'the-wrong-secret-access-key-0', region: 'eu-central-1' }),
    );
    const refused = await image(
      [
        'publish',
        'cli-trixie',
        '--provider',
        'ec2',
        '--provider-account-file',
        'ec2-bad.json',
        '--images',
        '.',
        '--no-record',
      ],
      {
        TAGSCHED_EC2_ENDPOINT: ec2.url,
        TAGSCHED_EBS_ENDPOINT: ec2.url,
      },
    );
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/tagsched-image publish: StartSnapshot failed: /);
    expect(refused.stderr).not.toContain('the-wrong-secret-access-key-0');
    expect(refused.stderr).not.toContain(KEY_ID);

    const usage = await image(
      ['publish', 'cli-trixie', '--provider', 'gcp', '--provider-account-file', 'ec2.json'],
      {},
    );
    expect(usage.code).toBe(64);
  });
});
