/**
 * A stand-in for the Amazon EC2 Query API (API version 2016-11-15), not the real cloud: the
 * documented subset the `ec2` provider uses, spoken the way the SDK expects it. Requests are
 * form-encoded POSTs (`Action=RunInstances&Version=2016-11-15&…`) signed with SigV4; the stand-in
 * checks the access key id of the `Authorization` header and the signature itself with the key's
 * secret. Answers are the documented XML (`<RunInstancesResponse xmlns=…>`), errors
 * `<Response><Errors><Error><Code>…</Code><Message>…</Message></Error></Errors><RequestID>…</RequestID></Response>`
 * with a 4xx status for client errors and a 5xx status for server errors.
 *   RunInstances        ImageId, InstanceType, MinCount/MaxCount, UserData (base64), ClientToken
 *                       (idempotent), TagSpecification.N, SubnetId, SecurityGroupId.N, Placement
 *   TerminateInstances  InstanceId.N; InvalidInstanceID.NotFound for an unknown id
 *   DescribeInstances   Filter.N.Name/Value.M (tag:KEY, instance-state-name), MaxResults, NextToken
 *   DescribeSnapshots   SnapshotId.N; InvalidSnapshot.NotFound for an unknown id
 *   DeleteSnapshot      SnapshotId; InvalidSnapshot.InUse while a registered image uses it
 *   RegisterImage       Name (unique: InvalidAMIName.Duplicate), Architecture, RootDeviceName,
 *                       BlockDeviceMapping.N (DeviceName, Ebs.SnapshotId of a completed snapshot,
 *                       Ebs.VolumeType, Ebs.DeleteOnTermination), VirtualizationType, EnaSupport,
 *                       BootMode, TagSpecification.N; the image can then be run
 *   DeregisterImage     ImageId; InvalidAMIID.NotFound for an unknown id
 *   CreateLaunchTemplate LaunchTemplateName (unique: InvalidLaunchTemplateName.AlreadyExistsException),
 *                       ClientToken (idempotent), LaunchTemplateData (ImageId, UserData, TagSpecification.N,
 *                       SecurityGroupId.N, InstanceInitiatedShutdownBehavior, MetadataOptions)
 *   DeleteLaunchTemplate LaunchTemplateName; InvalidLaunchTemplateName.NotFoundException for an unknown one
 *   CreateFleet         Type=instant only, LaunchTemplateConfigs.1 (a template by name, Overrides.N:
 *                       InstanceType, AvailabilityZone, SubnetId, MaxPrice, Priority), TargetCapacitySpecification
 *                       (TotalTargetCapacity, DefaultTargetCapacityType), ClientToken (idempotent). It tries the
 *                       overrides by priority (lowest first); one named in `unavailable` (`[market:]type@zone|*`) or a
 *                       spot one whose MaxPrice is under `spotPrice` is an entry of the answer's errorSet with its
 *                       code, and the first that can start one is the answer's fleetInstanceSet.
 * On the same address, the EBS direct APIs that write a snapshot block by block (ebs.ts); their
 * requests are signed for the `ebs` service, and PutSnapshotBlock's body may be UNSIGNED-PAYLOAD.
 */
import { createHash, createHmac, randomBytes } from 'node:crypto';
import type http from 'node:http';
import { serve } from './http.js';
import { ebsHandler, type EbsFault, type StandInSnapshot } from './ebs.js';

export interface Ec2StandInInstance {
  id: string;
  imageId: string;
  instanceType: string;
  state: 'pending' | 'running' | 'shutting-down' | 'terminated' | 'stopping' | 'stopped';
  launchTime: Date;
  tags: Record<string, string>;
  volumeTags: Record<string, string>;
  /** Decoded from the base64 the request carried. */
  userData: string;
  subnetId: string | null;
  securityGroupIds: string[];
  availabilityZone: string;
  clientToken: string | null;
  shutdownBehavior: string | null;
}

