import { builder } from '../builder.js';
import { firstDescription, firstOf } from './pagination.js';
import { describedValues, upperSnake } from './enum-values.js';
import {
  ForbiddenError,
  InputError,
  InvalidStateError,
  NotFoundError,
  UnauthenticatedError,
} from '../../core/errors.js';
import { TOKEN_KINDS, type Token } from '../../storage/entities/token.js';
import { createToken, listTokens, revokeToken, rotateToken } from '../../services/identity/token-lifecycle.js';
import { tokenRefusal } from '../../services/identity/tokens.js';

const TokenKindEnum = builder.enumType('TokenKind', {
  description: 'What a token acts as',
  values: describedValues<(typeof TOKEN_KINDS)[number]>(
    {
      admin: 'A user with admin rights: changes workers, pools, users and site rules',
      user: 'A user: submits work to its workspaces, sees what they may see',
      worker: 'A worker agent: receives its own assignments and reports on them',
      activation: 'One-shot: a new pool machine trades it for its worker token (activateWorker)',
    },
    upperSnake,
  ),
});

/** A bearer token as its owner and admins see it: never its value, which is shown once and not stored. */
export const TokenRef = builder.objectRef<Token>('Token').implement({
  description: 'A bearer token, without its value',
  fields: (t) => ({
    id: t.exposeID('id', { description: 'Its id, for rotateToken and revokeToken' }),
    kind: t.field({ type: TokenKindEnum, description: 'What it acts as', resolve: (tk) => tk.kind }),
    label: t.exposeString('label', { description: 'A note of what it is for (may be empty)' }),
    username: t.string({
      nullable: true,
      description: 'The user it acts for (admin and user tokens)',
      resolve: (tk) => tk.user?.username ?? null,
    }),
    worker: t.string({
      nullable: true,
      description: 'The worker it acts for (worker tokens)',
      resolve: (tk) => tk.worker?.name ?? null,
    }),
    pool: t.string({
      nullable: true,
      description: 'The pool it activates a worker of (activation tokens)',
      resolve: (tk) => tk.pool?.name ?? null,
    }),
    createdAt: t.expose('createdAt', { type: 'DateTime', description: 'When it was issued' }),
    expiresAt: t.expose('expiresAt', {
      type: 'DateTime',
      nullable: true,
      description: 'When it stops being accepted; null: never',
    }),
    revokedAt: t.expose('revokedAt', {
      type: 'DateTime',
      nullable: true,
      description: 'When it was revoked (or replaced by rotateToken); null: not revoked',
    }),
    usedAt: t.expose('usedAt', { type: 'DateTime', nullable: true, description: 'When an activation token was used' }),
    valid: t.boolean({
      description: 'Whether it is accepted now (not revoked, disabled, expired or used up)',
      resolve: (tk) => tokenRefusal(tk, tk.worker?.terminatedAt != null, new Date()) === null,
    }),
  }),
});

const TokenValuePayload = builder.objectRef<{ token: Token; value: string }>('TokenValuePayload').implement({
  description: 'A new token and its value, shown this once',
  fields: (t) => ({
    token: t.field({ type: TokenRef, description: 'The token', resolve: (p) => p.token }),
    value: t.exposeString('value', { description: 'The bearer token itself: shown once, never again' }),
  }),
});

builder.queryFields((t) => ({
  tokens: t.field({
    type: [TokenRef],
    description:
      "A user's, a worker's or a pool's tokens, newest first, without their values. Admins: anyone's and any pool's activation tokens; users: their own (the default); workers: their own",
    args: {
      username: t.arg.string({ description: 'The tokens of this user (default: the caller)' }),
      worker: t.arg.string({ description: 'The tokens of this worker' }),
      pool: t.arg.string({
        description: 'Admins: the activation tokens of this pool (pool-wide ones, and those made for its instances)',
      }),
      first: t.arg.int({ description: firstDescription('Query.tokens', 'tokens') }),
    },
    resolve: (_r, args, ctx) => listTokens(ctx.em, ctx.viewer, { ...args, limit: firstOf('Query.tokens', args.first) }),
  }),
}));

builder.mutationFields((t) => ({
  createToken: t.field({
    type: TokenValuePayload,
    description:
      'A new user token (admins: for any user; users: for themselves), optionally expiring; its value is shown once',
    errors: { types: [InputError, UnauthenticatedError, ForbiddenError, NotFoundError] },
    args: {
      input: t.arg({
        type: builder.inputType('CreateTokenInput', {
          description: 'Whose token, and how long it lives',
          fields: (f) => ({
            username: f.string({ description: 'Default: the caller' }),
            label: f.string({ description: 'A note of what it is for, up to 200 characters' }),
            expiresAt: f.field({ type: 'DateTime', description: 'Refused from this instant on; default: never' }),
          }),
        }),
        required: true,
        description: 'Whose token, its label and expiry',
      }),
    },
    resolve: (_r, { input }, ctx) => createToken(ctx.em, ctx.viewer, input),
  }),
  revokeToken: t.field({
    type: TokenRef,
    description:
      'Revokes a token (admins: any; users: their own; workers: their own): refused from now on, its WebSockets closed',
    errors: { types: [InputError, UnauthenticatedError, NotFoundError] },
    args: {
      input: t.arg({
        type: builder.inputType('RevokeTokenInput', {
          description: 'The token to revoke',
          fields: (f) => ({ id: f.id({ description: 'Default: the token of this request' }) }),
        }),
        required: true,
        description: 'The token to revoke (default: the caller’s own)',
      }),
    },
    resolve: (_r, { input }, ctx) => revokeToken(ctx.em, ctx.viewer, ctx.events, input),
  }),
  rotateToken: t.field({
    type: TokenValuePayload,
    description: 'A new value for a token (same owner, kind and label), shown once; the old value is revoked at once',
    errors: { types: [InputError, UnauthenticatedError, NotFoundError, InvalidStateError] },
    args: {
      input: t.arg({
        type: builder.inputType('RotateTokenInput', {
          description: 'The token to replace, and the expiry of its replacement',
          fields: (f) => ({
            id: f.id({ description: 'Default: the token of this request' }),
            expiresAt: f.field({
              type: 'DateTime',
              description: 'Default: the same lifetime as the old token (none if it had none)',
            }),
          }),
        }),
        required: true,
        description: 'The token to replace (default: the caller’s own) and its new expiry',
      }),
    },
    resolve: (_r, { input }, ctx) => rotateToken(ctx.em, ctx.viewer, ctx.events, input),
  }),
}));
