/**
 * The `ec2` provider: AWS EC2 instances through the official SDK (`@aws-sdk/client-ec2`).
 * RunInstances with the agent's cloud-init user data and tags naming the pool and the instance,
 * TerminateInstances by id, DescribeInstances filtered on the pool's tag. Credentials and region
 * come from the pool's account; the endpoint is the SDK's for the region unless the server sets
 * `TAGSCHED_EC2_ENDPOINT`. The SDK makes one attempt per call: the provisioner does the retrying.
 */
import { createHash } from 'node:crypto';
import type * as Ec2SdkModule from '@aws-sdk/client-ec2';
import type {
  CreateFleetCommandInput,
  CreateFleetCommandOutput,
  EC2Client,
  FleetLaunchTemplateOverridesRequest,
  Instance,
  RunInstancesCommandInput,
} from '@aws-sdk/client-ec2';
import type { InputProblem } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import {
  ProviderError,
  type LaunchResult,
  type LaunchSpec,
  type Provider,
  type ProviderCall,
  type ProviderInstance,
} from './provider.js';
import { callDeadline } from './deadline.js';
import { answerCheck, errorOf, kindOf } from './ec2-answers.js';
import {
  describeOffering,
  marksOffering,
  offeringKey,
  offeringsOf,
  type Offering,
  type OfferingFailure,
} from './offerings.js';
import { accountRedactor, type Redactor } from './redact.js';
import {
  ACCOUNT_PATH,
  checkPattern,
  foreignFields,
  offeringFields,
  problem,
  problemsMessage,
  specValue,
  SPECIFICATIONS_PATH,
  unknownAccountFields,
  type PoolProviderInput,
} from './spec-checks.js';

/** The tags every instance of a pool carries (and `Name`, for the console); `list` filters on the first. */
export const EC2_TAGS = { pool: 'tagsched:pool', instance: 'tagsched:instance' } as const;

/** Instances asked for per DescribeInstances page (the API's maximum). */
const PAGE_SIZE = 1000;
const MAX_PAGES = 100;
const MAX_SECURITY_GROUPS = 16;

export interface Ec2Settings {
  /** `TAGSCHED_EC2_ENDPOINT`; null lets the SDK choose the region's endpoint. */
  readonly endpoint: string | null;
  readonly logger: Logger;
}

const ACCOUNT_FIELDS = ['accessKeyId', 'secretAccessKey', 'sessionToken', 'region'] as const;
const SECRET_FIELDS = ['accessKeyId', 'secretAccessKey', 'sessionToken'] as const;
/** The redactor of an ec2 account: its keys, not its region. */
const redactorOf = (account: Readonly<Record<string, unknown>> | null) =>
  accountRedactor(account, { fields: SECRET_FIELDS });
const FOREIGN = { command: 'exec' } as const;
const REGION = /^[a-z]{2}(?:-[a-z]+)+-[0-9]{1,2}$/;
const RESOURCE_ID = (prefix: string) => new RegExp(`^${prefix}-(?:[0-9a-f]{8}|[0-9a-f]{17})$`);

function specificationProblems(
  specifications: Readonly<Record<string, unknown>>,
  region: string | null,
): InputProblem[] {
  const at = (field: string) => `${SPECIFICATIONS_PATH}.${field}`;
  const offerings = offeringFields(specifications);
  const problems = [
    ...offerings.flatMap((o) =>
      checkPattern(
        o.instanceType,
        o.at('instanceType'),
        /^[a-z0-9-]{1,30}\.[a-z0-9-]{1,30}$/,
        'an EC2 instance type such as c6i.xlarge or m7g.large',
        { required: true },
      ),
    ),
    ...checkPattern(
      specValue(specifications, 'providerImage'),
      at('providerImage'),
      RESOURCE_ID('ami'),
      'an AMI id: ami- and 8 or 17 hex digits (optional when the pool names a published worker image)',
      { required: specValue(specifications, 'image') === undefined },
    ),
    ...checkPattern(
      specValue(specifications, 'subnetId'),
      at('subnetId'),
      RESOURCE_ID('subnet'),
      'a subnet id: subnet- and 8 or 17 hex digits (optional)',
      {
        required: false,
      },
    ),
    ...offerings.flatMap((o) =>
      checkPattern(
        o.location,
        o.at('location'),
        /^[a-z]{2}-[a-z0-9-]+[0-9][a-z]$/,
        "an availability zone of the account's region, such as eu-central-1a (optional)",
        {
          required: false,
        },
      ),
    ),
    ...foreignFields(specifications, 'ec2', FOREIGN),
  ];
  for (const o of offerings) {
    if (
      region &&
      typeof o.location === 'string' &&
      !problems.some((p) => p.path === o.at('location')) &&
      !o.location.startsWith(`${region}`)
    ) {
      problems.push(
        problem(o.at('location'), `"${o.location}" is not an availability zone of the account's region ${region}`),
      );
    }
  }
  const groups = specValue(specifications, 'securityGroupIds');
  if (groups !== undefined) {
    if (!Array.isArray(groups) || groups.length > MAX_SECURITY_GROUPS) {
      problems.push(
        problem(
          at('securityGroupIds'),
          `must be a list of at most ${MAX_SECURITY_GROUPS} security group ids (sg- and 8 or 17 hex digits)`,
        ),
      );
    } else {
      groups.forEach((group, i) =>
        problems.push(
          ...checkPattern(
            group,
            `${at('securityGroupIds')}[${i}]`,
            RESOURCE_ID('sg'),
            'a security group id: sg- and 8 or 17 hex digits',
            { required: true },
          ),
        ),
      );
    }
  }
  return problems;
}

