/**
 * Pool-wide activation tokens have a lifecycle: an id, an expiry (a day unless told), a place in
 * tokens(pool:), revocation, and no use while their pool is disabled.
 */
import { describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import { createPool, createUser, ERROR_FIELDS, snapshot } from '../helpers/fixtures.js';

const t = useTestApp({ workers: { activationTokenTtlMs: 3_600_000 } });

const CREATE = `mutation($i: CreateActivationTokenInput!) {
  createActivationToken(input: $i) { __typename ... on ActivationTokenPayload { token id expiresAt } ${ERROR_FIELDS} }
}`;
const ACTIVATE = `mutation($n: String) { activateWorker(input: { name: $n }) { __typename ... on WorkerTokenPayload { worker { name pool { name } } } ${ERROR_FIELDS} } }`;
const UPDATE = `mutation($i: WorkerPoolInput!) { updateWorkerPool(input: $i) { __typename ${ERROR_FIELDS} } }`;
const TOKENS = `query($p: String) { tokens(pool: $p) { id kind pool expiresAt revokedAt usedAt valid } }`;

async function newToken(input: Record<string, unknown> = {}) {
  const r = await t.gql(CREATE, { i: { pool: 'hand', ...input } });
  expect(r.data!.createActivationToken.__typename, JSON.stringify(r)).toBe('ActivationTokenPayload');
  return r.data!.createActivationToken as { token: string; id: string; expiresAt: string };
}

describe('pool-wide activation tokens', () => {
  it('have an id and expire after the configured lifetime unless told; the pool lists them for admins only', async () => {
    await createPool(t, { name: 'hand' });
    const before = Date.now();
    const made = await newToken();
    const lifetime = Date.parse(made.expiresAt) - before;
    expect(lifetime).toBeGreaterThan(3_590_000);
    expect(lifetime).toBeLessThanOrEqual(3_600_000 + 1_000);
    const later = new Date(Date.now() + 120_000).toISOString();
    const told = await newToken({ expiresAt: later });
    expect(Date.parse(told.expiresAt)).toBe(Date.parse(later));

    const listed = (await t.gql(TOKENS, { p: 'hand' })).data!.tokens;
    expect(listed.map((tk: { id: string }) => tk.id)).toEqual([told.id, made.id]);
    expect(listed[0]).toMatchObject({ kind: 'ACTIVATION', pool: 'hand', valid: true, revokedAt: null, usedAt: null });

    const user = await createUser(t, 'not-admin');
    expect((await t.gql(TOKENS, { p: 'hand' }, user)).data).toBeNull();
    expect((await t.gql(TOKENS, { p: 'hand' }, user)).errors![0].extensions!.code).toBe('NOT_FOUND');
    expect((await t.gql(TOKENS, { p: 'hand' }, null)).errors![0].extensions!.code).toBe('UNAUTHENTICATED');
  });

  it('an expiry in the past is refused, writing nothing', async () => {
    const before = await snapshot(t);
    const r = await t.gql(CREATE, { i: { pool: 'hand', expiresAt: new Date(Date.now() - 1000).toISOString() } });
    expect(r.data!.createActivationToken).toMatchObject({ __typename: 'InputError', path: 'input.expiresAt' });
    expect(await snapshot(t)).toEqual(before);
  });

  it('an expired token is refused', async () => {
    const made = await newToken();
    await t.sql(`update token set expires_at = now() - interval '1 second' where id = ?`, [Number(made.id)]);
    const r = await t.gql(ACTIVATE, { n: 'hand-expired' }, made.token);
    expect(r.status).toBe(401);
    expect(JSON.stringify(r.errors)).toMatch(/expired/);
  });

  it('a revoked token is refused', async () => {
    const made = await newToken();
    const revoked = await t.gql(
      `mutation($id: ID!) { revokeToken(input: { id: $id }) { __typename ... on Token { id revokedAt } } }`,
      { id: made.id },
    );
    expect(revoked.data!.revokeToken.revokedAt).not.toBeNull();
    const r = await t.gql(ACTIVATE, { n: 'hand-revoked' }, made.token);
    expect(r.status).toBe(401);
    expect(JSON.stringify(r.errors)).toMatch(/revoked/);
  });

  it("a disabled pool's token is refused, and none is made for it; enabled again, the token works", async () => {
    const made = await newToken();
    expect((await t.gql(UPDATE, { i: { name: 'hand', enabled: false } })).data!.updateWorkerPool.__typename).toBe(
      'WorkerPool',
    );
    const refused = await t.gql(ACTIVATE, { n: 'hand-disabled' }, made.token);
    expect(refused.data!.activateWorker).toMatchObject({ __typename: 'ForbiddenError', code: 'FORBIDDEN' });
    expect(refused.data!.activateWorker.message).toMatch(/disabled/);
    expect(await t.sql(`select 1 from worker where name = 'hand-disabled'`)).toEqual([]);
    const none = await t.gql(CREATE, { i: { pool: 'hand' } });
    expect(none.data!.createActivationToken).toMatchObject({ __typename: 'InvalidStateError', code: 'INVALID_STATE' });

    await t.gql(UPDATE, { i: { name: 'hand', enabled: true } });
    const activated = await t.gql(ACTIVATE, { n: 'hand-enabled' }, made.token);
    expect(activated.data!.activateWorker).toMatchObject({
      __typename: 'WorkerTokenPayload',
      worker: { name: 'hand-enabled', pool: { name: 'hand' } },
    });
  });
});
