/**
 * The `hetzner` provider: Hetzner Cloud servers (https://docs.hetzner.cloud/), created with the
 * agent's cloud-init user data and labelled with the pool and the instance name, deleted by id, and
 * listed by the pool's label. Plain `fetch` with a bearer token from the pool's account
 * (`{"token": …}`); the base URL is the server's setting (`TAGSCHED_HETZNER_API_URL`), never a pool's.
 */
import { z } from 'zod';
import type { InputProblem } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import {
  ProviderError,
  type LaunchSpec,
  type Provider,
  type ProviderCall,
  type ProviderErrorKind,
  type ProviderInstance,
} from './provider.js';
import { callDeadline } from './deadline.js';
import { describeOffering, marksOffering, offeringKey, offeringsOf, type OfferingFailure } from './offerings.js';
import { accountRedactor } from './redact.js';
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

/** The labels every server of a pool carries; `list` selects on the first. */
export const HETZNER_LABELS = { pool: 'tagsched-pool', instance: 'tagsched-instance' } as const;

/** Servers asked for per page of a list (the API's maximum). */
const PER_PAGE = 50;
/** A list stops after this many pages rather than follow a `next_page` that never ends. */
const MAX_PAGES = 400;

// Hetzner's rules: a label value is empty or 1–63 characters, alphanumeric at both ends, with
// `-`, `_` and `.` inside; a server name is a hostname (RFC 1123).
const LABEL_VALUE = /^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$/;
const HOSTNAME =
  /^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/;
/** A pool's name leaves room for its instances' suffixes within the 63 characters of a label value. */
const POOL_NAME = /^[A-Za-z0-9](?:[A-Za-z0-9.-]{0,48}[A-Za-z0-9])?$/;

/** Hetzner's error codes (`{"error": {"code": …}}`) as the provisioner acts on them. */
export const HETZNER_ERROR_KINDS: Readonly<Record<string, ProviderErrorKind>> = {
  unauthorized: 'auth',
  forbidden: 'auth',
  token_readonly: 'auth',
  resource_limit_exceeded: 'quota',
  resource_unavailable: 'capacity',
  placement_error: 'capacity',
  no_space_left_in_location: 'capacity',
  rate_limit_exceeded: 'unavailable',
  locked: 'unavailable',
  conflict: 'unavailable',
  maintenance: 'unavailable',
  service_error: 'unavailable',
  server_error: 'unavailable',
  unavailable: 'unavailable',
  bad_gateway: 'unavailable',
  timeout: 'timeout',
  invalid_input: 'invalid',
  json_error: 'invalid',
  uniqueness_error: 'invalid',
  not_found: 'invalid',
  protected: 'invalid',
  invalid_server_type: 'invalid',
  unsupported_error: 'invalid',
  deprecated_api_endpoint: 'invalid',
};

function kindOfStatus(status: number): ProviderErrorKind {
  if (status === 401 || status === 403) return 'auth';
  if (status === 429 || status >= 500) return 'unavailable';
  return 'invalid';
}

export interface HetznerSettings {
  /** `TAGSCHED_HETZNER_API_URL`: `https://api.hetzner.cloud/v1`, or a stand-in in tests. */
  readonly apiUrl: string;
  readonly logger: Logger;
}

const ACCOUNT_FIELDS = ['token'] as const;
const FOREIGN = { command: 'exec', subnetId: 'ec2', securityGroupIds: 'ec2' } as const;

