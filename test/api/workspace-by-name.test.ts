/**
 * `workspace(name)`: a private workspace is "not there" (null) for anonymous callers and outsiders, as
 * in `workspaces`, and an unknown token is refused (401); a member sees it; hostile names (NUL, huge, malformed)
 * answer null or a client error, never a 500.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import { createUser, createWorkspace, memberOf } from '../helpers/fixtures.js';

const t = useTestApp();
let member = '';
let outsider = '';

beforeAll(async () => {
  await createWorkspace(t, 'byname/open');
  await createWorkspace(t, 'byname/closed', { isPublic: false });
  member = await memberOf(t, 'byname/closed', 'bn-member');
  outsider = await createUser(t, 'bn-outsider');
});

const one = (name: string, token?: string | null) =>
  t.gql(`query($n: String!) { workspace(name: $n) { name } }`, { n: name }, token);

describe('workspace(name)', () => {
  it('shows a public workspace to anyone and a private one to its members only', async () => {
    expect((await one('byname/open', null)).data).toEqual({ workspace: { name: 'byname/open' } });
    expect((await one('byname/closed', member)).data).toEqual({ workspace: { name: 'byname/closed' } });
    expect((await one('byname/closed', null)).data).toEqual({ workspace: null });
    expect((await one('byname/closed', outsider)).data).toEqual({ workspace: null });
  });

  it('refuses an unknown token (401) and answers hostile names without a 500', async () => {
    expect((await one('byname/closed', 'tsk_user_unknown-00000000000000000000000000')).status).toBe(401);
    for (const name of ['byname/\u0000closed', 'x'.repeat(100_000), '////', '', 'a/b/c']) {
      const r = await one(name, member);
      expect(r.status, name.slice(0, 20)).toBeLessThan(500);
      if (!r.errors) expect(r.data).toEqual({ workspace: null });
    }
  });
});
