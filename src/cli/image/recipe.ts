/**
 * A worker image's recipe (docs/design.md: images): which Debian suite and architecture, from which mirror,
 * with which extra APT source, which executor backends and tasks the image enables, and the ssh
 * keys that may log in to a machine booted from its disk image (none: no ssh server). Read from
 * a JSON file and/or flags, checked whole before any work: a bad recipe is a RecipeError that
 * names every field at fault and what to change. A recipe is public (the manifest records it), so
 * it holds no credentials: a URL with a user name or password is refused (url-userinfo.ts).
 */
import { z } from 'zod';
import { AptSourceError, parseAptSource } from './apt-source.js';
import { hasUserInfo, USERINFO_ADVICE } from '../../core/url-userinfo.js';

/** The executor backends an image can enable (docs/design.md: images); `auto` is a task's choice, not an image's. */
export const IMAGE_BACKENDS = ['unshare', 'incus-lxc', 'incus-vm', 'qemu'] as const;
export type ImageBackend = (typeof IMAGE_BACKENDS)[number];

/** The tasks an image can enable (docs/design.md: images). */
export const IMAGE_TASKS = [
  'autopkgtest',
  'sbuild',
  'mmdebstrap',
  'simplesystemimagebuild',
  'debsign',
  'sign',
] as const;
export type ImageTask = (typeof IMAGE_TASKS)[number];

/** The stable release, the default suite: its nodejs (20.19) runs the agent. */
export const DEFAULT_SUITE = 'trixie';
export const DEFAULT_BACKENDS: readonly ImageBackend[] = ['unshare'];
export const DEFAULT_TASKS: readonly ImageTask[] = ['autopkgtest', 'sbuild'];

/**
 * Suites whose nodejs is older than the agent needs (bookworm has 18): refused up front rather
 * than after a build. Names only; a suite not listed is checked after the build, from the
 * nodejs version the image holds.
 */
export const SUITES_TOO_OLD: Readonly<Record<string, string>> = {
  bookworm: 'nodejs 18',
  bullseye: 'nodejs 12',
  buster: 'nodejs 10',
  stretch: 'nodejs 4',
  oldstable: 'bookworm, nodejs 18',
  oldoldstable: 'bullseye, nodejs 12',
};

/** A checked recipe; the keys are those of the recipe file. */
export interface Recipe {
  readonly suite: string;
  readonly architecture: string;
  /** The Debian archive to build from; null for mmdebstrap's default (deb.debian.org, with updates and security for a stable release). */
  readonly mirror: string | null;
  /** A deb822 APT source added to the image, as written. */
  readonly source: string | null;
  readonly enable_backends: readonly ImageBackend[];
  readonly enable_tasks: readonly ImageTask[];
  /** OpenSSH public keys that may log in as root to a machine booted from the disk image; absent when none (then it has no ssh server). */
  readonly ssh_authorized_keys?: readonly string[];
}

/** One thing wrong with a recipe: the field, and what to change. */
export interface RecipeProblem {
  readonly field: string;
  readonly message: string;
}

/** A recipe that cannot be built; `problems` names every field at fault. */
export class RecipeError extends Error {
  override readonly name = 'RecipeError';
  constructor(readonly problems: readonly RecipeProblem[]) {
    super(`the recipe is not valid:\n${problems.map((p) => `  ${p.field}: ${p.message}`).join('\n')}`);
  }
}

const SUITE = /^[a-z][a-z0-9.-]*$/;
/** One OpenSSH public key line: its type, the key, and a comment if any; one line. */
const SSH_PUBLIC_KEY =
  /^(ssh-(ed25519|rsa)|ecdsa-sha2-nistp(256|384|521)|sk-(ssh-ed25519|ecdsa-sha2-nistp256)@openssh\.com) [A-Za-z0-9+/]+={0,3}( [^\n]*)?$/;
const ARCHITECTURE = /^[a-z0-9][a-z0-9-]*$/;