function accountProblems(account: Readonly<Record<string, unknown>>): InputProblem[] {
  const at = (field: string) => `${ACCOUNT_PATH}.${field}`;
  return [
    ...checkPattern(
      account.accessKeyId,
      at('accessKeyId'),
      /^[A-Z0-9]{16,128}$/,
      'an AWS access key id (16 to 128 capital letters and digits, AKIA… or ASIA…)',
      {
        required: true,
        secret: true,
      },
    ),
    ...checkPattern(
      account.secretAccessKey,
      at('secretAccessKey'),
      /^[\x21-\x7e]{16,256}$/,
      'an AWS secret access key (printable characters, no spaces)',
      {
        required: true,
        secret: true,
      },
    ),
    ...checkPattern(
      account.sessionToken,
      at('sessionToken'),
      /^[\x21-\x7e]{1,8192}$/,
      'an AWS session token, for temporary credentials (optional)',
      {
        required: false,
        secret: true,
      },
    ),
    ...checkPattern(account.region, at('region'), REGION, 'an AWS region such as eu-central-1 or us-east-1', {
      required: true,
    }),
    ...unknownAccountFields(account, ACCOUNT_FIELDS, 'ec2'),
  ];
}

/** Checks an ec2 pool: its specifications (instance type, AMI, network) and its account (keys and region). */
export function validateEc2Pool(input: PoolProviderInput): InputProblem[] {
  const region =
    typeof input.account?.region === 'string' && REGION.test(input.account.region) ? input.account.region : null;
  const problems = specificationProblems(input.specifications, region);
  if (input.account === null) {
    problems.push(
      problem(
        ACCOUNT_PATH,
        'an ec2 pool needs an account: {"accessKeyId", "secretAccessKey", "sessionToken" (optional), "region"}',
      ),
    );
  } else if (input.account !== undefined) problems.push(...accountProblems(input.account));
  return problems;
}

/**
 * RunInstances' idempotency token for an instance: a launch retried after its answer was lost gets
 * the same instance back instead of a second one (at most 64 ASCII characters).
 */
export function clientTokenOf(pool: string, name: string): string {
  return `tagsched-${createHash('sha256').update(`${pool}\0${name}`).digest('hex').slice(0, 48)}`;
}

function stateOf(name: string | undefined): ProviderInstance['state'] {
  switch (name) {
    case 'pending':
      return 'starting';
    case 'running':
      return 'running';
    case 'terminated':
      return 'gone';
    default:
      // shutting-down, stopping, stopped: no longer working, not yet gone.
      return 'stopping';
  }
}

function instanceOf(instance: Instance): ProviderInstance | null {
  if (!instance.InstanceId) return null;
  return {
    id: instance.InstanceId,
    name: instance.Tags?.find((t) => t.Key === EC2_TAGS.instance)?.Value ?? null,
    state: stateOf(instance.State?.Name),
    createdAt: instance.LaunchTime ?? null,
  };
}

/** The launch template made for one launch through CreateFleet (named after its idempotency token; deleted after the fleet call). */
export function launchTemplateNameOf(pool: string, name: string): string {
  return clientTokenOf(pool, name);
}

/** Offerings in runs of one market, in order: each run is one CreateFleet (a fleet has one default market). */
export function marketRuns(offerings: readonly Offering[]): Offering[][] {
  const runs: Offering[][] = [];
  for (const o of offerings) {
    const last = runs.at(-1);
    if (last && last[0]!.market === o.market) last.push(o);
    else runs.push([o]);
  }
  return runs;
}

