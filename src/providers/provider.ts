/**
 * The contract every pool provider implements (docs/design.md: pools and instances): start one machine that becomes one
 * worker, stop one, list what the provider has for a pool. A provider only talks to its cloud or
 * command; deciding what to start or stop, and keeping the books, is not its job.
 */
import type { Config } from '../core/config/config.js';
import type { Manifest } from '../core/manifest-format.js';
import type { Logger } from '../core/log.js';
import type { AgentBootstrap } from './user-data.js';

/** The markets an offering may name (providers/offerings.ts holds the rule of offerings). */
export const OFFERING_MARKETS = ['on-demand', 'spot'] as const;
export type OfferingMarket = (typeof OFFERING_MARKETS)[number];

/** One way to start a pool's machine. */
export interface Offering {
  readonly instanceType: string;
  /** EC2: an availability zone; Hetzner: a location; absent: wherever the provider chooses. */
  readonly location: string | null;
  readonly market: OfferingMarket;
  /** Spot only: the most paid per hour, in the provider's currency (USD on EC2); absent: the spot price. */
  readonly maxPricePerHour: number | null;
  /** The price of one hour of it in the site's currency, as the pool gives it (scheduler/rules/pool-cost.ts); absent or null: unknown. */
  readonly pricePerHour?: number | null;
}

/** An offering a provider tried and could not start, for the marks. */
export interface OfferingFailure {
  readonly key: string;
  readonly kind: ProviderErrorKind;
  /** The provider's own error code (InsufficientInstanceCapacity, resource_unavailable…). */
  readonly code: string | null;
  /** The provider's code and message, scrubbed like every provider message. */
  readonly reason: string;
}

/** What a provider is asked to start: one machine that boots as one tagsched worker. */
export interface LaunchSpec {
  /** The pool's name; providers label what they start with it, so that `list` finds it again. */
  readonly pool: string;
  /** The instance's name, unique in the farm: the worker's name too. */
  readonly name: string;
  /** The pool's specifications (instance type, location, image, cpu, memory, disk, …), already validated. */
  readonly specifications: Readonly<Record<string, unknown>>;
  /** How the agent on the new machine reaches the server and activates. */
  readonly agent: AgentBootstrap;
  /** Cloud-init user data carrying `agent` (see user-data.ts), for providers that boot images. */
  readonly userData: string;
  /** The registered worker image the pool names (`specifications.image`), with its manifest; null when it names none. */
  readonly image?: { readonly name: string; readonly manifest: Manifest } | null;
  /**
   * The offerings this launch may use, in the pool's order, those marked unavailable left out
   * (providers/offerings.ts); absent or empty for a pool without offerings. A cloud provider tries
   * them in order and reports each one that failed for capacity or quota.
   */
  readonly offerings?: readonly Offering[];
}

/** What a launch started. */
export interface LaunchResult {
  readonly id: string;
  /** The key of the offering that started it (providers/offerings.ts: offeringKey), when the pool has offerings. */
  readonly offering?: string;
  /** Offerings tried before it that failed (capacity, quota), for the marks. */
  readonly unavailable?: readonly OfferingFailure[];
  /** Its price per hour as the provider's API gave it (Hetzner: its server type's gross price in its location); absent or null: not given. */
  readonly pricePerHour?: number | null;
}

/** One machine as the provider sees it. */
export interface ProviderInstance {
  /** The provider's own id (a server id, an instance id, a process id…). */
  readonly id: string;
  /** The instance name it was launched with, when the provider kept it (label or tag). */
  readonly name: string | null;
  readonly state: 'starting' | 'running' | 'stopping' | 'gone';
  readonly createdAt: Date | null;
  /**
   * For a `gone` one: when it ended, as the provider saw it (a process's exit); reconciliation records
   * its end at that time, so that its runtime stops there and not at the cycle that noticed.
   */
  readonly endedAt?: Date | null;
}

/** What every provider call gets: the pool it is for, its decrypted provider account, and a deadline. */
export interface ProviderCall {
  /**
   * The pool the call is for. A provider serves every pool of its type, and some need the pool's
   * specifications for every operation, not just launch (exec runs the pool's `command`).
   */
  readonly pool: { readonly name: string; readonly specifications: Readonly<Record<string, unknown>> };
  /** The pool's provider account (credentials), decrypted for this call only; never logged. */
  readonly account: Readonly<Record<string, unknown>> | null;
  /** Aborted when the call's time is up or the service stops. */
  readonly signal: AbortSignal;
  readonly timeoutMs: number;
}

/**
 * A provider: the three operations of docs/design.md: pools and instances. `terminate` of an instance already gone succeeds,
 * and asking again is how a stop is pursued (the local provider forces a stop asked for longer
 * than the grace period ago). `close`, when there is one, runs once as the server process stops.
 */
export interface Provider {
  launch(spec: LaunchSpec, call: ProviderCall): Promise<LaunchResult>;
  terminate(id: string, call: ProviderCall): Promise<void>;
  list(pool: string, call: ProviderCall): Promise<ProviderInstance[]>;
  close?(): Promise<void>;
}

/**
 * Why a provider call failed, as the provisioner acts on it: `quota` and `capacity` wait and retry
 * later, `auth` and `invalid` need an admin (retrying will not help), `timeout` and `unavailable` are
 * retried with backoff.
 */
export const PROVIDER_ERROR_KINDS = ['quota', 'capacity', 'auth', 'timeout', 'invalid', 'unavailable'] as const;
export type ProviderErrorKind = (typeof PROVIDER_ERROR_KINDS)[number];

/** Kinds that a later attempt may cure without anyone changing the pool. */
export const RETRYABLE_PROVIDER_ERRORS: ReadonlySet<ProviderErrorKind> = new Set([
  'quota',
  'capacity',
  'timeout',
  'unavailable',
]);

/**
 * A provider call that failed, with a message fit for an admin's eyes: it names what failed and the
 * provider's own error code, and never carries the account or a token.
 */
export class ProviderError extends Error {
  override readonly name = 'ProviderError';
  constructor(
    readonly kind: ProviderErrorKind,
    message: string,
    /** The provider's own code (`resource_limit_exceeded`, `InstanceLimitExceeded`, an exit status…). */
    readonly providerCode: string | null = null,
    /** A launch's offerings that failed (capacity, quota) before it gave up, for the marks. */
    readonly offeringFailures: readonly OfferingFailure[] = [],
  ) {
    super(message);
  }

  get retryable(): boolean {
    return RETRYABLE_PROVIDER_ERRORS.has(this.kind);
  }
}

/** What a provider is made with. */
export interface ProviderDeps {
  /** The providers' section, and the server's address and data directory and the leases' heartbeat timeout, which local and qemu agents follow. */
  readonly config: Pick<Config, 'server' | 'leases' | 'providers'>;
  readonly log: Logger;
  /**
   * Called by a provider that sees one of its instances end by itself (a local agent's process
   * exiting): the provisioner reconciles that instance's pool at once rather than at its next periodic cycle.
   */
  readonly instanceEnded?: (pool: string) => void;
}

/** Makes the provider of one type for one server process. */
export type ProviderFactory = (deps: ProviderDeps) => Provider;