function specificationProblems(specifications: Readonly<Record<string, unknown>>): InputProblem[] {
  const at = (field: string) => `${SPECIFICATIONS_PATH}.${field}`;
  const offerings = offeringFields(specifications);
  const problems = [
    ...offerings.flatMap((o) =>
      checkPattern(
        o.instanceType,
        o.at('instanceType'),
        /^[a-z0-9][a-z0-9-]{0,49}$/,
        'a Hetzner server type such as cx22, cpx31 or cax21',
        { required: true },
      ),
    ),
    ...checkPattern(
      specValue(specifications, 'providerImage'),
      at('providerImage'),
      /^(?:[0-9]{1,18}|[a-z0-9][a-z0-9._-]{0,62})$/,
      'a Hetzner image id (digits) or name, such as debian-12 (optional when the pool names a published worker image)',
      { required: specValue(specifications, 'image') === undefined },
    ),
    ...offerings.flatMap((o) => [
      ...checkPattern(
        o.location,
        o.at('location'),
        /^[a-z0-9][a-z0-9-]{0,19}$/,
        'a Hetzner location such as fsn1, nbg1, hel1 or ash (optional)',
        { required: false },
      ),
      ...(o.market === 'spot'
        ? [problem(o.at('market'), 'Hetzner Cloud has no spot market: a hetzner offering is on-demand')]
        : []),
    ]),
    ...foreignFields(specifications, 'hetzner', FOREIGN),
  ];
  return problems;
}

/** Checks a hetzner pool: its name (it becomes a label), its specifications and its account (`{"token": …}`). */
export function validateHetznerPool(input: PoolProviderInput): InputProblem[] {
  const problems: InputProblem[] = [];
  if (!POOL_NAME.test(input.name)) {
    problems.push(
      problem(
        'input.name',
        'a hetzner pool is named with letters, digits, "-" and "." (alphanumeric at both ends, at most 50 characters): its name labels its servers and begins their host names',
      ),
    );
  }
  problems.push(...specificationProblems(input.specifications));
  if (input.account === null)
    problems.push(
      problem(
        ACCOUNT_PATH,
        'a hetzner pool needs an account: {"token": "<a Hetzner Cloud API token with read and write access>"}',
      ),
    );
  else if (input.account !== undefined) {
    problems.push(
      ...checkPattern(
        input.account.token,
        `${ACCOUNT_PATH}.token`,
        /^[\x21-\x7e]{1,256}$/,
        'a Hetzner Cloud API token (printable characters, no spaces)',
        {
          required: true,
          secret: true,
        },
      ),
      ...unknownAccountFields(input.account, ACCOUNT_FIELDS, 'hetzner'),
    );
  }
  return problems;
}

const serverShape = z.object({
  id: z.number().int().positive(),
  name: z.string(),
  status: z.string(),
  created: z.string().nullish(),
  labels: z.record(z.string(), z.string()).nullish(),
});
// The created server's type with its prices per location, and its location (the documented Server
// object): read for its price only, so a part missing or malformed leaves the price unknown.
const pricedServer = z.object({
  server_type: z.object({
    prices: z.array(z.object({ location: z.string(), price_hourly: z.object({ gross: z.string() }) })),
  }),
  datacenter: z.object({ location: z.object({ name: z.string() }) }),
});
const createAnswer = z.object({ server: z.looseObject(serverShape.shape) });

/**
 * The hourly price of a created server from its create answer: its type's gross price (with VAT, in
 * the project's currency, EUR) in its location; null when the answer does not say (scheduler/rules/pool-cost.ts: launchPrice).
 */
export function hetznerHourlyPrice(server: unknown): number | null {
  const parsed = pricedServer.safeParse(server);
  if (!parsed.success) return null;
  const where = parsed.data.datacenter.location.name;
  const price = Number(parsed.data.server_type.prices.find((p) => p.location === where)?.price_hourly.gross);
  return Number.isFinite(price) && price >= 0 ? price : null;
}
const listAnswer = z.object({
  servers: z.array(serverShape),
  meta: z.object({ pagination: z.object({ next_page: z.number().int().positive().nullish() }) }).nullish(),
});
const errorAnswer = z.object({ error: z.object({ code: z.string(), message: z.string() }) });

/** Hetzner's server statuses in the provider contract's words. */
function stateOf(status: string): ProviderInstance['state'] {
  switch (status) {
    case 'initializing':
    case 'starting':
    case 'rebuilding':
      return 'starting';
    case 'stopping':
    case 'off':
    case 'deleting':
      return 'stopping';
    default:
      // running, migrating, unknown: the server exists and may be working.
      return 'running';
  }
}