/** The CreateFleet request of one run of offerings: instant, one instance, the offerings as overrides by priority (0 first). */
export function fleetRequest(
  run: readonly Offering[],
  template: string,
  clientToken: string,
  subnetId: string | undefined,
): CreateFleetCommandInput {
  const market = run[0]!.market;
  const overrides: FleetLaunchTemplateOverridesRequest[] = run.map((o, priority) => ({
    InstanceType: o.instanceType as FleetLaunchTemplateOverridesRequest['InstanceType'],
    ...(o.location ? { AvailabilityZone: o.location } : {}),
    ...(subnetId ? { SubnetId: subnetId } : {}),
    ...(o.maxPricePerHour === null ? {} : { MaxPrice: String(o.maxPricePerHour) }),
    Priority: priority,
  }));
  return {
    Type: 'instant',
    ClientToken: clientToken,
    LaunchTemplateConfigs: [
      { LaunchTemplateSpecification: { LaunchTemplateName: template, Version: '$Latest' }, Overrides: overrides },
    ],
    TargetCapacitySpecification: {
      TotalTargetCapacity: 1,
      DefaultTargetCapacityType: market,
      ...(market === 'spot' ? { SpotTargetCapacity: 1 } : { OnDemandTargetCapacity: 1 }),
    },
    ...(market === 'spot'
      ? { SpotOptions: { AllocationStrategy: 'capacity-optimized-prioritized' } }
      : { OnDemandOptions: { AllocationStrategy: 'prioritized' } }),
  };
}

/** The offering of a run an answer's override names: by its priority, else by its type and zone. */
function offeringOfOverride(
  run: readonly Offering[],
  override: { Priority?: number; InstanceType?: string; AvailabilityZone?: string } | undefined,
): Offering | null {
  if (!override) return null;
  if (typeof override.Priority === 'number' && run[override.Priority]) return run[override.Priority]!;
  return (
    run.find(
      (o) =>
        o.instanceType === override.InstanceType && (o.location === null || o.location === override.AvailabilityZone),
    ) ?? null
  );
}

/** What a CreateFleet answer says: the instance started (and by which offering), and the offerings that failed, their codes and messages blanked of the account. */
export function readFleetAnswer(
  run: readonly Offering[],
  answer: Pick<CreateFleetCommandOutput, 'Instances' | 'Errors'>,
  redact: Redactor,
): { id: string | null; offering: Offering | null; failures: OfferingFailure[]; other: ProviderError | null } {
  const started = (answer.Instances ?? []).find((i) => i.InstanceIds?.length);
  const failures: OfferingFailure[] = [];
  let other: ProviderError | null = null;
  for (const e of answer.Errors ?? []) {
    const kind = kindOf(e.ErrorCode ?? 'unknown', 400);
    const code = redact.head(e.ErrorCode ?? 'unknown', 200);
    const offering = offeringOfOverride(run, e.LaunchTemplateAndOverrides?.Overrides);
    const reason = `${redact.head(e.ErrorMessage ?? '', 300)} (${code})`;
    if (offering && marksOffering(kind)) {
      if (!failures.some((f) => f.key === offeringKey(offering)))
        failures.push({ key: offeringKey(offering), kind, code, reason });
    } else other ??= new ProviderError(kind, `ec2 launch: CreateFleet: ${reason}`, code);
  }
  if (!started) return { id: null, offering: null, failures, other };
  return {
    id: started.InstanceIds![0]!,
    offering: offeringOfOverride(run, started.LaunchTemplateAndOverrides?.Overrides) ?? run[0]!,
    failures,
    other: null,
  };
}

type Ec2Sdk = typeof Ec2SdkModule;
let sdkLoad: Promise<Ec2Sdk> | null = null;
/**
 * The SDK, loaded at the first call rather than with the server: loading it adds about 90 MiB to a
 * process's memory, which a server without ec2 pools does not need.
 */
const loadSdk = (): Promise<Ec2Sdk> => (sdkLoad ??= import('@aws-sdk/client-ec2'));