export interface Ec2StandIn {
  readonly url: string;
  readonly instances: Map<string, Ec2StandInInstance>;
  /** Every request: its action and parameters (form fields), and the access key id that signed it. */
  readonly requests: { action: string; params: Record<string, string>; accessKeyId: string | null }[];
  /** Running instances the account may have (InstanceLimitExceeded past it). */
  instanceLimit: number;
  /** When set, requests get no answer at all (until close). */
  hang: boolean;
  /** Snapshots written through the EBS direct APIs, by id. */
  readonly snapshots: Map<string, StandInSnapshot>;
  /** Images registered with RegisterImage, by id. */
  readonly registeredImages: Map<string, Ec2StandInImage>;
  /** Faults the EBS direct APIs answer with (each for `times` calls). */
  readonly ebsFaults: EbsFault[];
  /** DescribeSnapshots calls that show a just-completed snapshot as still pending. */
  snapshotPolls: number;
  /** Launch templates by name (CreateLaunchTemplate), with their data as form fields (`ImageId`, `UserData`, …). */
  readonly launchTemplates: Map<string, { id: string; clientToken: string | null; data: Record<string, string> }>;
  /**
   * Offerings with no capacity, `type@zone` (`type@*`: every zone; `spot:type@zone`: that market only) → the error code CreateFleet answers
   * for them (InsufficientInstanceCapacity, VcpuLimitExceeded, …).
   */
  readonly unavailable: Map<string, string>;
  /** The spot price of every type: a spot override whose MaxPrice is lower gets SpotMaxPriceTooLow. */
  spotPrice: number;
  /** The answers of instant fleets by ClientToken (the same request again gets the same answer). */
  readonly fleets: Map<string, string>;
  failNext(status: number, code: string, message: string): void;
  garbageNext(body: string, status?: number): void;
  seed(fields: Partial<Ec2StandInInstance>): Ec2StandInInstance;
  close(): Promise<void>;
}

export interface Ec2StandInImage {
  id: string;
  name: string;
  architecture: string;
  rootDeviceName: string;
  snapshotId: string;
  volumeType: string | null;
  enaSupport: boolean;
  bootMode: string | null;
  virtualizationType: string | null;
  tags: Record<string, string>;
}

const XMLNS = 'http://ec2.amazonaws.com/doc/2016-11-15/';
const STATE_CODES = {
  pending: 0,
  running: 16,
  'shutting-down': 32,
  terminated: 48,
  stopping: 64,
  stopped: 80,
} as const;

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
const hex = (n: number) => randomBytes(n).toString('hex').slice(0, n);

/** The `Prefix.1…Prefix.N` values of a form (a list in the EC2 Query protocol). */
function list(params: Record<string, string>, prefix: string): string[] {
  const out: string[] = [];
  for (let i = 1; params[`${prefix}.${i}`] !== undefined; i++) out.push(params[`${prefix}.${i}`]!);
  return out;
}

