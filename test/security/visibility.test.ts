/**
 * Who sees what of a private workspace (issue 8, point 1; docs/reference/security.md), through every query,
 * subscription and page of the real app on PostgreSQL: an anonymous caller, an outsider (a user who
 * is a member of nothing), a worker that holds no work there, the worker that holds one of its
 * requests, a member, and an admin.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import {
  AMD64_METADATA,
  addMember,
  createPool,
  createUser,
  createWorkspace,
  expectResult,
  memberOf,
  ok,
  registerWorker,
  reportMetadata,
  sbuild,
  submitOk,
} from '../helpers/fixtures.js';
import { collect, wsClient } from '../helpers/ws.js';

const t = useTestApp();

type Json = Record<string, any>;
const VIEWERS = ['anonymous', 'outsider', 'otherWorker', 'assignedWorker', 'member', 'admin'] as const;
type Who = (typeof VIEWERS)[number];
const token: Record<Who, string | null> = {
  anonymous: null,
  outsider: '',
  otherWorker: '',
  assignedWorker: '',
  member: '',
  admin: '',
};
/** Viewers that may see the private workspace's work and details. */
const INSIDERS: Who[] = ['member', 'admin'];
const SECRET_TAG = 'site:embargo-cve-2026-0001';
/** A worker's own requirement: it names the private workspace it is kept for. */
const WORKER_SECRET_TAG = 'task:workspace:hush:embargo';
const wr: Record<string, string> = {};
const OTHER_METADATA = { ...AMD64_METADATA, tools: ['secret-tool'] };
let url: string;
const disposers: (() => unknown)[] = [];

beforeAll(async () => {
  ({ url } = await t.app.start());
  token.admin = t.adminToken;
  await createWorkspace(t, 'vis/public');
  await createWorkspace(t, 'vis/private', { isPublic: false });
  await createWorkspace(t, 'hush/embargo', { isPublic: false });
  token.member = await memberOf(t, 'vis/private', 'alice');
  await addMember(t, 'vis/public', 'alice');
  await addMember(t, 'hush/embargo', 'alice');
  token.outsider = await createUser(t, 'carol');
  token.otherWorker = await registerWorker(t, 'other-worker');
  token.assignedWorker = await registerWorker(t, 'assigned-worker');
  // It cannot run sbuild, so that no request below is placed on it when created.
  await reportMetadata(t, token.otherWorker!, OTHER_METADATA);
  await createPool(t, { name: 'vis-pool', providedTags: ['site:pool-only'] });
  // It could run any amd64 sbuild but requires its workspace's tag: the nearest miss of every request below.
  await reportMetadata(
    t,
    await registerWorker(t, 'hush-builder', { staticMetadata: { requiredTags: [WORKER_SECRET_TAG] } }),
    AMD64_METADATA,
  );

  wr.public = (await submitOk(t, sbuild('vis/public', 'pub-pkg'), token.member)).id;
  wr.private = (
    await submitOk(t, { ...sbuild('vis/private', 'embargoed-pkg'), requiredTags: [SECRET_TAG] }, token.member)
  ).id;
  wr.assigned = (await submitOk(t, sbuild('vis/private', 'assigned-pkg'), token.member)).id;
  wr.publicOnPrivate = (
    await submitOk(t, sbuild('vis/public', 'dependent', { dependsOn: [wr.private] }), token.member)
  ).id;
  await t.sql(
    `update work_request set status = 'ASSIGNED', assigned_at = now(), worker_id = (select id from worker where name = 'assigned-worker') where id = ?`,
    [Number(wr.assigned)],
  );

  await expectResult(
    t,
    'Group',
    'mutation { createGroup(input: { scope: "vis", name: "EmbargoTeam", workspace: "vis/private" }) { __typename } }',
  );
  await expectResult(t, 'Group', 'mutation { createGroup(input: { scope: "vis", name: "Everyone" }) { __typename } }');
  await expectResult(t, 'Group', 'mutation { createGroup(input: { scope: "hush", name: "Insiders" }) { __typename } }');
  const groups = await ok(t, '{ a: groups(scope: "vis") { id name } b: groups(scope: "hush") { id name } }');
  for (const g of [...groups.a, ...groups.b]) {
    if (g.name !== 'Everyone')
      await ok(t, 'mutation($g: ID!) { addGroupMembers(input: { group: $g, usernames: ["alice"] }) { __typename } }', {
        g: g.id,
      });
  }
  await expectResult(
    t,
    'TaskRule',
    'mutation { createTaskRule(input: { workspace: "vis/private", name: "embargo-rule", requiredTags: ["site:secure-builder"] }) { __typename } }',
  );
  await expectResult(
    t,
    'TaskRule',
    'mutation { createTaskRule(input: { name: "site-lintian", taskName: "lintian", requiredTags: ["site:lint-farm"] }) { __typename } }',
  );
  await expectResult(
    t,
    'TaskRule',
    'mutation { createTaskRule(input: { workspace: "vis/public", name: "public-rule", taskName: "lintian", requiredTags: ["site:public-rule"] }) { __typename } }',
  );
});
afterAll(async () => {
  for (const d of disposers) await d();
});