/** Creates the ec2 provider (an SDK client is made per call, for that call's pool account). */
export function createEc2Provider(settings: Ec2Settings): Provider {
  const log = settings.logger.child({ provider: 'ec2' });

  async function send<T>(
    what: string,
    call: ProviderCall,
    run: (client: EC2Client, abortSignal: AbortSignal, sdk: Ec2Sdk) => Promise<T>,
  ): Promise<T> {
    const account = call.account;
    const { accessKeyId, secretAccessKey, sessionToken, region } = account ?? {};
    if (typeof accessKeyId !== 'string' || typeof secretAccessKey !== 'string' || typeof region !== 'string') {
      throw new ProviderError(
        'auth',
        `${what}: the pool's account needs accessKeyId, secretAccessKey and region`,
        'no_credentials',
      );
    }
    const redact = redactorOf(account);
    const deadline = callDeadline(call);
    const sdk = await loadSdk();
    const client = new sdk.EC2Client({
      region,
      credentials: { accessKeyId, secretAccessKey, ...(typeof sessionToken === 'string' ? { sessionToken } : {}) },
      ...(settings.endpoint ? { endpoint: settings.endpoint } : {}),
      // Only the server's configuration says where EC2 is: not AWS_ENDPOINT_URL* nor ~/.aws/config.
      ignoreConfiguredEndpointUrls: true,
      maxAttempts: 1,
    });
    // Just inside the SDK's deserializer: it sees the raw answer before it is parsed.
    client.middlewareStack.addRelativeTo(answerCheck, {
      relation: 'after',
      toMiddleware: 'deserializerMiddleware',
      name: 'tagsched-ec2-answer-check',
    });
    const started = Date.now();
    try {
      const result = await run(client, deadline.signal, sdk);
      log.debug({ pool: call.pool.name, operation: what, ms: Date.now() - started }, 'ec2 call');
      return result;
    } catch (err) {
      const e = errorOf(what, err, deadline, redact);
      log.warn(
        {
          pool: call.pool.name,
          operation: what,
          ms: Date.now() - started,
          kind: e.kind,
          code: e.providerCode && redact(e.providerCode),
          err: redact(e.message),
        },
        'ec2 call failed',
      );
      throw e;
    } finally {
      client.destroy();
    }
  }

  /**
   * A launch through CreateFleet: a launch template with what RunInstances would carry (image, user
   * data, tags, network), then one instant fleet of one instance per run of offerings of one market,
   * in order, until one starts it; the template is deleted afterwards.
   */
  async function launchFleet(
    spec: LaunchSpec,
    call: ProviderCall,
    input: RunInstancesCommandInput,
  ): Promise<LaunchResult> {
    const offerings = spec.offerings?.length ? spec.offerings : offeringsOf(spec.specifications);
    const token = clientTokenOf(spec.pool, spec.name);
    const template = launchTemplateNameOf(spec.pool, spec.name);
    await send('ec2 launch', call, async (client, abortSignal, sdk) => {
      try {
        await client.send(
          new sdk.CreateLaunchTemplateCommand({
            LaunchTemplateName: template,
            ClientToken: token,
            LaunchTemplateData: {
              ImageId: input.ImageId,
              UserData: input.UserData,
              InstanceInitiatedShutdownBehavior: 'terminate',
              MetadataOptions: { HttpTokens: 'required' },
              TagSpecifications: input.TagSpecifications as never,
              ...(input.SecurityGroupIds ? { SecurityGroupIds: input.SecurityGroupIds } : {}),
            },
          }),
          { abortSignal },
        );
      } catch (err) {
        // A launch retried after its answer was lost finds its template made.
        if ((err as { name?: string }).name !== 'InvalidLaunchTemplateName.AlreadyExistsException') throw err;
      }
    });
    const failures: OfferingFailure[] = [];
    try {
      let last: ProviderError | null = null;
      for (const [i, run] of marketRuns(offerings).entries()) {
        const request = fleetRequest(run, template, `${token}-${i}`, input.SubnetId);
        const answer = await send('ec2 launch', call, (client, abortSignal, sdk) =>
          client.send(new sdk.CreateFleetCommand(request), { abortSignal }),
        );
        const read = readFleetAnswer(run, answer, redactorOf(call.account));
        failures.push(...read.failures);
        if (read.id) return { id: read.id, offering: offeringKey(read.offering!), unavailable: failures };
        if (read.other) throw new ProviderError(read.other.kind, read.other.message, read.other.providerCode, failures);
        last = new ProviderError(
          read.failures[0]?.kind ?? 'unavailable',
          'ec2 launch: CreateFleet started no instance',
          read.failures.length ? null : 'malformed_answer',
        );
      }
      const tried = failures
        .map((f) => `${describeOffering(offerings.find((o) => offeringKey(o) === f.key)!)}: ${f.reason}`)
        .join('; ');
      const first = failures[0];
      throw new ProviderError(
        first?.kind ?? last?.kind ?? 'unavailable',
        `ec2 launch: no offering could start an instance: ${tried || 'no answer named one'}`,
        first ? first.code : (last?.providerCode ?? null),
        failures,
      );
    } catch (err) {
      if (err instanceof ProviderError && failures.length && !err.offeringFailures.length)
        throw new ProviderError(err.kind, err.message, err.providerCode, failures);
      throw err;
    } finally {
      await send('ec2 launch', call, (client, abortSignal, sdk) =>
        client.send(new sdk.DeleteLaunchTemplateCommand({ LaunchTemplateName: template }), { abortSignal }),
      ).catch(() => undefined);
    }
  }

  return {
    async launch(spec: LaunchSpec, call) {
      const region = typeof call.account?.region === 'string' ? call.account.region : null;
      const problems = specificationProblems(spec.specifications, region);
      if (problems.length)
        throw new ProviderError('invalid', `ec2 launch: ${problemsMessage(problems)}`, 'invalid_specifications');
      const s = spec.specifications;
      const location = specValue(s, 'location') as string | undefined;
      const subnetId = specValue(s, 'subnetId') as string | undefined;
      const groups = specValue(s, 'securityGroupIds') as string[] | undefined;
      const tags = [
        { Key: 'Name', Value: spec.name },
        { Key: EC2_TAGS.pool, Value: spec.pool },
        { Key: EC2_TAGS.instance, Value: spec.name },
      ];
      const input: RunInstancesCommandInput = {
        ImageId: s.providerImage as string,
        InstanceType: s.instanceType as RunInstancesCommandInput['InstanceType'],
        MinCount: 1,
        MaxCount: 1,
        UserData: Buffer.from(spec.userData, 'utf8').toString('base64'),
        ClientToken: clientTokenOf(spec.pool, spec.name),
        // An agent that powers its machine off ends the instance rather than leave a stopped one.
        InstanceInitiatedShutdownBehavior: 'terminate',
        MetadataOptions: { HttpTokens: 'required' },
        TagSpecifications: [
          { ResourceType: 'instance', Tags: tags },
          { ResourceType: 'volume', Tags: tags },
        ],
        ...(subnetId ? { SubnetId: subnetId } : {}),
        ...(groups?.length ? { SecurityGroupIds: groups } : {}),
        ...(location ? { Placement: { AvailabilityZone: location } } : {}),
      };
      if (!Array.isArray(specValue(s, 'offerings'))) {
        // A pool that names one instanceType: RunInstances, as before offerings (its one offering is marked when it has no room).
        const only = offeringsOf(s)[0]!;
        try {
          const answer = await send('ec2 launch', call, (client, abortSignal, sdk) =>
            client.send(new sdk.RunInstancesCommand(input), { abortSignal }),
          );
          const id = answer.Instances?.[0]?.InstanceId;
          if (!id)
            throw new ProviderError(
              'unavailable',
              'ec2 launch: malformed answer: RunInstances named no instance',
              'malformed_answer',
            );
          return { id, offering: offeringKey(only) };
        } catch (err) {
          if (err instanceof ProviderError && marksOffering(err.kind)) {
            throw new ProviderError(err.kind, err.message, err.providerCode, [
              { key: offeringKey(only), kind: err.kind, code: err.providerCode, reason: err.message },
            ]);
          }
          throw err;
        }
      }
      return launchFleet(spec, call, input);
    },

    async terminate(id, call) {
      if (!RESOURCE_ID('i').test(id))
        throw new ProviderError(
          'invalid',
          `ec2 terminate: "${id.slice(0, 80)}" is not an EC2 instance id`,
          'invalid_id',
        );
      try {
        await send('ec2 terminate', call, (client, abortSignal, sdk) =>
          client.send(new sdk.TerminateInstancesCommand({ InstanceIds: [id] }), { abortSignal }),
        );
      } catch (err) {
        if (err instanceof ProviderError && err.providerCode === 'InvalidInstanceID.NotFound') return;
        throw err;
      }
    },

    async list(poolName, call) {
      return send('ec2 list', call, async (client, abortSignal, sdk) => {
        const out: ProviderInstance[] = [];
        let token: string | undefined;
        for (let page = 0; page < MAX_PAGES; page++) {
          const answer = await client.send(
            new sdk.DescribeInstancesCommand({
              Filters: [{ Name: `tag:${EC2_TAGS.pool}`, Values: [poolName] }],
              MaxResults: PAGE_SIZE,
              NextToken: token,
            }),
            { abortSignal },
          );
          for (const reservation of answer.Reservations ?? []) {
            for (const instance of reservation.Instances ?? []) {
              const seen = instanceOf(instance);
              if (seen) out.push(seen);
            }
          }
          token = answer.NextToken || undefined;
          if (!token) break;
        }
        return out;
      });
    },
  };
}