/** Checks a SigV4 signature the way AWS does: the canonical request, the string to sign, the derived key. */
function signatureMatches(
  req: http.IncomingMessage,
  body: Buffer,
  secret: string,
  credential: string,
  signedHeaders: string,
  signature: string,
): boolean {
  const [, date, region, service] = credential.split('/');
  const amzDate = String(req.headers['x-amz-date'] ?? '');
  const declared = req.headers['x-amz-content-sha256'];
  const payloadHash = declared === 'UNSIGNED-PAYLOAD' ? declared : createHash('sha256').update(body).digest('hex');
  if (declared && declared !== payloadHash) return false;
  const url = new URL(req.url ?? '/', 'http://stand-in');
  const canonicalHeaders = signedHeaders
    .split(';')
    .map(
      (name) =>
        `${name}:${String(req.headers[name] ?? '')
          .trim()
          .replace(/\s+/g, ' ')}\n`,
    )
    .join('');
  const canonicalQuery = [...url.searchParams]
    .sort()
    .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`)
    .join('&');
  const canonicalRequest = [
    req.method,
    url.pathname,
    canonicalQuery,
    canonicalHeaders,
    signedHeaders,
    payloadHash,
  ].join('\n');
  const scope = `${date}/${region}/${service}/aws4_request`;
  const toSign = ['AWS4-HMAC-SHA256', amzDate, scope, createHash('sha256').update(canonicalRequest).digest('hex')].join(
    '\n',
  );
  const hmac = (key: Buffer | string, data: string) => createHmac('sha256', key).update(data).digest();
  const key = hmac(hmac(hmac(hmac(`AWS4${secret}`, date!), region!), service!), 'aws4_request');
  return createHmac('sha256', key).update(toSign).digest('hex') === signature;
}

export async function startEc2StandIn(options: {
  credentials: Readonly<Record<string, { secretAccessKey: string; sessionToken?: string }>>;
  /** AMIs that exist; others are InvalidAMIID.NotFound. */
  images: readonly string[];
  instanceLimit?: number;
}): Promise<Ec2StandIn> {
  const instances = new Map<string, Ec2StandInInstance>();
  const snapshots = new Map<string, StandInSnapshot>();
  const registeredImages = new Map<string, Ec2StandInImage>();
  const requests: Ec2StandIn['requests'] = [];
  const fleets = new Map<string, string>();
  const injected: (
    { kind: 'error'; status: number; code: string; message: string } | { kind: 'garbage'; status: number; body: string }
  )[] = [];

  const xml = (res: http.ServerResponse, status: number, text: string) => {
    res.writeHead(status, { 'content-type': 'text/xml;charset=UTF-8' });
    res.end(`<?xml version="1.0" encoding="UTF-8"?>\n${text}`);
  };
  const fail = (res: http.ServerResponse, status: number, code: string, message: string) =>
    xml(
      res,
      status,
      `<Response><Errors><Error><Code>${esc(code)}</Code><Message>${esc(message)}</Message></Error></Errors><RequestID>${hex(8)}-${hex(4)}</RequestID></Response>`,
    );
  const answer = (res: http.ServerResponse, action: string, inner: string) =>
    xml(
      res,
      200,
      `<${action}Response xmlns="${XMLNS}"><requestId>${hex(8)}-${hex(4)}</requestId>${inner}</${action}Response>`,
    );

  const make = (fields: Partial<Ec2StandInInstance>): Ec2StandInInstance => {
    const instance: Ec2StandInInstance = {
      id: `i-${hex(17)}`,
      imageId: options.images[0] ?? 'ami-00000000',
      instanceType: 't3.micro',
      state: 'pending',
      launchTime: new Date(),
      tags: {},
      volumeTags: {},
      userData: '',
      subnetId: null,
      securityGroupIds: [],
      availabilityZone: 'eu-central-1a',
      clientToken: null,
      shutdownBehavior: null,
      ...fields,
    };
    instances.set(instance.id, instance);
    return instance;
  };
  const state = (s: Ec2StandInInstance['state']) => `<code>${STATE_CODES[s]}</code><name>${s}</name>`;
  const item = (i: Ec2StandInInstance) =>
    `<item><instanceId>${i.id}</instanceId><imageId>${esc(i.imageId)}</imageId><instanceState>${state(i.state)}</instanceState>` +
    `<instanceType>${esc(i.instanceType)}</instanceType><launchTime>${i.launchTime.toISOString()}</launchTime>` +
    `<placement><availabilityZone>${esc(i.availabilityZone)}</availabilityZone><tenancy>default</tenancy></placement>` +
    (i.subnetId ? `<subnetId>${esc(i.subnetId)}</subnetId>` : '') +
    `<groupSet>${i.securityGroupIds.map((g) => `<item><groupId>${esc(g)}</groupId></item>`).join('')}</groupSet>` +
    (i.clientToken ? `<clientToken>${esc(i.clientToken)}</clientToken>` : '') +
    `<tagSet>${Object.entries(i.tags)
      .map(([k, v]) => `<item><key>${esc(k)}</key><value>${esc(v)}</value></item>`)
      .join('')}</tagSet></item>`;
  const reservation = (group: Ec2StandInInstance[]) =>
    `<reservationId>r-${hex(17)}</reservationId><ownerId>123456789012</ownerId><groupSet/><instancesSet>${group.map(item).join('')}</instancesSet>`;

  const standIn = {
    instances,
    requests,
    instanceLimit: options.instanceLimit ?? 1000,
    hang: false,
    snapshots,
    registeredImages,
    ebsFaults: [] as EbsFault[],
    snapshotPolls: 0,
    launchTemplates: new Map<string, { id: string; clientToken: string | null; data: Record<string, string> }>(),
    unavailable: new Map<string, string>(),
    spotPrice: 0.02,
    fleets,
    failNext(status: number, code: string, message: string) {
      injected.push({ kind: 'error', status, code, message });
    },
    garbageNext(body: string, status = 200) {
      injected.push({ kind: 'garbage', status, body });
    },
    seed: make,
  };

  const ebs = ebsHandler({
    snapshots,
    get faults() {
      return standIn.ebsFaults;
    },
    get snapshotPolls() {
      return standIn.snapshotPolls;
    },
  });

  const server = await serve((req, body, res) => {
    const url = new URL(req.url ?? '/', 'http://stand-in');
    const isEbs = url.pathname.startsWith('/snapshots');
    const params = isEbs ? {} : Object.fromEntries(new URLSearchParams(body.toString('utf8')));
    const auth = String(req.headers.authorization ?? '');
    const m = auth.match(/^AWS4-HMAC-SHA256 Credential=([^,]+), SignedHeaders=([^,]+), Signature=([0-9a-f]{64})$/);
    const accessKeyId = m ? m[1]!.split('/')[0]! : null;
    requests.push({ action: isEbs ? `${req.method} ${url.pathname}` : (params.Action ?? ''), params, accessKeyId });
    if (standIn.hang) return;
    if (!m) return fail(res, 401, 'AuthFailure', 'AWS was not able to validate the provided access credentials');
    const known = options.credentials[accessKeyId!];
    if (!known) return fail(res, 401, 'AuthFailure', 'AWS was not able to validate the provided access credentials');
    if (!signatureMatches(req, body, known.secretAccessKey, m[1]!, m[2]!, m[3]!)) {
      return fail(
        res,
        403,
        'SignatureDoesNotMatch',
        'The request signature we calculated does not match the signature you provided.',
      );
    }
    if (known.sessionToken !== undefined && req.headers['x-amz-security-token'] !== known.sessionToken) {
      return fail(res, 401, 'AuthFailure', 'AWS was not able to validate the provided access credentials');
    }
    if (isEbs) {
      if (m[1]!.split('/')[3] !== 'ebs')
        return fail(res, 403, 'SignatureDoesNotMatch', 'The credential scope does not name the ebs service');
      ebs(req, url, body, res);
      return;
    }
    if (req.method !== 'POST' || params.Version !== '2016-11-15')
      return fail(res, 400, 'InvalidParameterValue', 'expected a POST of API version 2016-11-15');
    const fault = injected.shift();
    if (fault?.kind === 'error') return fail(res, fault.status, fault.code, fault.message);
    if (fault?.kind === 'garbage') {
      res.writeHead(fault.status, { 'content-type': 'text/html' });
      return void res.end(fault.body);
    }

    switch (params.Action) {
      case 'RunInstances': {
        for (const required of ['ImageId', 'InstanceType', 'MinCount', 'MaxCount']) {
          if (!params[required])
            return fail(res, 400, 'MissingParameter', `The request must contain the parameter ${required}`);
        }
        const token = params.ClientToken ?? null;
        const earlier = token ? [...instances.values()].filter((i) => i.clientToken === token) : [];
        if (earlier.length) return answer(res, 'RunInstances', reservation(earlier));
        if (!/^ami-[0-9a-f]{8}([0-9a-f]{9})?$/.test(params.ImageId!))
          return fail(res, 400, 'InvalidAMIID.Malformed', `Invalid id: "${params.ImageId}"`);
        if (!options.images.includes(params.ImageId!) && !registeredImages.has(params.ImageId!))
          return fail(res, 400, 'InvalidAMIID.NotFound', `The image id '[${params.ImageId}]' does not exist`);
        const count = Number(params.MaxCount);
        const active = [...instances.values()].filter((i) => i.state === 'pending' || i.state === 'running').length;
        if (active + Number(params.MinCount) > standIn.instanceLimit) {
          return fail(
            res,
            400,
            'InstanceLimitExceeded',
            `You have requested more instances (${active + count}) than your current instance limit of ${standIn.instanceLimit} allows for the specified instance type.`,
          );
        }
        const tagsFor = (type: string) => {
          const out: Record<string, string> = {};
          for (let n = 1; params[`TagSpecification.${n}.ResourceType`]; n++) {
            if (params[`TagSpecification.${n}.ResourceType`] !== type) continue;
            for (let t = 1; params[`TagSpecification.${n}.Tag.${t}.Key`] !== undefined; t++) {
              out[params[`TagSpecification.${n}.Tag.${t}.Key`]!] = params[`TagSpecification.${n}.Tag.${t}.Value`] ?? '';
            }
          }
          return out;
        };
        const group = Array.from({ length: Math.max(1, Math.min(count, standIn.instanceLimit - active)) }, () =>
          make({
            imageId: params.ImageId!,
            instanceType: params.InstanceType!,
            tags: tagsFor('instance'),
            volumeTags: tagsFor('volume'),
            userData: params.UserData ? Buffer.from(params.UserData, 'base64').toString('utf8') : '',
            subnetId: params.SubnetId ?? null,
            securityGroupIds: list(params, 'SecurityGroupId'),
            availabilityZone: params['Placement.AvailabilityZone'] ?? 'eu-central-1a',
            clientToken: token,
            shutdownBehavior: params.InstanceInitiatedShutdownBehavior ?? null,
          }),
        );
        return answer(res, 'RunInstances', reservation(group));
      }
      case 'TerminateInstances': {
        const ids = list(params, 'InstanceId');
        if (!ids.length) return fail(res, 400, 'MissingParameter', 'The request must contain the parameter InstanceId');
        for (const id of ids) {
          if (!/^i-[0-9a-f]{8}([0-9a-f]{9})?$/.test(id))
            return fail(res, 400, 'InvalidInstanceID.Malformed', `Invalid id: "${id}"`);
          if (!instances.has(id))
            return fail(res, 400, 'InvalidInstanceID.NotFound', `The instance ID '${id}' does not exist`);
        }
        const items = ids.map((id) => {
          const i = instances.get(id)!;
          const previous = i.state;
          i.state = 'terminated';
          return `<item><instanceId>${id}</instanceId><currentState>${state(previous === 'terminated' ? 'terminated' : 'shutting-down')}</currentState><previousState>${state(previous)}</previousState></item>`;
        });
        return answer(res, 'TerminateInstances', `<instancesSet>${items.join('')}</instancesSet>`);
      }
      case 'DescribeInstances': {
        const filters: { name: string; values: string[] }[] = [];
        for (let n = 1; params[`Filter.${n}.Name`]; n++)
          filters.push({ name: params[`Filter.${n}.Name`]!, values: list(params, `Filter.${n}.Value`) });
        const max = params.MaxResults ? Number(params.MaxResults) : 1000;
        if (max < 5 || max > 1000)
          return fail(res, 400, 'InvalidParameterValue', 'MaxResults must be between 5 and 1000');
        const start = params.NextToken ? Number(Buffer.from(params.NextToken, 'base64url').toString()) : 0;
        const matching = [...instances.values()].filter((i) =>
          filters.every((f) => {
            if (f.name.startsWith('tag:')) return f.values.includes(i.tags[f.name.slice(4)] ?? '\0');
            if (f.name === 'instance-state-name') return f.values.includes(i.state);
            return true;
          }),
        );
        const page = matching.slice(start, start + max);
        const next = start + max < matching.length ? Buffer.from(String(start + max)).toString('base64url') : null;
        // One reservation per instance, as separate RunInstances calls make them.
        const set = page.map((i) => `<item>${reservation([i])}</item>`).join('');
        return answer(
          res,
          'DescribeInstances',
          `<reservationSet>${set}</reservationSet>${next ? `<nextToken>${next}</nextToken>` : ''}`,
        );
      }
      case 'DescribeSnapshots': {
        const ids = list(params, 'SnapshotId');
        const unknown = ids.find((id) => !snapshots.has(id));
        if (unknown) return fail(res, 400, 'InvalidSnapshot.NotFound', `The snapshot '${unknown}' does not exist.`);
        const items = (ids.length ? ids.map((id) => snapshots.get(id)!) : [...snapshots.values()]).map((snap) => {
          let state: string = snap.state;
          if (state === 'completed' && snap.pendingPolls > 0) {
            snap.pendingPolls--;
            state = 'pending';
          }
          return (
            `<item><snapshotId>${snap.id}</snapshotId><volumeId>vol-ffffffff</volumeId><status>${state}</status>` +
            `<startTime>${snap.startTime.toISOString()}</startTime><progress>${state === 'completed' ? '100%' : '50%'}</progress><ownerId>123456789012</ownerId>` +
            `<volumeSize>${snap.volumeSizeGib}</volumeSize><description>${esc(snap.description)}</description><encrypted>false</encrypted>` +
            `<tagSet>${Object.entries(snap.tags)
              .map(([k, v]) => `<item><key>${esc(k)}</key><value>${esc(v)}</value></item>`)
              .join('')}</tagSet></item>`
          );
        });
        return answer(res, 'DescribeSnapshots', `<snapshotSet>${items.join('')}</snapshotSet>`);
      }
      case 'DeleteSnapshot': {
        const id = params.SnapshotId ?? '';
        if (!snapshots.has(id))
          return fail(res, 400, 'InvalidSnapshot.NotFound', `The snapshot '${id}' does not exist.`);
        const user = [...registeredImages.values()].find((i) => i.snapshotId === id);
        if (user)
          return fail(res, 400, 'InvalidSnapshot.InUse', `The snapshot ${id} is currently in use by ${user.id}`);
        snapshots.delete(id);
        return answer(res, 'DeleteSnapshot', '<return>true</return>');
      }
      case 'RegisterImage': {
        const name = params.Name ?? '';
        if (!/^[A-Za-z0-9()[\] ./\-'@_]{3,128}$/.test(name))
          return fail(res, 400, 'InvalidAMIName.Malformed', `AMI name ${name} is invalid`);
        if ([...registeredImages.values()].some((i) => i.name === name))
          return fail(res, 400, 'InvalidAMIName.Duplicate', `AMI name ${name} is already in use by an AMI`);
        const root = params.RootDeviceName ?? '';
        let mapping = 0;
        for (let n = 1; params[`BlockDeviceMapping.${n}.DeviceName`]; n++)
          if (params[`BlockDeviceMapping.${n}.DeviceName`] === root) mapping = n;
        if (!mapping)
          return fail(res, 400, 'InvalidBlockDeviceMapping', `The root device ${root} has no block device mapping`);
        const snapshotId = params[`BlockDeviceMapping.${mapping}.Ebs.SnapshotId`] ?? '';
        const snap = snapshots.get(snapshotId);
        if (!snap) return fail(res, 400, 'InvalidSnapshot.NotFound', `The snapshot '${snapshotId}' does not exist.`);
        if (snap.state !== 'completed')
          return fail(res, 400, 'IncorrectState', `Snapshot ${snapshotId} is not completed`);
        if (!['x86_64', 'arm64', 'i386'].includes(params.Architecture ?? 'x86_64'))
          return fail(res, 400, 'InvalidParameterValue', 'Invalid architecture');
        if (params.BootMode !== undefined && !['legacy-bios', 'uefi', 'uefi-preferred'].includes(params.BootMode))
          return fail(res, 400, 'InvalidParameterValue', 'Invalid boot mode');
        const tags: Record<string, string> = {};
        for (let n = 1; params[`TagSpecification.${n}.ResourceType`]; n++) {
          if (params[`TagSpecification.${n}.ResourceType`] !== 'image') continue;
          for (let t = 1; params[`TagSpecification.${n}.Tag.${t}.Key`] !== undefined; t++)
            tags[params[`TagSpecification.${n}.Tag.${t}.Key`]!] = params[`TagSpecification.${n}.Tag.${t}.Value`] ?? '';
        }
        const image: Ec2StandInImage = {
          id: `ami-${hex(17)}`,
          name,
          architecture: params.Architecture ?? 'x86_64',
          rootDeviceName: root,
          snapshotId,
          volumeType: params[`BlockDeviceMapping.${mapping}.Ebs.VolumeType`] ?? null,
          enaSupport: params.EnaSupport === 'true',
          bootMode: params.BootMode ?? null,
          virtualizationType: params.VirtualizationType ?? null,
          tags,
        };
        registeredImages.set(image.id, image);
        return answer(res, 'RegisterImage', `<imageId>${image.id}</imageId>`);
      }
      case 'DeregisterImage': {
        const id = params.ImageId ?? '';
        if (!registeredImages.delete(id))
          return fail(res, 400, 'InvalidAMIID.NotFound', `The image id '[${id}]' does not exist`);
        return answer(res, 'DeregisterImage', '<return>true</return>');
      }
      case 'CreateLaunchTemplate': {
        const name = params.LaunchTemplateName ?? '';
        if (!/^[a-zA-Z0-9().\-/_]{3,128}$/.test(name))
          return fail(
            res,
            400,
            'InvalidLaunchTemplateName.MalformedException',
            `Launch template name ${name} is malformed`,
          );
        const earlier = standIn.launchTemplates.get(name);
        const token = params.ClientToken ?? null;
        if (earlier && !(token && earlier.clientToken === token)) {
          return fail(
            res,
            400,
            'InvalidLaunchTemplateName.AlreadyExistsException',
            `Launch template name already in use.`,
          );
        }
        if (!params['LaunchTemplateData.ImageId'])
          return fail(
            res,
            400,
            'MissingParameter',
            'The request must contain the parameter LaunchTemplateData.ImageId',
          );
        const data: Record<string, string> = {};
        for (const [k, v] of Object.entries(params))
          if (k.startsWith('LaunchTemplateData.')) data[k.slice('LaunchTemplateData.'.length)] = v;
        const template = earlier ?? { id: `lt-${hex(17)}`, clientToken: token, data };
        standIn.launchTemplates.set(name, template);
        return answer(
          res,
          'CreateLaunchTemplate',
          `<launchTemplate><launchTemplateId>${template.id}</launchTemplateId><launchTemplateName>${esc(name)}</launchTemplateName>` +
            `<createTime>${new Date().toISOString()}</createTime><createdBy>arn:aws:iam::123456789012:user/tagsched</createdBy>` +
            `<defaultVersionNumber>1</defaultVersionNumber><latestVersionNumber>1</latestVersionNumber></launchTemplate>`,
        );
      }
      case 'DeleteLaunchTemplate': {
        const name = params.LaunchTemplateName ?? '';
        const template = standIn.launchTemplates.get(name);
        if (!template)
          return fail(
            res,
            400,
            'InvalidLaunchTemplateName.NotFoundException',
            `The specified launch template, with template name ${name}, does not exist.`,
          );
        standIn.launchTemplates.delete(name);
        return answer(
          res,
          'DeleteLaunchTemplate',
          `<launchTemplate><launchTemplateId>${template.id}</launchTemplateId><launchTemplateName>${esc(name)}</launchTemplateName></launchTemplate>`,
        );
      }
      case 'CreateFleet': {
        if (params.Type !== 'instant')
          return fail(res, 400, 'InvalidParameterValue', 'this stand-in answers instant fleets only');
        const token = params.ClientToken ?? null;
        if (token && fleets.has(token)) return answer(res, 'CreateFleet', fleets.get(token)!);
        const prefix = 'LaunchTemplateConfigs.1';
        const templateName = params[`${prefix}.LaunchTemplateSpecification.LaunchTemplateName`] ?? '';
        const template = standIn.launchTemplates.get(templateName);
        if (!template)
          return fail(
            res,
            400,
            'InvalidLaunchTemplateName.NotFoundException',
            `The specified launch template, with template name ${templateName}, does not exist.`,
          );
        if (params['TargetCapacitySpecification.TotalTargetCapacity'] !== '1')
          return fail(res, 400, 'InvalidParameterValue', 'this stand-in starts fleets of one instance');
        const market = params['TargetCapacitySpecification.DefaultTargetCapacityType'] ?? '';
        if (market !== 'on-demand' && market !== 'spot')
          return fail(res, 400, 'InvalidParameterValue', `Invalid DefaultTargetCapacityType: ${market}`);
        const overrides: {
          n: number;
          instanceType: string;
          zone: string | null;
          subnetId: string | null;
          maxPrice: string | null;
          priority: number | null;
        }[] = [];
        for (let n = 1; params[`${prefix}.Overrides.${n}.InstanceType`] !== undefined; n++) {
          const at = `${prefix}.Overrides.${n}`;
          overrides.push({
            n,
            instanceType: params[`${at}.InstanceType`]!,
            zone: params[`${at}.AvailabilityZone`] ?? null,
            subnetId: params[`${at}.SubnetId`] ?? null,
            maxPrice: params[`${at}.MaxPrice`] ?? null,
            priority: params[`${at}.Priority`] === undefined ? null : Number(params[`${at}.Priority`]),
          });
        }
        if (!overrides.length)
          return fail(res, 400, 'MissingParameter', 'The request must contain LaunchTemplateConfigs.1.Overrides');
        // By priority, lowest first; an override without one comes last.
        const ordered = [...overrides].sort((a, b) => (a.priority ?? Infinity) - (b.priority ?? Infinity) || a.n - b.n);
        const lifecycle = market;
        const overrideXml = (o: (typeof overrides)[number]) =>
          `<launchTemplateAndOverrides><launchTemplateSpecification><launchTemplateId>${template.id}</launchTemplateId><version>1</version></launchTemplateSpecification>` +
          `<overrides><instanceType>${esc(o.instanceType)}</instanceType>` +
          (o.zone ? `<availabilityZone>${esc(o.zone)}</availabilityZone>` : '') +
          (o.subnetId ? `<subnetId>${esc(o.subnetId)}</subnetId>` : '') +
          (o.maxPrice ? `<maxPrice>${esc(o.maxPrice)}</maxPrice>` : '') +
          (o.priority === null ? '' : `<priority>${o.priority.toFixed(1)}</priority>`) +
          `</overrides></launchTemplateAndOverrides><lifecycle>${lifecycle}</lifecycle>`;
        const errors: string[] = [];
        let started: { o: (typeof overrides)[number]; instance: Ec2StandInInstance } | null = null;
        const data = template.data;
        const active = () =>
          [...instances.values()].filter((i) => i.state === 'pending' || i.state === 'running').length;
        for (const o of ordered) {
          const zone = o.zone ?? 'eu-central-1a';
          const u = standIn.unavailable;
          let code =
            [
              `${market}:${o.instanceType}@${zone}`,
              `${market}:${o.instanceType}@*`,
              `${o.instanceType}@${zone}`,
              `${o.instanceType}@*`,
            ]
              .map((k) => u.get(k))
              .find(Boolean) ?? null;
          if (!code && market === 'spot' && o.maxPrice !== null && Number(o.maxPrice) < standIn.spotPrice)
            code = 'SpotMaxPriceTooLow';
          if (!code && active() >= standIn.instanceLimit) code = 'InstanceLimitExceeded';
          if (!code && !options.images.includes(data.ImageId!) && !registeredImages.has(data.ImageId!))
            code = 'InvalidAMIID.NotFound';
          if (code) {
            errors.push(
              `<item>${overrideXml(o)}<errorCode>${esc(code)}</errorCode><errorMessage>${esc(`${code}: no ${o.instanceType} in ${zone} now`)}</errorMessage></item>`,
            );
            continue;
          }
          const tagsFor = (type: string) => {
            const out: Record<string, string> = {};
            for (let n = 1; data[`TagSpecification.${n}.ResourceType`]; n++) {
              if (data[`TagSpecification.${n}.ResourceType`] !== type) continue;
              for (let t = 1; data[`TagSpecification.${n}.Tag.${t}.Key`] !== undefined; t++)
                out[data[`TagSpecification.${n}.Tag.${t}.Key`]!] = data[`TagSpecification.${n}.Tag.${t}.Value`] ?? '';
            }
            return out;
          };
          const instance = make({
            imageId: data.ImageId!,
            instanceType: o.instanceType,
            tags: tagsFor('instance'),
            volumeTags: tagsFor('volume'),
            userData: data.UserData ? Buffer.from(data.UserData, 'base64').toString('utf8') : '',
            subnetId: o.subnetId,
            securityGroupIds: list(data, 'SecurityGroupId'),
            availabilityZone: zone,
            clientToken: token,
            shutdownBehavior: data.InstanceInitiatedShutdownBehavior ?? null,
          });
          started = { o, instance };
          break;
        }
        const fleetId = `fleet-${hex(8)}-${hex(4)}-${hex(4)}-${hex(4)}-${hex(12)}`;
        const body =
          `<fleetId>${fleetId}</fleetId><errorSet>${errors.join('')}</errorSet>` +
          `<fleetInstanceSet>${
            started
              ? `<item>${overrideXml(started.o)}<instanceIds><item>${started.instance.id}</item></instanceIds><instanceType>${esc(started.o.instanceType)}</instanceType></item>`
              : ''
          }</fleetInstanceSet>`;
        if (token) fleets.set(token, body);
        return answer(res, 'CreateFleet', body);
      }
      default:
        return fail(res, 400, 'InvalidAction', `The action ${params.Action} is not valid for this web service.`);
    }
  });

  return Object.assign(standIn, { url: server.url, close: server.close }) as Ec2StandIn;
}