const list = <T extends string>(values: readonly [T, ...T[]], what: string) =>
  z
    .array(z.string())
    .superRefine((items, ctx) => {
      for (const item of items) {
        if (!(values as readonly string[]).includes(item))
          ctx.addIssue({ code: 'custom', message: `unknown ${what} "${item}" (known: ${values.join(', ')})` });
      }
      if (new Set(items).size !== items.length) ctx.addIssue({ code: 'custom', message: `a ${what} is listed twice` });
    })
    .transform((items) => items as T[]);

/** The recipe file's shape; every key may be left out for its default. */
const recipeSchema = z
  .object({
    suite: z
      .string()
      .regex(SUITE, 'expected a Debian suite or codename such as trixie, stable or sid')
      .superRefine((s, ctx) => {
        if (s in SUITES_TOO_OLD)
          ctx.addIssue({
            code: 'custom',
            message: `${s} ships ${SUITES_TOO_OLD[s]}; the agent needs nodejs 20.19 or later: use trixie or later`,
          });
      })
      .default(DEFAULT_SUITE),
    architecture: z
      .string()
      .regex(ARCHITECTURE, 'expected a Debian architecture name such as amd64 or arm64')
      .optional(),
    mirror: z
      .url({ protocol: /^(https?|file)$/, error: 'expected an http://, https:// or file:// URL of a Debian archive' })
      .refine((url) => !hasUserInfo(url), `the URL ${USERINFO_ADVICE}`)
      .nullable()
      .optional(),
    source: z
      .string()
      .min(1, 'expected a deb822 APT source (Types:, URIs:, Suites:, Components:)')
      .nullable()
      .optional(),
    enable_backends: list(IMAGE_BACKENDS, 'backend').default([...DEFAULT_BACKENDS]),
    enable_tasks: list(IMAGE_TASKS, 'task').default([...DEFAULT_TASKS]),
    ssh_authorized_keys: z
      .array(
        z
          .string()
          .regex(
            SSH_PUBLIC_KEY,
            'expected an OpenSSH public key line such as "ssh-ed25519 AAAAC3Nza… admin@example.org"',
          ),
      )
      .optional(),
  })
  .strict();

/** The recipe's input, as read from a JSON file and flags before checking. */
export type RecipeInput = Record<string, unknown>;

/**
 * Checks a recipe and fills in the defaults; `hostArchitecture` is the default architecture.
 * Throws a RecipeError naming every problem (the deb822 source's own problems included).
 */
export function parseRecipe(input: unknown, hostArchitecture: string): Recipe {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    throw new RecipeError([
      { field: '(recipe)', message: 'expected a JSON object such as {"suite": "trixie", "enable_tasks": ["sbuild"]}' },
    ]);
  }
  const parsed = recipeSchema.safeParse(input);
  const problems: RecipeProblem[] = parsed.success
    ? []
    : parsed.error.issues.map((issue) => ({
        field:
          issue.code === 'unrecognized_keys'
            ? issue.keys.join(', ')
            : issue.path
                .map(String)
                .join('.')
                .replace(/\.(\d+)$/, '[$1]') || '(recipe)',
        message:
          issue.code === 'unrecognized_keys'
            ? `not a recipe key (keys: ${Object.keys(recipeSchema.shape).join(', ')})`
            : issue.message,
      }));
  const source = (input as RecipeInput).source;
  if (typeof source === 'string' && source.length > 0) {
    try {
      parseAptSource(source);
    } catch (err) {
      if (!(err instanceof AptSourceError)) throw err;
      problems.push(...err.problems.map((message) => ({ field: 'source', message })));
    }
  }
  if (!parsed.success || problems.length) throw new RecipeError(problems);
  const r = parsed.data;
  return Object.freeze({
    suite: r.suite,
    architecture: r.architecture ?? hostArchitecture,
    mirror: r.mirror ?? null,
    source: r.source ? parseAptSource(r.source).text : null,
    enable_backends: Object.freeze([...r.enable_backends]),
    enable_tasks: Object.freeze([...r.enable_tasks]),
    ...(r.ssh_authorized_keys?.length ? { ssh_authorized_keys: Object.freeze([...r.ssh_authorized_keys]) } : {}),
  });
}