const as = (who: Who, query: string, variables: Json = {}) => ok(t, query, variables, token[who]);

/** The requests each viewer may see. */
const EXPECTED_REQUESTS: Record<Who, string[]> = {
  anonymous: ['public', 'publicOnPrivate'],
  outsider: ['public', 'publicOnPrivate'],
  otherWorker: [],
  assignedWorker: ['assigned'],
  member: ['public', 'private', 'assigned', 'publicOnPrivate'],
  admin: ['public', 'private', 'assigned', 'publicOnPrivate'],
};

describe('work requests', () => {
  const EXPECTED = EXPECTED_REQUESTS;

  it.each(VIEWERS)('%s: workRequests, workRequest and candidateWorkers agree on the same set', async (who) => {
    const expected = EXPECTED[who].map((l) => wr[l]).sort();
    const list = await as(who, '{ workRequests(first: 100) { edges { node { id } } } }');
    expect(list.workRequests.edges.map((e: Json) => e.node.id).sort()).toEqual(expected);
    for (const [label, id] of Object.entries(wr)) {
      const one = await as(who, 'query($id: ID!) { workRequest(id: $id) { id } }', { id });
      expect(one.workRequest, `${who} → ${label}`).toEqual(EXPECTED[who].includes(label) ? { id } : null);
    }
    const candidates = await as(
      who,
      'query($ids: [ID!]!) { candidateWorkers(workRequestIds: $ids, availableOnly: false) { workRequestId } }',
      { ids: Object.values(wr) },
    );
    expect(candidates.candidateWorkers.map((c: Json) => c.workRequestId).sort()).toEqual(expected);
  });

  it.each(VIEWERS)(
    '%s: a visible request names the requests it depends on only when they are visible too, and counts the others',
    async (who) => {
      const r = await as(who, 'query($id: ID!) { workRequest(id: $id) { dependsOn hiddenDependencyCount } }', {
        id: wr.publicOnPrivate,
      });
      if (!EXPECTED[who].includes('publicOnPrivate')) return expect(r.workRequest).toBeNull();
      expect(r.workRequest).toEqual(
        INSIDERS.includes(who)
          ? { dependsOn: [wr.private], hiddenDependencyCount: 0 }
          : { dependsOn: [], hiddenDependencyCount: 1 },
      );
    },
  );
});

