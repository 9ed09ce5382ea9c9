/**
 * Users and their tokens: `user create`, `token list|create|rotate|revoke`. New token values are
 * printed once, alone on stdout; lists never hold a value (the server does not keep them).
 */
import type { Command } from 'commander';
import { expiryOf, integer } from './arguments.js';
import { ERROR_SELECTION } from './client.js';
import { usageError } from './exit-codes.js';
import { instant, printSecretOnce, renderTable, statusStyle, type Output } from './output.js';
import { readPages, type Connection } from './paging.js';
import type { Ctx, Register } from './command-context.js';

/** The fields of a token shown in lists. */
export const TOKEN_FIELDS = 'id kind label username worker pool createdAt expiresAt revokedAt usedAt valid';

/** A token as TOKEN_FIELDS selects it. */
export interface TokenRow {
  id: string;
  kind: string;
  label: string;
  username: string | null;
  worker: string | null;
  pool: string | null;
  createdAt: string;
  expiresAt: string | null;
  revokedAt: string | null;
  usedAt: string | null;
  valid: boolean;
}

/** Prints tokens as a table. */
export function tokenTable(out: Output, tokens: readonly TokenRow[]): string {
  return renderTable(out, tokens, [
    { header: 'ID', value: (t) => t.id, align: 'right' },
    { header: 'KIND', value: (t) => t.kind },
    { header: 'LABEL', value: (t) => t.label, shrink: true },
    { header: 'OWNER', value: (t) => t.username ?? t.worker ?? t.pool, shrink: true },
    { header: 'CREATED', value: (t) => instant(t.createdAt) },
    { header: 'EXPIRES', value: (t) => instant(t.expiresAt) },
    { header: 'REVOKED', value: (t) => instant(t.revokedAt) },
    {
      header: 'VALID',
      value: (t) => (t.valid ? 'yes' : 'no'),
      style: (s, t) => statusStyle(out, t.valid ? 'SUCCESS' : 'FAILURE', s),
    },
  ]);
}

const CREATE_USER = `mutation CreateUser($input: CreateUserInput!, $key: String) {
  createUser(input: $input, idempotencyKey: $key) { ${ERROR_SELECTION} ... on UserTokenPayload { token user { username isAdmin } } }
}`;
const USERS = `query Users($first: Int, $after: String) { users(first: $first, after: $after) { edges { cursor node { username isAdmin } } pageInfo { hasNextPage endCursor } } }`;
const TOKENS = `query Tokens($username: String, $worker: String, $pool: String) { tokens(username: $username, worker: $worker, pool: $pool) { ${TOKEN_FIELDS} } }`;
const CREATE_TOKEN = `mutation CreateToken($input: CreateTokenInput!) {
  createToken(input: $input) { ${ERROR_SELECTION} ... on TokenValuePayload { value token { ${TOKEN_FIELDS} } } }
}`;
/** Rotates a token by id: the new value once, the old one revoked. */
export const ROTATE_TOKEN = `mutation RotateToken($input: RotateTokenInput!) {
  rotateToken(input: $input) { ${ERROR_SELECTION} ... on TokenValuePayload { value token { ${TOKEN_FIELDS} } } }
}`;
const REVOKE_TOKEN = `mutation RevokeToken($input: RevokeTokenInput!) { revokeToken(input: $input) { ${ERROR_SELECTION} ... on Token { ${TOKEN_FIELDS} } } }`;

async function createUser(ctx: Ctx, username: string, opts: { admin?: boolean; idempotencyKey?: string }) {
  const data = await ctx
    .api()
    .mutate(
      CREATE_USER,
      { input: { username, isAdmin: opts.admin === true }, key: opts.idempotencyKey ?? null },
      'createUser',
    );
  if (ctx.out.json) return ctx.out.writeJson(data);
  const { user, token } = data.createUser;
  printSecretOnce(
    ctx.out,
    ctx.io.stderr,
    `Created ${user.isAdmin ? 'admin ' : ''}user ${user.username}. Its token`,
    token,
  );
}

async function listUsers(ctx: Ctx, opts: { limit: string }) {
  const api = ctx.api();
  const users = await readPages<{ username: string; isAdmin: boolean }>(
    async (first, after) =>
      (await api.query<{ users: Connection<{ username: string; isAdmin: boolean }> }>(USERS, { first, after })).users,
    {
      limit: integer('--limit', opts.limit, 1),
    },
  );
  if (ctx.out.json) return ctx.out.writeJson({ users });
  ctx.out.write(
    renderTable(
      ctx.out,
      users.edges.map((e) => e.node),
      [
        { header: 'USER', value: (u) => u.username },
        { header: 'ADMIN', value: (u) => (u.isAdmin ? 'yes' : 'no') },
      ],
    ),
  );
  if (users.pageInfo.hasNextPage) ctx.io.stderr.write('(more users: raise --limit)\n');
}