function instanceOf(server: z.infer<typeof serverShape>): ProviderInstance {
  const created = server.created ? new Date(server.created) : null;
  return {
    id: String(server.id),
    name: server.labels?.[HETZNER_LABELS.instance] ?? server.name,
    state: stateOf(server.status),
    createdAt: created && !Number.isNaN(created.getTime()) ? created : null,
  };
}

/** Creates the hetzner provider (it keeps nothing between calls: the pool and its token come with each). */
export function createHetznerProvider(settings: HetznerSettings): Provider {
  const log = settings.logger.child({ provider: 'hetzner' });

  /** One API request; its answer is parsed with `shape`, or the failure becomes a typed error. */
  async function api<T>(
    what: string,
    method: string,
    path: string,
    call: ProviderCall,
    shape: z.ZodType<T>,
    body?: unknown,
  ): Promise<T> {
    const token = call.account?.token;
    if (typeof token !== 'string' || !token)
      throw new ProviderError('auth', `${what}: the pool's account has no "token"`, 'no_token');
    const redact = accountRedactor(call.account, { fields: ACCOUNT_FIELDS });
    const deadline = callDeadline(call);
    const started = Date.now();
    let status = 0;
    try {
      let text: string;
      try {
        const res = await fetch(`${settings.apiUrl}${path}`, {
          method,
          headers: {
            authorization: `Bearer ${token}`,
            accept: 'application/json',
            ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          },
          body: body === undefined ? undefined : JSON.stringify(body),
          signal: deadline.signal,
        });
        status = res.status;
        text = await res.text();
      } catch (err) {
        if (deadline.signal.aborted) throw deadline.failure(what);
        const cause = (err as { cause?: { code?: string } }).cause?.code ?? (err as Error).message;
        throw new ProviderError(
          'unavailable',
          `${what}: the API could not be reached (${redact(String(cause))})`,
          'network',
        );
      }
      let document: unknown;
      try {
        document = JSON.parse(text);
      } catch {
        document = undefined;
      }
      if (status < 200 || status > 299) {
        const failed = errorAnswer.safeParse(document);
        const given = failed.success ? failed.data.error.code : `http_${status}`;
        // The API's code and message are the API's text: blanked like any (calls.ts cuts the message).
        const code = redact.head(given, 200);
        const message = failed.success ? redact(failed.data.error.message) : `HTTP ${status}`;
        throw new ProviderError(
          HETZNER_ERROR_KINDS[given] ?? kindOfStatus(status),
          `${what}: ${message} (${code})`,
          code,
        );
      }
      const parsed = shape.safeParse(document);
      if (!parsed.success) {
        const issue = parsed.error.issues[0]!;
        throw new ProviderError(
          'unavailable',
          `${what}: malformed answer (HTTP ${status}): ${issue.path.join('.') || 'body'}: ${issue.message}`,
          'malformed_answer',
        );
      }
      log.debug({ pool: call.pool.name, operation: what, status, ms: Date.now() - started }, 'hetzner call');
      return parsed.data;
    } catch (err) {
      const e = err as ProviderError;
      log.warn(
        {
          pool: call.pool.name,
          operation: what,
          status,
          ms: Date.now() - started,
          kind: e.kind,
          code: e.providerCode,
          err: e.message,
        },
        'hetzner call failed',
      );
      throw err;
    }
  }

  /** The server of an instance name, when it is this pool's (a launch whose answer was lost). */
  async function findLaunched(spec: LaunchSpec, call: ProviderCall): Promise<string | null> {
    const { servers } = await api(
      'hetzner launch',
      'GET',
      `/servers?name=${encodeURIComponent(spec.name)}`,
      call,
      listAnswer,
    );
    const mine = servers.find(
      (s) => s.labels?.[HETZNER_LABELS.pool] === spec.pool && s.labels?.[HETZNER_LABELS.instance] === spec.name,
    );
    return mine ? String(mine.id) : null;
  }

  return {
    async launch(spec, call) {
      const problems = specificationProblems(spec.specifications);
      if (!HOSTNAME.test(spec.name) || !LABEL_VALUE.test(spec.name)) {
        problems.push(
          problem(
            'name',
            `"${spec.name}" cannot name a Hetzner server (a host name of letters, digits and "-", at most 63 characters)`,
          ),
        );
      }
      if (!LABEL_VALUE.test(spec.pool))
        problems.push(problem('pool', `"${spec.pool}" cannot be a Hetzner label value`));
      if (problems.length)
        throw new ProviderError('invalid', `hetzner launch: ${problemsMessage(problems)}`, 'invalid_specifications');
      // The pool's offerings in order (those marked unavailable already left out by the provisioner): the next is tried when one has no room.
      const offerings = spec.offerings?.length ? spec.offerings : offeringsOf(spec.specifications);
      const failures: OfferingFailure[] = [];
      let last: ProviderError | null = null;
      for (const offering of offerings) {
        const request = {
          name: spec.name,
          server_type: offering.instanceType,
          image: spec.specifications.providerImage,
          ...(offering.location === null ? {} : { location: offering.location }),
          user_data: spec.userData,
          labels: { [HETZNER_LABELS.pool]: spec.pool, [HETZNER_LABELS.instance]: spec.name },
          start_after_create: true,
        };
        try {
          const { server } = await api('hetzner launch', 'POST', '/servers', call, createAnswer, request);
          return {
            id: String(server.id),
            offering: offeringKey(offering),
            unavailable: failures,
            pricePerHour: hetznerHourlyPrice(server),
          };
        } catch (err) {
          // A retried launch whose first answer was lost finds its server under the same name (by which offering, it cannot tell).
          if (err instanceof ProviderError && err.providerCode === 'uniqueness_error') {
            const id = await findLaunched(spec, call);
            if (id) return failures.length ? { id, unavailable: failures } : { id };
          }
          if (!(err instanceof ProviderError) || !marksOffering(err.kind)) {
            if (err instanceof ProviderError && failures.length)
              throw new ProviderError(err.kind, err.message, err.providerCode, failures);
            throw err;
          }
          failures.push({ key: offeringKey(offering), kind: err.kind, code: err.providerCode, reason: err.message });
          last = err;
        }
      }
      if (!last)
        throw new ProviderError('invalid', 'hetzner launch: the pool names no server type', 'invalid_specifications');
      const tried = failures.map((f, i) => `${describeOffering(offerings[i]!)}: ${f.reason}`).join('; ');
      throw new ProviderError(
        last.kind,
        `hetzner launch: no offering could start a server: ${tried}`,
        last.providerCode,
        failures,
      );
    },

    async terminate(id, call) {
      if (!/^[0-9]{1,18}$/.test(id))
        throw new ProviderError(
          'invalid',
          `hetzner terminate: "${id.slice(0, 80)}" is not a Hetzner server id`,
          'invalid_id',
        );
      try {
        await api('hetzner terminate', 'DELETE', `/servers/${id}`, call, z.unknown());
      } catch (err) {
        if (err instanceof ProviderError && err.providerCode === 'not_found') return;
        throw err;
      }
    },

    async list(poolName, call) {
      if (!LABEL_VALUE.test(poolName))
        throw new ProviderError(
          'invalid',
          `hetzner list: "${poolName}" cannot be a Hetzner label value`,
          'invalid_specifications',
        );
      const selector = encodeURIComponent(`${HETZNER_LABELS.pool}==${poolName}`);
      const out: ProviderInstance[] = [];
      for (let page = 1, pages = 0; page && pages < MAX_PAGES; pages++) {
        const answer = await api(
          'hetzner list',
          'GET',
          `/servers?label_selector=${selector}&per_page=${PER_PAGE}&page=${page}`,
          call,
          listAnswer,
        );
        out.push(...answer.servers.map(instanceOf));
        page = answer.meta?.pagination.next_page ?? 0;
      }
      return out;
    },
  };
}
