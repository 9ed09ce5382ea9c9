/**
 * What a provider checks of a pool when it is created or changed: its specifications and its account,
 * every problem at once, each naming the field and what is allowed. A problem never quotes a secret.
 */
import { ERROR_CODES, type InputProblem } from '../core/errors.js';
import type { Manifest } from '../core/manifest-format.js';

/** A pool as its provider sees it when the pool is created or changed. */
export interface PoolProviderInput {
  /** The pool's name (clouds label what they start with it). */
  readonly name: string;
  readonly specifications: Readonly<Record<string, unknown>>;
  /**
   * The provider account as given in this change; `undefined` when the change leaves the stored one
   * as it is (its fields are then not checked again), `null` when the pool has none.
   */
  readonly account?: Readonly<Record<string, unknown>> | null;
  /** The registered worker image the specifications name (`image`), when there is one. */
  readonly image?: { readonly name: string; readonly manifest: Manifest } | null;
}

export const SPECIFICATIONS_PATH = 'input.specifications';
export const ACCOUNT_PATH = 'input.providerAccount';

/** One problem of a pool's input, with its path. */
export function problem(path: string, message: string): InputProblem {
  return { code: ERROR_CODES.INVALID_INPUT, message: `${path}: ${message}`, path, tag: null };
}

/** A specification's value, `null` and absent alike read as absent. */
export function specValue(specifications: Readonly<Record<string, unknown>>, field: string): unknown {
  const value = specifications[field];
  return value === null ? undefined : value;
}

/** Checks one string field against a pattern; `allowed` says in words what the pattern accepts. */
export function checkPattern(
  value: unknown,
  path: string,
  pattern: RegExp,
  allowed: string,
  options: { required: boolean; secret?: boolean },
): InputProblem[] {
  if (value === undefined) return options.required ? [problem(path, `is required: ${allowed}`)] : [];
  if (typeof value !== 'string') return [problem(path, `must be a string: ${allowed}`)];
  if (pattern.test(value)) return [];
  const shown = options.secret ? 'the value given' : `"${value.slice(0, 80)}"`;
  return [problem(path, `${shown} is not allowed: ${allowed}`)];
}

/** Specifications that belong to other providers: a pool of this type would silently ignore them. */
export function foreignFields(
  specifications: Readonly<Record<string, unknown>>,
  providerType: string,
  foreign: Readonly<Record<string, string>>,
): InputProblem[] {
  return Object.entries(foreign)
    .filter(([field]) => specValue(specifications, field) !== undefined)
    .map(([field, owner]) =>
      problem(`${SPECIFICATIONS_PATH}.${field}`, `is for ${owner} pools; a ${providerType} pool does not use it`),
    );
}

/** Fields of an account that its provider does not know (a typo would otherwise go unnoticed). */
export function unknownAccountFields(
  account: Readonly<Record<string, unknown>>,
  known: readonly string[],
  providerType: string,
): InputProblem[] {
  return Object.keys(account)
    .filter((key) => !known.includes(key))
    .map((key) =>
      problem(
        `${ACCOUNT_PATH}.${key.slice(0, 80)}`,
        `a ${providerType} account has only the fields ${known.join(', ')}`,
      ),
    );
}

/** The problems of a launch spec as one message, for the provider error of a launch that cannot be made. */
export function problemsMessage(problems: readonly InputProblem[]): string {
  return problems.map((p) => p.message.replace(/^input\./, '')).join('; ');
}

/** Where a pool names what it starts: each of its `offerings`, or its single `instanceType` and `location`. */
export interface OfferingFields {
  /** The path of the instance type, the location and the market: `input.specifications.offerings[2].instanceType`, or `input.specifications.instanceType`. */
  readonly at: (field: 'instanceType' | 'location' | 'market') => string;
  readonly instanceType: unknown;
  readonly location: unknown;
  readonly market: unknown;
}

/** The offerings of a pool's specifications to check, each with its paths (the pool's `instanceType` and `location` when it has no `offerings`). */
export function offeringFields(specifications: Readonly<Record<string, unknown>>): OfferingFields[] {
  const list = specValue(specifications, 'offerings');
  if (Array.isArray(list) && list.length) {
    return list.map((raw, i) => {
      const o = (raw && typeof raw === 'object' ? raw : {}) as Record<string, unknown>;
      return {
        at: (field) => `${SPECIFICATIONS_PATH}.offerings[${i}].${field}`,
        instanceType: o.instanceType ?? undefined,
        location: o.location ?? undefined,
        market: o.market ?? undefined,
      };
    });
  }
  return [
    {
      at: (field) => `${SPECIFICATIONS_PATH}.${field}`,
      instanceType: specValue(specifications, 'instanceType'),
      location: specValue(specifications, 'location'),
      market: undefined,
    },
  ];
}