describe('provisioning demand and diagnosis', () => {
  const DEMAND = `{ provisioningDemand { pendingTotal hiddenUnschedulableCount pools { pool { name } pendingRunnable }
    unschedulable { count sampleWorkRequestIds requiredTags providedTags nearest { pool workerNames missingOnWorker missingOnTask } } } }`;

  it.each(VIEWERS)("%s: other people's private work appears only in counts (no ids, no user tags)", async (who) => {
    const d = (await as(who, DEMAND)).provisioningDemand;
    const text = JSON.stringify(d.unschedulable);
    if (INSIDERS.includes(who)) {
      expect(text).toContain(SECRET_TAG);
      expect(d.unschedulable.flatMap((g: Json) => g.sampleWorkRequestIds)).toContain(wr.private);
      expect(d.hiddenUnschedulableCount).toBe(0);
    } else {
      expect(text).not.toContain(SECRET_TAG);
      expect(text).not.toContain(`"${wr.private}"`);
      // Workers see no work but their own assignments: the public request is only counted too.
      expect(d.hiddenUnschedulableCount).toBe(who.endsWith('Worker') ? 2 : 1);
    }
    // Counts stay whole for everybody: demand is the same farm for all.
    expect(d.pendingTotal).toBe(2);
  });

  /** Viewers that may see workers' tags, so the tags a mismatch names (services/identity/visibility.ts: signed-in users). */
  const SEES_WORKER_TAGS: Who[] = ['outsider', 'member', 'admin'];
  type Miss = {
    pool: string | null;
    workerNames: string[];
    missingOnWorker: string[] | null;
    missingOnTask: string[] | null;
    missingOnWorkerCount: number;
    missingOnTaskCount: number;
  };
  const MISS = 'pool workerNames missingOnWorker missingOnTask missingOnWorkerCount missingOnTaskCount';

  /** A worker group's missing tags are there for who may see workers' tags, counts only for the others; a pool's are public. */
  const expectMisses = (who: Who, misses: Miss[]) => {
    const sees = SEES_WORKER_TAGS.includes(who);
    expect(JSON.stringify(misses).includes(WORKER_SECRET_TAG)).toBe(sees);
    for (const m of misses) {
      const shown = sees || m.pool !== null;
      expect(m.missingOnWorker === null, `${who}: ${JSON.stringify(m)}`).toBe(!shown);
      expect(m.missingOnTask === null, `${who}: ${JSON.stringify(m)}`).toBe(!shown);
      if (shown)
        expect([m.missingOnWorker!.length, m.missingOnTask!.length]).toEqual([
          m.missingOnWorkerCount,
          m.missingOnTaskCount,
        ]);
    }
    const builder = misses.find((m) => m.workerNames.includes('hush-builder'))!;
    expect(builder).toMatchObject({
      missingOnWorkerCount: 0,
      missingOnTaskCount: 1,
      missingOnTask: sees ? [WORKER_SECRET_TAG] : null,
    });
  };

  it.each(VIEWERS)(
    "%s: a diagnosis names workers' tags only to those who may see them, and counts them for the others",
    async (who) => {
      const r = await as(
        who,
        `query($id: ID!) { workRequest(id: $id) { diagnosis { state mismatches { ${MISS} } } } }`,
        { id: wr.public },
      );
      if (!EXPECTED_REQUESTS[who].includes('public')) return expect(r.workRequest).toBeNull();
      const misses = r.workRequest.diagnosis.mismatches as Miss[];
      expect(r.workRequest.diagnosis.state).toBe('UNSCHEDULABLE');
      expect(misses.map((m) => m.pool ?? m.workerNames.join()).sort()).toEqual([
        'assigned-worker',
        'hush-builder',
        'other-worker',
        'vis-pool',
      ]);
      expectMisses(who, misses);
    },
  );

  it.each(VIEWERS)(
    "%s: the demand's nearest matches name workers' tags only to those who may see them",
    async (who) => {
      const d = (await as(who, `{ provisioningDemand { unschedulable { sampleWorkRequestIds nearest { ${MISS} } } } }`))
        .provisioningDemand;
      const groups = d.unschedulable as { sampleWorkRequestIds: string[]; nearest: Miss[] }[];
      const shown = groups.flatMap((g) => g.sampleWorkRequestIds).sort();
      expect(shown).toEqual(
        ['public', 'private']
          .filter((l) => EXPECTED_REQUESTS[who].includes(l))
          .map((l) => wr[l])
          .sort(),
      );
      if (!groups.length) return;
      const nearest = groups.flatMap((g) => g.nearest);
      expect(nearest.map((m) => m.workerNames.join())).toContain('hush-builder');
      expectMisses(who, nearest);
    },
  );

  it('a member reads the diagnosis of the private request; the others cannot reach it', async () => {
    const q = `query($id: ID!) { workRequest(id: $id) { diagnosis { state mismatches { missingOnWorker } } } }`;
    const mine = await as('member', q, { id: wr.private });
    expect(mine.workRequest.diagnosis.state).toBe('UNSCHEDULABLE');
    expect(JSON.stringify(mine.workRequest.diagnosis)).toContain(SECRET_TAG);
    for (const who of ['anonymous', 'outsider', 'otherWorker'] as Who[])
      expect((await as(who, q, { id: wr.private })).workRequest).toBeNull();
  });
});

