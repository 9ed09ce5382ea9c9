/**
 * The Hetzner and EC2 stand-ins for a test file, started before its app is built (register this before
 * useTestApp: vitest runs the beforeAll hooks in order) and closed after: each accepts the given token,
 * access key and image, and `appConfig` points the app's providers at them.
 */
import { afterAll, beforeAll } from 'vitest';
import type { ConfigOverrides } from '../../../src/core/config/config.js';
import { layered, useTestApp, type TestApp } from '../../helpers/app.js';
import { startEc2StandIn, type Ec2StandIn } from './ec2.js';
import { startHetznerStandIn, type HetznerStandIn } from './hetzner.js';

export interface CloudStandIns {
  readonly hetzner: HetznerStandIn;
  readonly ec2: Ec2StandIn;
  /** The providers' settings that send them to the stand-ins (read when the app is built). */
  readonly appConfig: { readonly hetznerApiUrl: string; readonly ec2Endpoint: string };
}

export function useCloudStandIns(access: {
  hetznerToken: string;
  keyId: string;
  secretAccessKey: string;
  images: string[];
}): CloudStandIns {
  let hetzner: HetznerStandIn | null = null;
  let ec2: Ec2StandIn | null = null;
  beforeAll(async () => {
    hetzner = await startHetznerStandIn({ tokens: [access.hetznerToken] });
    ec2 = await startEc2StandIn({
      credentials: { [access.keyId]: { secretAccessKey: access.secretAccessKey } },
      images: access.images,
    });
  });
  afterAll(async () => {
    await hetzner?.close();
    await ec2?.close();
  });
  const started = <T>(s: T | null, what: string): T => {
    if (!s) throw new Error(`the ${what} stand-in is not started yet`);
    return s;
  };
  return {
    get hetzner() {
      return started(hetzner, 'Hetzner');
    },
    get ec2() {
      return started(ec2, 'EC2');
    },
    appConfig: {
      get hetznerApiUrl() {
        return started(hetzner, 'Hetzner').url;
      },
      get ec2Endpoint() {
        return started(ec2, 'EC2').url;
      },
    },
  };
}

/** `overrides` with the providers sent to the stand-ins, read when the app is built (after they started). */
export function withCloudStandIns(clouds: CloudStandIns, overrides: ConfigOverrides): ConfigOverrides {
  const providers = Object.defineProperties(
    { ...overrides.providers },
    {
      hetznerApiUrl: { get: () => clouds.appConfig.hetznerApiUrl, enumerable: true },
      ec2Endpoint: { get: () => clouds.appConfig.ec2Endpoint, enumerable: true },
    },
  );
  return { ...overrides, providers };
}

/**
 * A test file's app with the provisioner on and its providers sent to the stand-ins, which start first
 * (their beforeAll is registered before the app's, and the config reads their addresses when the app is
 * built). `overrides` adds to the provisioner's settings.
 */
export function useCloudTestApp(
  access: { hetznerToken: string; keyId: string; secretAccessKey: string; images: string[] },
  overrides: ConfigOverrides = {},
): { clouds: CloudStandIns; t: TestApp } {
  const clouds = useCloudStandIns(access);
  const provisioning: ConfigOverrides = {
    provisioner: { enabled: true, agentServerUrl: 'http://tagsched.test/graphql' },
    providers: { callTimeoutMs: 5_000 },
  };
  const t = useTestApp(withCloudStandIns(clouds, layered(provisioning, overrides)));
  return { clouds, t };
}