async function listTokens(ctx: Ctx, opts: { user?: string; worker?: string; pool?: string }) {
  if ([opts.user, opts.worker, opts.pool].filter(Boolean).length > 1)
    throw usageError('give one of --user, --worker and --pool');
  const data = await ctx.api().query<{ tokens: TokenRow[] }>(TOKENS, {
    username: opts.user ?? null,
    worker: opts.worker ?? null,
    pool: opts.pool ?? null,
  });
  if (ctx.out.json) return ctx.out.writeJson(data);
  ctx.out.write(tokenTable(ctx.out, data.tokens));
}

async function createToken(ctx: Ctx, opts: { user?: string; label?: string; expires?: string; expiresIn?: string }) {
  const input = { username: opts.user ?? null, label: opts.label ?? null, expiresAt: expiryOf(opts) ?? null };
  const data = await ctx.api().mutate(CREATE_TOKEN, { input }, 'createToken');
  if (ctx.out.json) return ctx.out.writeJson(data);
  const { value, token } = data.createToken;
  const expiry = token.expiresAt ? `, expiring ${instant(token.expiresAt)}` : '';
  printSecretOnce(ctx.out, ctx.io.stderr, `Created token ${token.id} for ${token.username}${expiry}. Its value`, value);
}

async function rotateToken(ctx: Ctx, id: string, opts: { expires?: string; expiresIn?: string }) {
  const data = await ctx
    .api()
    .mutate(ROTATE_TOKEN, { input: { id, expiresAt: expiryOf(opts) ?? null } }, 'rotateToken');
  if (ctx.out.json) return ctx.out.writeJson(data);
  const { value, token } = data.rotateToken;
  printSecretOnce(
    ctx.out,
    ctx.io.stderr,
    `Rotated: token ${id} is revoked, its replacement is token ${token.id}. The new value`,
    value,
  );
}

async function revokeToken(ctx: Ctx, id: string) {
  const data = await ctx.api().mutate(REVOKE_TOKEN, { input: { id } }, 'revokeToken');
  if (ctx.out.json) return ctx.out.writeJson(data);
  ctx.out.line(
    `Revoked token ${data.revokeToken.id} (${data.revokeToken.kind.toLowerCase()} of ${data.revokeToken.username ?? data.revokeToken.worker ?? data.revokeToken.pool}).`,
  );
}

export const registerTokenCommands: Register = (program: Command, action) => {
  const user = program.command('user').description('Users (admins only)');
  action(
    user
      .command('create <username>')
      .description('Creates a user and prints its first token, once')
      .option('--admin', 'an admin user')
      .option('--idempotency-key <key>', 'a retry with the same key answers the first create')
      .addHelpText(
        'after',
        '\nExamples:\n  tagsched-admin user create alice > alice.token\n  tagsched-admin user create root2 --admin',
      ),
    (ctx, [username], opts) => createUser(ctx, username, opts),
  );
  action(
    user
      .command('list')
      .description('Lists the users by name, and which are admins')
      .option('--limit <n>', 'show at most this many', '500')
      .addHelpText('after', '\nExamples:\n  tagsched-admin user list\n  tagsched-admin user list --json'),
    (ctx, _a, opts) => listUsers(ctx, opts as { limit: string }),
  );

  const token = program
    .command('token')
    .description("Tokens: list, create, rotate, revoke (admins: anyone's; users: their own)");
  action(
    token
      .command('list')
      .description(
        "Lists a user's, a worker's or a pool's tokens, newest first, without their values (default: your own)",
      )
      .option('--user <username>', "a user's tokens")
      .option('--worker <name>', "a worker's tokens")
      .option('--pool <name>', "a pool's activation tokens (admins)")
      .addHelpText(
        'after',
        '\nExamples:\n  tagsched-admin token list --user alice\n  tagsched-admin token list --worker build-1 --json\n  tagsched-admin token list --pool cloud',
      ),
    (ctx, _a, opts) => listTokens(ctx, opts),
  );
  action(
    token
      .command('create')
      .description('Creates a user token and prints its value, once')
      .option('--user <username>', 'for this user (default: yourself)')
      .option('--label <label>', 'what it is for')
      .option('--expires <instant>', 'refused from then on: 2027-01-01 or 2027-01-01T12:00:00Z')
      .option('--expires-in <lifetime>', 'refused after this long: 90d, 12h, 30m, 2w')
      .addHelpText(
        'after',
        '\nExamples:\n  tagsched-admin token create --user alice --label ci --expires-in 90d > ci.token',
      ),
    (ctx, _a, opts) => createToken(ctx, opts),
  );
  action(
    token
      .command('rotate <id>')
      .description(
        'Replaces a token with a new value (same owner, kind and label), printed once; the old value is revoked at once',
      )
      .option('--expires <instant>', 'the new value expires then (default: the same lifetime as the old one)')
      .option('--expires-in <lifetime>', 'the new value expires after this long: 90d, 12h')
      .addHelpText('after', '\nExamples:\n  tagsched-admin token rotate 42 > new.token'),
    (ctx, [id], opts) => rotateToken(ctx, id, opts),
  );
  action(
    token
      .command('revoke <id>')
      .description('Revokes a token: refused from now on, its open WebSockets closed')
      .addHelpText('after', '\nExamples:\n  tagsched-admin token revoke 42'),
    (ctx, [id]) => revokeToken(ctx, id),
  );
};