describe('workspaces, groups and rules', () => {
  const WORKSPACES = '{ workspaces { name rules { name } members { user { username } } } }';

  it.each(VIEWERS)('%s: lists only the workspaces it may see, with their rules', async (who) => {
    const list = (await as(who, WORKSPACES)).workspaces as Json[];
    const names = list.map((w) => w.name);
    expect(names).toEqual(INSIDERS.includes(who) ? ['hush/embargo', 'vis/private', 'vis/public'] : ['vis/public']);
    const pub = list.find((w) => w.name === 'vis/public')!;
    expect(pub.rules).toEqual([{ name: 'public-rule' }]);
  });

  it.each(VIEWERS)(
    '%s: groups(scope:) shows a group only with its workspace or scope, and members only to members',
    async (who) => {
      const r = await as(
        who,
        `{ vis: groups(scope: "vis") { name workspace { name rules { name requiredTags } } members { username } }
                              hush: groups(scope: "hush") { name members { username } } }`,
      );
      if (INSIDERS.includes(who)) {
        expect(r.vis.map((g: Json) => g.name)).toEqual(['EmbargoTeam', 'Everyone']);
        const team = r.vis.find((g: Json) => g.name === 'EmbargoTeam');
        expect(team.workspace).toEqual({
          name: 'vis/private',
          rules: [{ name: 'embargo-rule', requiredTags: ['site:secure-builder'] }],
        });
        expect(team.members).toEqual([{ username: 'alice' }]);
        expect(r.hush.map((g: Json) => g.name)).toEqual(['Insiders']);
      } else {
        // "vis" has a public workspace: its scope-wide group is visible, the private workspace's is not.
        expect(r.vis).toEqual([{ name: 'Everyone', workspace: null, members: [] }]);
        // "hush" has only a private workspace: nothing of it shows.
        expect(r.hush).toEqual([]);
      }
    },
  );

  it.each(VIEWERS)('%s: siteRules and public rules are readable by all', async (who) => {
    const r = await as(who, '{ siteRules { name } }');
    expect(r.siteRules).toEqual([{ name: 'site-lintian' }]);
  });

  it('the worker holding a private request sees its workspace name, not its rules or members', async () => {
    const r = await as(
      'assignedWorker',
      'query($id: ID!) { workRequest(id: $id) { workspace { name rules { name } members { user { username } } } } }',
      { id: wr.assigned },
    );
    expect(r.workRequest.workspace).toEqual({ name: 'vis/private', rules: [], members: [] });
  });
});

describe('worker details', () => {
  const DETAILS =
    'name type status pool { name } dynamicMetadata staticMetadata providedTags { tag } requiredTags { tag } rejectedTags { tag }';
  /** Viewers that see a worker's metadata and tags (signed-in users, and the worker itself). */
  const seesDetails = (who: Who, workerName: string) =>
    ['outsider', 'member', 'admin'].includes(who) || (who === 'otherWorker' && workerName === 'other-worker');

  it.each(VIEWERS)(
    '%s: worker(name:) shows name, type, status and pool to all; metadata and tags to signed-in users',
    async (who) => {
      const w = (await as(who, `{ worker(name: "other-worker") { ${DETAILS} } }`)).worker;
      expect(w).toMatchObject({ name: 'other-worker', type: 'WORKER', pool: null });
      expect(typeof w.status).toBe('string');
      if (seesDetails(who, 'other-worker')) {
        expect(w.dynamicMetadata['system:tools']).toEqual(['secret-tool']);
        expect(w.providedTags.map((e: Json) => e.tag)).toContain('worker:cap:secret-tool');
      } else {
        expect(w).toMatchObject({
          dynamicMetadata: null,
          staticMetadata: null,
          providedTags: null,
          requiredTags: null,
          rejectedTags: null,
        });
      }
    },
  );

  it.each(VIEWERS)('%s: a tag filter on workers cannot probe what the viewer may not see', async (who) => {
    const r = await as(
      who,
      '{ workers(filter: { providesTag: "worker:cap:secret-tool" }) { edges { node { name } } } }',
    );
    expect(r.workers.edges.map((e: Json) => e.node.name)).toEqual(
      seesDetails(who, 'other-worker') ? ['other-worker'] : [],
    );
  });
});

