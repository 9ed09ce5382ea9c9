import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/core/config/config.js';
import { providerFactory } from '../../../src/providers/registry.js';
import { EC2_TAGS } from '../../../src/providers/ec2.js';
import { HETZNER_LABELS } from '../../../src/providers/hetzner.js';
import { startEc2StandIn, type Ec2StandIn } from '../stand-ins/ec2.js';
import { startHetznerStandIn, type HetznerStandIn } from '../stand-ins/hetzner.js';
import { captureLog, providerCall } from './capture-log.js';

const EXAMPLE = path.resolve('examples/exec-provider.mjs');
let hetzner: HetznerStandIn;
let ec2: Ec2StandIn;
let stateDir: string;

beforeAll(async () => {
  hetzner = await startHetznerStandIn({ tokens: ['hz-token-registry'] });
  ec2 = await startEc2StandIn({
    credentials: { AKIAZ7TAGSCHEDTEST09: { secretAccessKey: 'registry-secret-access-key' } },
    images: [],
  });
  stateDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tagsched-registry-'));
});
afterAll(async () => {
  await hetzner.close();
  await ec2.close();
  fs.rmSync(stateDir, { recursive: true, force: true });
});

describe('the provider registry, made from the server configuration', () => {
  it('points each provider where the settings say, and nowhere a pool could say', async () => {
    const config = loadConfig({
      PATH: process.env.PATH,
      TAGSCHED_EXEC_COMMANDS: `/usr/local/bin/other, ${EXAMPLE}`,
      TAGSCHED_HETZNER_API_URL: `${hetzner.url}/`,
      TAGSCHED_EC2_ENDPOINT: ec2.url,
    });
    const deps = { config, log: captureLog().logger };
    hetzner.seed({ name: 'r-1', labels: { [HETZNER_LABELS.pool]: 'r' } });
    ec2.seed({ tags: { [EC2_TAGS.pool]: 'r' } });

    const fromHetzner = await providerFactory('hetzner')!(deps).list('r', providerCall({ token: 'hz-token-registry' }));
    expect(fromHetzner.map((i) => i.name)).toEqual(['r-1']);
    const fromEc2 = await providerFactory('ec2')!(deps).list(
      'r',
      providerCall({
        accessKeyId: 'AKIAZ7TAGSCHEDTEST09',
        secretAccessKey: 'registry-secret-access-key',
        region: 'eu-central-1',
      }),
    );
    expect(fromEc2).toHaveLength(1);
    const exec = providerFactory('exec')!(deps);
    const call = providerCall({ token: 't' }, 10_000, { name: 'r', specifications: { command: [EXAMPLE, stateDir] } });
    const { id } = await exec.launch(
      {
        pool: 'r',
        name: 'r-2',
        specifications: call.pool.specifications,
        agent: { serverUrl: 'http://x/graphql', activationToken: 'a', workerName: 'r-2' },
        userData: '',
      },
      call,
    );
    expect((await exec.list('r', call)).map((i) => i.id)).toEqual([id]);
    expect(providerFactory('magic')).toBeUndefined();
  });

  it('defaults to the real clouds and no exec command, and passes exec commands no secret of the server', () => {
    const config = loadConfig({
      PATH: '/usr/bin',
      HOME: '/var/lib/tagsched',
      DATABASE_URL: 'postgres://u:pw@db/x',
      TAGSCHED_SECRET_KEY: 'k',
      TAGSCHED_ADMIN_TOKEN: 'tsk_admin_0123456789abcdef0123456789',
    });
    expect(config.providers.hetznerApiUrl).toBe('https://api.hetzner.cloud/v1');
    expect(config.providers.ec2Endpoint).toBeNull();
    expect(config.providers.execCommands).toEqual([]);
    expect(config.providers.execEnvironment).toEqual({ PATH: '/usr/bin', HOME: '/var/lib/tagsched' });
  });

  it.each([
    [{ TAGSCHED_EXEC_COMMANDS: 'provider.sh' }, /TAGSCHED_EXEC_COMMANDS: "provider.sh" is not an absolute/],
    [{ TAGSCHED_EXEC_COMMANDS: '/usr/local/bin/../bin/p' }, /not an absolute, normalised path/],
    [{ TAGSCHED_HETZNER_API_URL: 'api.hetzner.cloud' }, /TAGSCHED_HETZNER_API_URL must be a URL/],
    [{ TAGSCHED_EC2_ENDPOINT: 'ftp://ec2.example' }, /TAGSCHED_EC2_ENDPOINT must be an http\(s\) URL/],
  ])('refuses the settings %j at start-up', (env, message) => {
    expect(() => loadConfig(env)).toThrow(message);
  });
});