describe('subscriptions over WebSocket', () => {
  it.each(VIEWERS)(
    '%s: workRequestChanged sends the changes it may see and nothing of the private workspace',
    async (who) => {
      const { client } = wsClient(url, token[who]);
      disposers.push(() => client.dispose());
      const sub = collect<Json>(client, 'subscription { workRequestChanged { id taskName } }');
      disposers.push(sub.dispose);
      await new Promise((r) => setTimeout(r, 300)); // the subscription is listening
      const priv = await submitOk(t, sbuild('vis/private', `private-change-${who.toLowerCase()}`), token.member);
      const pub = await submitOk(t, sbuild('vis/public', `public-change-${who.toLowerCase()}`), token.member);
      const seesPublic = who !== 'otherWorker' && who !== 'assignedWorker';
      if (seesPublic) {
        // Events are sent in order: once the public change is here, the private one was judged already.
        const deadline = Date.now() + 15_000;
        while (!sub.items.some((e) => e.workRequestChanged.id === pub.id) && Date.now() < deadline)
          await new Promise((r) => setTimeout(r, 50));
        const ids = sub.items.map((e) => e.workRequestChanged.id);
        expect(ids).toContain(pub.id);
        expect(ids.includes(priv.id)).toBe(INSIDERS.includes(who));
      } else {
        await new Promise((r) => setTimeout(r, 500));
        expect(sub.items).toEqual([]);
      }
      expect(sub.errors).toEqual([]);
    },
  );

  it.each(VIEWERS)('%s: workerChanged carries metadata only for viewers who may see it', async (who) => {
    const { client } = wsClient(url, token[who]);
    disposers.push(() => client.dispose());
    const sub = collect<Json>(
      client,
      'subscription { workerChanged(name: "other-worker") { name dynamicMetadata providedTags { tag } } }',
    );
    disposers.push(sub.dispose);
    await new Promise((r) => setTimeout(r, 300));
    await reportMetadata(t, token.otherWorker!, OTHER_METADATA);
    const [event] = await sub.next(1);
    expect(event.workerChanged.name).toBe('other-worker');
    if (seesDetails(who)) expect(event.workerChanged.dynamicMetadata['system:tools']).toContain('secret-tool');
    else expect(event.workerChanged).toMatchObject({ dynamicMetadata: null, providedTags: null });
  });

  function seesDetails(who: Who): boolean {
    return ['outsider', 'member', 'admin', 'otherWorker'].includes(who);
  }
});

describe('status pages', () => {
  const page = async (path: string, who: Who) => {
    const headers: Record<string, string> = token[who] ? { authorization: `Bearer ${token[who]}` } : {};
    const res = await fetch(url.replace(/\/graphql$/, '') + path, { headers });
    return { status: res.status, html: await res.text() };
  };

  it.each(VIEWERS)(
    '%s: the worker page shows tags and metadata-derived facts only to those who may see them',
    async (who) => {
      const { status, html } = await page('/-/status/workers/other-worker/', who);
      expect(status).toBe(200);
      expect(html).toContain('other-worker');
      const shown = ['outsider', 'member', 'admin', 'otherWorker'].includes(who);
      expect(html.includes('worker:cap:secret-tool')).toBe(shown);
    },
  );

  it.each(VIEWERS)(
    "%s: the queue and a request's page name workers' missing tags only to who may see them (counts for the others)",
    async (who) => {
      const sees = ['outsider', 'member', 'admin'].includes(who);
      const queue = await page('/-/status/queue/', who);
      expect(queue.status).toBe(200);
      expect(queue.html.includes(WORKER_SECRET_TAG), 'queue').toBe(sees);
      const one = await page(`/-/status/work-requests/${wr.public}/`, who);
      if (!EXPECTED_REQUESTS[who].includes('public')) return expect(one.status).toBe(404);
      expect(one.status).toBe(200);
      expect(one.html.includes(WORKER_SECRET_TAG), 'work request page').toBe(sees);
      if (!sees) expect(one.html).toContain('1 tag (shown to signed-in users)');
    },
  );

  it.each(VIEWERS)('%s: the workers list shows name, type, pool and status to all', async (who) => {
    const { status, html } = await page('/-/status/workers/', who);
    expect(status).toBe(200);
    expect(html).toContain('other-worker');
    expect(html).not.toContain('secret-tool');
  });

  it('a wrong token on a page is refused with 401, as on /graphql', async () => {
    const res = await fetch(url.replace(/\/graphql$/, '') + '/-/status/workers/', {
      headers: { authorization: 'Bearer tsk_user_not-a-token' },
    });
    expect(res.status).toBe(401);
    await res.text();
  });
});
