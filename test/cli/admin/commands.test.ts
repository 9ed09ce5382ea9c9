/**
 * Every tagsched-admin command end to end, in-process (runAdmin with captured output) against the
 * real app listening on a port of its own, over real HTTP: what each prints for people, its --json
 * (parsed), what it changed on the server (read back through GraphQL), and its failures with their
 * exit codes. The child-process runs are in process.test.ts.
 */
import fs from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import { EXIT } from '../../../src/cli/admin/exit-codes.js';
import { ADMIN_TOKEN, useTestApp } from '../../helpers/app.js';
import { AMD64_METADATA, ok, reportMetadata } from '../../helpers/fixtures.js';
import { imageManifest } from '../../helpers/image-manifest.js';
import { closedPort, runCli, scratchDir, type RunOptions } from './harness.js';

// Automatic scheduling on, but no pass runs during the tests (the debounce and the interval are an
// hour): what is assigned was placed by createWorkRequest.
const t = useTestApp({ scheduler: { automatic: true, passDebounceMs: 3_600_000, passIntervalMs: 3_600_000 } });
// Tests here run a dozen commands each, every one a few HTTP requests: room for a loaded machine.
vi.setConfig({ testTimeout: 120_000 });
let url: string;
const cli = (argv: string[], options: RunOptions = {}) => runCli(url, argv, { token: ADMIN_TOKEN, ...options });
/** Runs a command that must succeed, and returns its parsed --json output. */
async function json(argv: string[], options: RunOptions = {}): Promise<any> {
  const r = await cli([...argv, '--json'], options);
  expect(r.stderr + (r.code ? `\nexit ${r.code}` : ''), argv.join(' ')).toBe('');
  return JSON.parse(r.stdout);
}

beforeAll(async () => {
  ({ url } = await t.app.start());
});

describe('users and tokens', () => {
  let aliceToken: string;

  it('user create prints the new token alone on stdout, once, and says so on stderr', async () => {
    const r = await cli(['user', 'create', 'alice']);
    expect(r.code).toBe(0);
    aliceToken = r.stdout.trim();
    expect(aliceToken).toMatch(/^tsk_user_\S+$/);
    expect(r.stdout).toBe(`${aliceToken}\n`);
    expect(r.stderr).toMatch(/Created user alice.*shown only this once/);
    const me = await json(['whoami'], { token: aliceToken });
    expect(me).toEqual({ me: { username: 'alice', isAdmin: false } });
  });

  it('user create: an admin with --admin; a taken name is a conflict (6), a bad one invalid input (4), a non-admin forbidden (5)', async () => {
    const root2 = await json(['user', 'create', 'root2', '--admin']);
    expect(root2.createUser.user).toEqual({ username: 'root2', isAdmin: true });
    const taken = await cli(['user', 'create', 'alice']);
    expect(taken.code).toBe(EXIT.conflict);
    expect(taken.stderr).toMatch(/alice.*\[ALREADY_EXISTS\]/);
    expect(taken.stdout).toBe('');
    // With --json, the typed error is the GraphQL data as the server answered it, and the exit code says the same.
    const takenJson = await cli(['user', 'create', 'alice', '--json']);
    expect(takenJson.code).toBe(EXIT.conflict);
    expect(JSON.parse(takenJson.stdout)).toEqual({
      createUser: {
        __typename: 'AlreadyExistsError',
        code: 'ALREADY_EXISTS',
        message: expect.stringContaining('alice'),
      },
    });
    const bad = await cli(['user', 'create', 'no spaces']);
    expect(bad.code).toBe(EXIT.invalidInput);
    expect(bad.stderr).toMatch(/\[INVALID_INPUT\]/);
    const forbidden = await cli(['user', 'create', 'mallory'], { token: aliceToken });
    expect(forbidden.code).toBe(EXIT.forbidden);
    expect(forbidden.stderr).toMatch(/\[FORBIDDEN\]/);
  });

  it('token create, list, rotate and revoke', async () => {
    const created = await json(['token', 'create', '--user', 'alice', '--label', 'ci', '--expires-in', '30d']);
    const { value, token } = created.createToken;
    expect(token.label).toBe('ci');
    const days = (Date.parse(token.expiresAt) - Date.now()) / 86_400_000;
    expect(days).toBeGreaterThan(29.9);
    expect(days).toBeLessThan(30.1);
    expect((await json(['whoami'], { token: value })).me.username).toBe('alice');

    const table = await cli(['token', 'list', '--user', 'alice']);
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(/^ID\s+KIND\s+LABEL\s+OWNER\s+CREATED\s+EXPIRES\s+REVOKED\s+VALID$/m);
    expect(table.stdout).toMatch(new RegExp(`^\\s*${token.id}\\s+USER\\s+ci\\s+alice\\s`, 'm'));
    expect(table.stdout).not.toContain(value);
    const listed = await json(['token', 'list', '--user', 'alice']);
    expect(listed.tokens.map((x: { id: string }) => x.id)).toContain(token.id);

    const rotated = await cli(['token', 'rotate', token.id]);
    expect(rotated.code).toBe(0);
    const newValue = rotated.stdout.trim();
    expect(newValue).not.toBe(value);
    expect(rotated.stderr).toMatch(new RegExp(`token ${token.id} is revoked`));
    expect((await cli(['whoami'], { token: value })).code).toBe(EXIT.auth);
    expect((await json(['whoami'], { token: newValue })).me.username).toBe('alice');

    const newId = (await json(['token', 'list', '--user', 'alice'])).tokens.find(
      (x: { valid: boolean; label: string }) => x.valid && x.label === 'ci',
    ).id;
    const revoked = await cli(['token', 'revoke', newId]);
    expect(revoked.code).toBe(0);
    expect(revoked.stdout).toBe(`Revoked token ${newId} (user of alice).\n`);
    expect((await cli(['whoami'], { token: newValue })).code).toBe(EXIT.auth);
    const again = await cli(['token', 'rotate', newId]);
    expect(again.code).toBe(EXIT.conflict);
    expect(again.stderr).toMatch(/already revoked \[INVALID_STATE\]/);
  });

  it('token create --expires takes a date; a user lists only their own tokens', async () => {
    const created = await json(['token', 'create', '--expires', '2099-01-01'], { token: aliceToken });
    expect(created.createToken.token).toMatchObject({ username: 'alice', expiresAt: '2099-01-01T00:00:00.000Z' });
    // Another user's tokens look like no user at all.
    const others = await cli(['token', 'list', '--user', 'root2'], { token: aliceToken });
    expect(others.code).toBe(EXIT.notFound);
  });

  it('refuses bad token arguments before asking the server (64), and unknown ids (3)', async () => {
    expect((await cli(['token', 'create', '--expires', 'tomorrow'])).code).toBe(EXIT.usage);
    expect((await cli(['token', 'create', '--expires-in', '5 days'])).code).toBe(EXIT.usage);
    expect((await cli(['token', 'create', '--expires', '2099-01-01', '--expires-in', '1d'])).code).toBe(EXIT.usage);
    expect((await cli(['token', 'list', '--user', 'a', '--worker', 'b'])).code).toBe(EXIT.usage);
    const unknown = await cli(['token', 'rotate', '999999']);
    expect(unknown.code).toBe(EXIT.notFound);
    expect(unknown.stderr).toMatch(/\[NOT_FOUND\]/);
  });
});

describe('workspaces, members, grants, rules, groups, environments', () => {
  let bobToken: string;
  beforeAll(async () => {
    bobToken = (await cli(['user', 'create', 'bob'])).stdout.trim();
  });

  it('workspace create, list, show and update', async () => {
    expect((await cli(['workspace', 'create', 'debian/main'])).stdout).toBe(
      'Created workspace debian/main (public).\n',
    );
    const secret = await json(['workspace', 'create', 'debian/security', '--private', '--grant', 'task:security:']);
    expect(secret.createWorkspace).toMatchObject({
      name: 'debian/security',
      isPublic: false,
      providableTagPrefixes: ['task:security:'],
    });
    const listed = await cli(['workspace', 'list']);
    expect(listed.stdout).toMatch(/^debian\/main\s+public/m);
    expect(listed.stdout).toMatch(/^debian\/security\s+private\s+-\s+task:security:$/m);
    // bob is no member: the private workspace is not his to see.
    expect(
      (await json(['workspace', 'list'], { token: bobToken })).workspaces.map((w: { name: string }) => w.name),
    ).toEqual(['debian/main']);
    expect((await cli(['workspace', 'show', 'debian/security'], { token: bobToken })).code).toBe(EXIT.notFound);
    const updated = await cli(['workspace', 'update', 'debian/security', '--public']);
    expect(updated.stdout).toBe('Workspace debian/security is now public.\n');
    expect((await json(['workspace', 'update', 'debian/security', '--private'])).updateWorkspace.isPublic).toBe(false);
    expect((await cli(['workspace', 'update', 'debian/security'])).code).toBe(EXIT.usage);
    expect((await cli(['workspace', 'create', 'no-scope'])).code).toBe(EXIT.usage);
    expect((await cli(['workspace', 'create', 'debian/main'])).code).toBe(EXIT.conflict);
  });

  it('workspace member add and list; a bad role is a usage error', async () => {
    expect((await cli(['workspace', 'member', 'add', 'debian/security', 'bob', '--role', 'owner'])).stdout).toBe(
      'bob is owner of debian/security.\n',
    );
    const members = await cli(['workspace', 'member', 'list', 'debian/security'], { token: bobToken });
    expect(members.stdout).toMatch(/^bob\s+owner$/m);
    expect((await cli(['workspace', 'member', 'add', 'debian/security', 'bob', '--role', 'king'])).code).toBe(
      EXIT.usage,
    );
    expect((await cli(['workspace', 'member', 'add', 'debian/security', 'nobody'])).code).toBe(EXIT.notFound);
    const shown = await cli(['workspace', 'show', 'debian/security'], { token: bobToken });
    expect(shown.stdout).toMatch(/^Your role:\s+owner$/m);
    expect(shown.stdout).toMatch(/^Members\nUSER\s+ROLE\s+ADMIN\nbob\s+owner\s+no$/m);
  });

  it('workspace grant add, remove and list change the prefixes members may provide', async () => {
    await cli(['workspace', 'grant', 'add', 'debian/main', 'task:team:', 'task:prio:']);
    expect((await cli(['workspace', 'grant', 'list', 'debian/main'])).stdout).toBe('task:team:\ntask:prio:\n');
    const removed = await json(['workspace', 'grant', 'remove', 'debian/main', 'task:team:']);
    expect(removed.updateWorkspace.providableTagPrefixes).toEqual(['task:prio:']);
    const grants = await json(['workspace', 'grant', 'list', 'debian/main']);
    expect(grants).toEqual({ workspace: { name: 'debian/main', providableTagPrefixes: ['task:prio:'] } });
    expect((await cli(['workspace', 'grant', 'add', 'debian/nope', 'x:'])).code).toBe(EXIT.notFound);
  });

  it('rule add and list, for a workspace and for the site', async () => {
    const added = await cli([
      'rule',
      'add',
      'big',
      '--workspace',
      'debian/main',
      '--when',
      'task:source-package:linux or task:source-package:libreoffice',
      '--require',
      'worker:class:large',
    ]);
    expect(added.stdout).toBe('Created rule big of debian/main.\n');
    await cli(['rule', 'add', 'lintian-unshare', '--task', 'lintian', '--require', 'worker:executor:unshare']);
    const site = await json(['rule', 'list']);
    expect(site.siteRules).toEqual([
      {
        name: 'lintian-unshare',
        taskName: 'lintian',
        expression: null,
        providedTags: [],
        requiredTags: ['worker:executor:unshare'],
        workspace: null,
      },
    ]);
    const ws = await cli(['rule', 'list', '--workspace', 'debian/main']);
    expect(ws.stdout).toMatch(
      /^big\s+any\s+task:source-package:linux or task:source-package:libreoffice\s+-\s+worker:class:large$/m,
    );
    const bad = await cli(['rule', 'add', 'broken', '--when', 'task:a and (', '--require', 'x:y']);
    expect(bad.code).toBe(EXIT.invalidInput);
    expect(bad.stderr).toMatch(/\[INVALID_RULE\]/);
    expect((await cli(['rule', 'add', 'empty'])).code).toBe(EXIT.usage);
    expect((await cli(['rule', 'add', 'site-by-user', '--require', 'x:y'], { token: bobToken })).code).toBe(
      EXIT.forbidden,
    );
  });

  it('group create, list and add-member', async () => {
    const created = await cli(['group', 'create', 'debian', 'Debian']);
    expect(created.stdout).toMatch(
      /^Created group Debian \(id \d+\) in scope debian: its members' work provides task:group:debian::Debian\.$/m,
    );
    const added = await cli(['group', 'add-member', 'debian', 'Debian', 'alice', 'bob']);
    expect(added.stdout).toBe('Members of Debian: alice, bob.\n');
    const groups = await json(['group', 'list', 'debian']);
    expect(groups.groups).toEqual([
      expect.objectContaining({
        name: 'Debian',
        workspace: null,
        members: [{ username: 'alice' }, { username: 'bob' }],
      }),
    ]);
    expect((await cli(['group', 'add-member', 'debian', 'Nope', 'alice'])).code).toBe(EXIT.notFound);
  });

  it('environment create and list', async () => {
    const created = await cli([
      'environment',
      'create',
      'trixie',
      'arm64',
      '--variant',
      'sbuild',
      '--backend',
      'unshare',
    ]);
    expect(created.stdout).toMatch(/^Created environment \d+: trixie\/arm64 \(sbuild\)\.$/m);
    const listed = await json(['environment', 'list']);
    expect(listed.environments).toEqual([
      expect.objectContaining({ codename: 'trixie', architecture: 'arm64', variant: 'sbuild', backend: 'unshare' }),
    ]);
    expect((await cli(['environment', 'create', 'trixie', 'arm64'], { token: bobToken })).code).toBe(EXIT.forbidden);
  });
});

describe('workers', () => {
  let buildToken: string;
  beforeAll(async () => {
    const r = await cli(['worker', 'register', 'build-1', '--concurrency', '2', '--provide', 'worker:class:large']);
    expect(r.code).toBe(0);
    buildToken = r.stdout.trim();
    await reportMetadata(t, buildToken, AMD64_METADATA);
    await cli(['worker', 'register', 'arm-1', '--provide', 'worker:class:small']);
  });

  it('worker register prints the worker token once; a bad tag is refused with every problem', async () => {
    expect(buildToken).toMatch(/^tsk_worker_\S+$/);
    const bad = await cli([
      'worker',
      'register',
      'bad-1',
      '--provide',
      'task:scope:x',
      '--provide',
      'no spaces',
      '--require',
      'ok:tag',
    ]);
    expect(bad.code).toBe(EXIT.invalidInput);
    expect(bad.stderr).toMatch(/^tagsched-admin: the input was refused, 2 problems: \[TAG_NOT_ALLOWED\]$/m);
    expect(bad.stderr).toMatch(/^ {2}input\.staticMetadata\.providedTags\[0\]: .*task:scope:x.* \(TAG_NOT_ALLOWED\)$/m);
    expect(bad.stderr).toMatch(/^ {2}input\.staticMetadata\.providedTags\[1\]: .*no spaces.* \(INVALID_TAG\)$/m);
    expect((await cli(['worker', 'list'])).stdout).not.toMatch(/bad-1/);
    expect((await cli(['worker', 'register', 'build-1'])).code).toBe(EXIT.conflict);
    expect((await cli(['worker', 'register', 'x', '--concurrency', 'two'])).code).toBe(EXIT.usage);
  });

  it('worker list: a table, filters, and --json as one connection', async () => {
    const table = await cli(['worker', 'list']);
    expect(table.stdout).toMatch(/^NAME\s+TYPE\s+POOL\s+STATUS\s+WORK\s+LAST SEEN$/m);
    expect(table.stdout).toMatch(/^arm-1\s+worker\s+-\s+DISCONNECTED\s+0\/1\s+-$/m);
    expect(table.stdout).toMatch(/^build-1\s+worker\s+-\s+IDLE\s+0\/2\s+\d+s ago$/m);
    const idle = await json(['worker', 'list', '--status', 'idle']);
    expect(idle.workers.edges.map((e: any) => e.node.name)).toEqual(['build-1']);
    const byTag = await json(['worker', 'list', '--provides', 'worker:class:small']);
    expect(byTag.workers.edges.map((e: any) => e.node.name)).toEqual(['arm-1']);
    const limited = await json(['worker', 'list', '--limit', '1']);
    expect(limited.workers.edges).toHaveLength(1);
    expect(limited.workers.pageInfo.hasNextPage).toBe(true);
    expect((await cli(['worker', 'list', '--status', 'sleepy'])).code).toBe(EXIT.usage);
  });

  it('worker show: tags with provenance; hidden from anonymous callers; unknown is 3', async () => {
    const shown = await cli(['worker', 'show', 'build-1']);
    expect(shown.code).toBe(0);
    expect(shown.stdout).toMatch(/^Status:\s+IDLE$/m);
    expect(shown.stdout).toMatch(/^worker:class:large\s+admin\s+static-metadata$/m);
    expect(shown.stdout).toMatch(/^worker:build-arch:amd64\s+worker\s+\S+/m);
    const data = await json(['worker', 'show', 'build-1']);
    expect(data.worker.providedTags).toContainEqual({
      tag: 'worker:cap:sbuild',
      provenance: 'WORKER',
      source: expect.any(String),
    });
    const anonymous = await cli(['worker', 'show', 'build-1'], { token: null });
    expect(anonymous.stdout).toMatch(/hidden: your token may not see worker tags/);
    const unknown = await cli(['worker', 'show', 'nope']);
    expect(unknown.code).toBe(EXIT.notFound);
    expect(unknown.stderr).toBe('tagsched-admin: no worker named "nope" [NOT_FOUND]\n');
  });

  it('worker disable, enable, drain and undrain change its status', async () => {
    const status = async () => (await json(['worker', 'show', 'build-1'])).worker.status;
    expect((await cli(['worker', 'disable', 'build-1'])).stdout).toMatch(
      /^Worker build-1 receives no work .*status DISABLED\.$/m,
    );
    expect(await status()).toBe('DISABLED');
    await cli(['worker', 'enable', 'build-1']);
    expect(await status()).toBe('IDLE');
    expect((await json(['worker', 'drain', 'build-1'])).drainWorker.status).toBe('DRAINING');
    await cli(['worker', 'undrain', 'build-1']);
    expect(await status()).toBe('IDLE');
    expect((await cli(['worker', 'drain', 'ghost'])).code).toBe(EXIT.notFound);
    expect((await cli(['worker', 'drain', 'build-1'], { token: null })).code).toBe(EXIT.auth);
  });

  it('worker set-static replaces the admin tags', async () => {
    const r = await cli(['worker', 'set-static', 'arm-1', '--provide', 'worker:class:medium', '--concurrency', '3']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^worker:class:medium\s+admin\s+static-metadata$/m);
    expect(r.stdout).not.toMatch(/worker:class:small/);
    expect((await json(['worker', 'show', 'arm-1'])).worker.concurrency).toBe(3);
  });

  it('worker rotate-token: the old token is refused, the new one works', async () => {
    const r = await cli(['worker', 'rotate-token', 'arm-1']);
    expect(r.code).toBe(0);
    const fresh = r.stdout.trim();
    expect(fresh).toMatch(/^tsk_worker_\S+$/);
    const workerTokens = await json(['token', 'list', '--worker', 'arm-1']);
    expect(workerTokens.tokens.filter((x: { valid: boolean }) => x.valid)).toHaveLength(1);
    expect(workerTokens.tokens.filter((x: { valid: boolean }) => !x.valid)).toHaveLength(1);
    await reportMetadata(t, fresh, AMD64_METADATA);
    expect((await cli(['worker', 'rotate-token', 'ghost'])).code).toBe(EXIT.notFound);
  });
});

describe('images', () => {
  it('images register takes the manifest tagsched-image build wrote; list and show it; a pool naming it gets its tags', async () => {
    const dir = scratchDir();
    const file = path.join(dir, 'trixie-sbuild.manifest.json');
    fs.writeFileSync(file, JSON.stringify(imageManifest('trixie-sbuild'), null, 2));
    const r = await cli(['images', 'register', file]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(
      /^Registered image trixie-sbuild \(trixie\/amd64 backends=unshare tasks=sbuild, \d+ packages\); a pool names it with --image trixie-sbuild\.$/m,
    );
    expect(r.stdout).toMatch(/^worker:cap:sbuild\s+package:sbuild\s+-$/m);

    const list = await cli(['images', 'list']);
    expect(list.stdout).toMatch(/^NAME\s+SUITE\s+ARCH\s+BACKENDS\s+TASKS\s+PACKAGES\s+ROOTFS\s+BUILT/m);
    expect(list.stdout).toMatch(/^trixie-sbuild\s+trixie\s+amd64\s+unshare\s+sbuild\s+\d+\s+362 MiB\s+2026-11-23/m);
    const shown = await cli(['images', 'show', 'trixie-sbuild', '--packages']);
    expect(shown.stdout).toMatch(/^Root file system:\s+trixie-sbuild\.tar \(362 MiB, sha256 a{64}\)$/m);
    expect(shown.stdout).toMatch(/^Published:\s+nowhere yet \(tagsched-image publish\)$/m);
    expect(shown.stdout).toMatch(/^worker:task:worker:sbuild:version:1\s+handler:sbuild\s+-$/m);
    expect(shown.stdout).toMatch(/^sbuild\s+1\.0-1\s+amd64$/m);
    const data = await json(['images', 'show', 'trixie-sbuild']);
    expect(data.workerImage).toMatchObject({
      name: 'trixie-sbuild',
      recipe: { enableTasks: ['sbuild'] },
      packageCount: expect.any(Number),
    });

    // Disabled: the work tests below count on no pool that runs sbuild.
    const pool = await json([
      'pool',
      'create',
      'imaged',
      '--provider',
      'local',
      '--image',
      'trixie-sbuild',
      '--disable',
    ]);
    expect(pool.createWorkerPool.specifications.image).toBe('trixie-sbuild');
    const poolShown = await cli(['pool', 'show', 'imaged']);
    expect(poolShown.stdout).toMatch(/^worker:executor:unshare\s+admin\s+image:trixie-sbuild$/m);
  });

  it('images register refuses the same name again (6), a bad manifest naming the field (4), a non-admin (5); show of an unknown image is not found (3)', async () => {
    const dir = scratchDir();
    const file = path.join(dir, 'again.json');
    fs.writeFileSync(file, JSON.stringify(imageManifest('trixie-sbuild')));
    const again = await cli(['images', 'register', file]);
    expect(again.code).toBe(EXIT.conflict);
    expect(again.stderr).toMatch(/"trixie-sbuild" is already registered.*\[ALREADY_EXISTS\]/);
    const broken = path.join(dir, 'broken.json');
    fs.writeFileSync(broken, JSON.stringify({ ...imageManifest('broken'), recipe: undefined }));
    const bad = await cli(['images', 'register', broken]);
    expect(bad.code).toBe(EXIT.invalidInput);
    expect(bad.stderr).toMatch(/input\.manifest\.recipe.*\[INVALID_INPUT\]/);
    const user = await json(['user', 'create', 'image-outsider']);
    const forbidden = await cli(['images', 'register', file], { token: user.createUser.token });
    expect(forbidden.code).toBe(EXIT.forbidden);
    expect((await cli(['images', 'show', 'never-built'])).code).toBe(EXIT.notFound);
    const unknown = await cli(['pool', 'create', 'ghostly', '--provider', 'local', '--image', 'never-built']);
    expect(unknown.code).toBe(EXIT.invalidInput);
    expect(unknown.stderr).toMatch(
      /input\.specifications\.image: no worker image "never-built" is registered.*\[UNKNOWN_IMAGE\]/,
    );
    expect((await json(['images', 'list'])).workerImages.map((i: { name: string }) => i.name)).toEqual([
      'trixie-sbuild',
    ]);
    // For the pool tests below: an image with no sbuild, so that their pool runs none of the work tests' sbuilds.
    fs.writeFileSync(file, JSON.stringify(imageManifest('trixie-autopkgtest', { enable_tasks: ['autopkgtest'] })));
    expect((await cli(['images', 'register', file])).code).toBe(0);
  });
});

describe('pools', () => {
  it('pool create with typed specifications from flags and a file; the provider account is never shown', async () => {
    const dir = scratchDir();
    const account = path.join(dir, 'account.json');
    fs.writeFileSync(account, JSON.stringify({ apiKey: 'very-secret-provider-key' }), { mode: 0o600 });
    const spec = path.join(dir, 'spec.json');
    fs.writeFileSync(spec, JSON.stringify({ cpuCount: 2, image: 'trixie-autopkgtest' }));
    const r = await cli([
      'pool',
      'create',
      'cloud',
      '--provider',
      'local',
      '--provider-account-file',
      account,
      '--spec-file',
      spec,
      '--cpu-count',
      '8',
      '--memory-gib',
      '32',
      '--max-active',
      '5',
      '--provide',
      'worker:class:cloud',
    ]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe(
      'Created pool cloud (local, enabled): concurrency=1 cpuCount=8 handlers=noop=true image=trixie-autopkgtest memoryGib=32.\n',
    );
    const shown = await cli(['pool', 'show', 'cloud']);
    expect(shown.stdout).toMatch(/^Provider:\s+local \(provider account set\)$/m);
    expect(shown.stdout).toMatch(/^worker:cpu-count=8\s+admin\s+\S+$/m);
    expect(shown.stdout).toMatch(/^worker:class:cloud\s+admin\s+pool:cloud$/m);
    const data = await json(['pool', 'show', 'cloud']);
    expect(data.workerPool).toMatchObject({
      name: 'cloud',
      maxActiveInstances: 5,
      hasProviderAccount: true,
      degraded: false,
      specifications: {
        cpuCount: 8,
        memoryGib: 32,
        image: 'trixie-autopkgtest',
        handlers: [{ task: 'noop', command: 'true' }],
      },
    });
    for (const out of [r.stdout, r.stderr, shown.stdout, JSON.stringify(data)])
      expect(out).not.toContain('very-secret-provider-key');
  });

  it('pool update changes only what is given; spec flags keep the other keys', async () => {
    const r = await json([
      'pool',
      'update',
      'cloud',
      '--memory-gib',
      '64',
      '--min-idle',
      '1',
      '--disable',
      '--handler',
      'noop=true',
      '--handler',
      'sbuild=/usr/local/bin/sbuild-handler',
    ]);
    expect(r.updateWorkerPool).toMatchObject({
      enabled: false,
      minIdleInstances: 1,
      maxActiveInstances: 5,
      specifications: {
        cpuCount: 8,
        memoryGib: 64,
        image: 'trixie-autopkgtest',
        handlers: [
          { task: 'noop', command: 'true' },
          { task: 'sbuild', command: '/usr/local/bin/sbuild-handler' },
        ],
      },
    });
    const list = await cli(['pool', 'list']);
    expect(list.stdout).toMatch(
      /^cloud\s+local\s+no\s+5\s+1\s+no\s+concurrency=1 cpuCount=8 handlers=noop=true,sbuild=\/usr\/local\/bin\/sbuild-handler image=trixie-autopkgtest memoryGib=64$/m,
    );
    expect((await cli(['pool', 'update', 'cloud', '--handler', 'no-command'])).code).toBe(EXIT.usage);
    expect((await json(['pool', 'update', 'cloud', '--enable'])).updateWorkerPool.enabled).toBe(true);
    expect((await cli(['pool', 'update', 'cloud'])).code).toBe(EXIT.usage);
    expect((await cli(['pool', 'update', 'cloud', '--enable', '--disable'])).code).toBe(EXIT.usage);
    expect((await cli(['pool', 'update', 'nowhere', '--max-active', '1'])).code).toBe(EXIT.notFound);
  });

  it('pool create refuses a bad provider and bad tags with every problem (4), a taken name (6)', async () => {
    const bad = await cli(['pool', 'create', 'bad', '--provider', 'teleport', '--provide', 'task:scope:x']);
    expect(bad.code).toBe(EXIT.invalidInput);
    expect(bad.stderr).toMatch(/input\.providerType/);
    expect(bad.stderr).toMatch(/task:scope:x/);
    expect((await cli(['pool', 'show', 'bad'])).code).toBe(EXIT.notFound);
    expect((await cli(['pool', 'create', 'cloud', '--provider', 'local'])).code).toBe(EXIT.conflict);
    expect((await cli(['pool', 'create', 'x', '--spec-file', '/nonexistent/spec.json'])).code).toBe(EXIT.usage);
  });

  it('pool create checks a spec file against the specifications and names every problem with its path, sending nothing', async () => {
    const file = path.join(scratchDir(), 'bad-spec.json');
    fs.writeFileSync(file, JSON.stringify({ cpuCount: 'four', memoryGib: -2, bogus: 1, instanceType: 5 }));
    const bad = await cli(['pool', 'create', 'badspec', '--spec-file', file]);
    expect(bad.code).toBe(EXIT.invalidInput);
    expect(bad.stderr).toMatch(/^tagsched-admin: the input was refused, 4 problems: \[INVALID_INPUT\]$/m);
    for (const at of [
      'input.specifications.cpuCount',
      'input.specifications.memoryGib',
      'input.specifications.instanceType',
      'input.specifications: Unrecognized key: "bogus"',
    ]) {
      expect(bad.stderr).toContain(`  ${at}`);
    }
    expect((await cli(['pool', 'show', 'badspec'])).code).toBe(EXIT.notFound);
    const asJson = await cli(['pool', 'update', 'cloud', '--spec-file', file, '--json']);
    expect(asJson.code).toBe(EXIT.invalidInput);
    expect(JSON.parse(asJson.stdout).updateWorkerPool).toMatchObject({
      __typename: 'InputError',
      code: 'INVALID_INPUT',
    });
    expect(JSON.parse(asJson.stdout).updateWorkerPool.problems).toHaveLength(4);
  });

  it('pool activation-token prints a one-shot token that activates a worker of the pool', async () => {
    const r = await cli(['pool', 'activation-token', 'cloud']);
    expect(r.code).toBe(0);
    const activation = r.stdout.trim();
    expect(r.stderr).toMatch(/one-shot activation token for pool cloud/);
    const res = await ok(
      t,
      'mutation { activateWorker(input: { name: "cloud-1" }) { __typename ... on WorkerTokenPayload { worker { name pool { name } } } } }',
      {},
      activation,
    );
    expect(res.activateWorker.worker).toEqual({ name: 'cloud-1', pool: { name: 'cloud' } });
    expect((await cli(['pool', 'activation-token', 'nowhere'])).code).toBe(EXIT.notFound);
  });

  it('pool activation-token --expires-in sets its expiry; token list --pool lists it, token revoke revokes it', async () => {
    const r = await cli(['pool', 'activation-token', 'cloud', '--expires-in', '2h']);
    expect(r.code).toBe(0);
    const [, id, expires] = r.stderr.match(/token (\d+), expiring (\S+ \S+)/)!;
    expect(Math.abs(Date.parse(expires.replace(' ', 'T')) - (Date.now() + 2 * 3600_000))).toBeLessThan(60_000);
    const listed = await cli(['token', 'list', '--pool', 'cloud', '--no-color'], { columns: 200 });
    expect(listed.stdout).toMatch(
      new RegExp(`^\\s*${id}\\s+ACTIVATION\\s+activation for pool cloud\\s+cloud\\s.*\\syes$`, 'm'),
    );
    expect((await cli(['token', 'revoke', id])).stdout).toBe(`Revoked token ${id} (activation of cloud).\n`);
    const after = await json(['token', 'list', '--pool', 'cloud']);
    expect(after.tokens.find((tk: { id: string }) => tk.id === id)).toMatchObject({ valid: false });
    expect((await cli(['token', 'list', '--pool', 'cloud', '--user', 'admin'])).code).toBe(EXIT.usage);
  });
});

describe('pool instances and terminated workers', () => {
  it('instance create records an instance and prints its activation token once; launched and stopped record its life', async () => {
    const created = await cli(['instance', 'create', 'cloud', '--name', 'cloud-manual']);
    expect(created.code, created.stderr).toBe(0);
    expect(created.stdout).toMatch(/^tsk_\S+\n$/);
    expect(created.stderr).toMatch(/^Recorded instance cloud-manual of pool cloud \(LAUNCHING\)/);
    const launched = await cli(['instance', 'launched', 'cloud-manual', '--provider-id', 'prov-42']);
    expect(launched.stdout).toMatch(/^Instance cloud-manual is \w+, provider id prov-42\.$/m);
    const table = await cli(['pool', 'instances', 'cloud']);
    expect(table.stdout).toMatch(/^NAME\s+STATE\s+WORKER\s+PROVIDER ID\s+REQUESTED\s+RUNTIME\s+ERROR$/m);
    expect(table.stdout).toMatch(/^cloud-manual\s+LAUNCHING\s+\S+\s+prov-42\s+\d+s ago\s+\d+s\s+-$/m);
    const stopped = await cli(['instance', 'stopped', 'cloud-manual', '--error', 'quota exceeded']);
    expect(stopped.stdout).toMatch(
      /^Instance cloud-manual is FAILED \(quota exceeded\); its worker is terminated and its work re-queued\.$/m,
    );
    const failed = await json(['pool', 'instances', 'cloud', '--state', 'failed']);
    expect(failed.workerPool.instances.edges.map((e: any) => e.node)).toEqual([
      expect.objectContaining({
        name: 'cloud-manual',
        state: 'FAILED',
        error: 'quota exceeded',
        providerId: 'prov-42',
      }),
    ]);
    const shown = await cli(['pool', 'show', 'cloud']);
    expect(shown.stdout).toMatch(/^Instances \(newest first\)\nNAME\s+STATE/m);
    expect(shown.stdout).toMatch(/^cloud-manual\s+FAILED/m);
    expect(shown.stdout).toMatch(/^Runtime this month:\s+\d+ s$/m);
  });

  it('pool update --price-per-hour and --monthly-cost-budget, pool show prints cost lines, work show a request’s share', async () => {
    const updated = await json(['pool', 'update', 'cloud', '--price-per-hour', '0.6', '--monthly-cost-budget', '250']);
    expect(updated.updateWorkerPool).toMatchObject({ pricePerHour: 0.6, monthlyCostBudget: 250 });
    const shown = await cli(['pool', 'show', 'cloud']);
    expect(shown.stdout).toMatch(/^Price per hour:\s+0\.60$/m);
    expect(shown.stdout).toMatch(/^Monthly cost budget:\s+250\.00$/m);
    expect(shown.stdout).toMatch(/^Cost this month:\s+\d+(\.\d+)? \(\d+% of the cost budget\)$/m);
    expect((await cli(['pool', 'update', 'cloud', '--price-per-hour', '-1'])).code).toBe(EXIT.usage);
    expect((await cli(['pool', 'update', 'cloud', '--price-per-hour', '2e6'])).code).toBe(EXIT.invalidInput);
    // A request that ran an hour on cloud-manual (whose price is the pool's now: it was recorded without one).
    const created = await ok(
      t,
      `mutation($i: CreateWorkRequestInput!) { createWorkRequest(input: $i) { ... on WorkRequest { id } } }`,
      {
        i: { workspace: 'debian/main', taskType: 'worker', taskName: 'noop', taskData: {} },
      },
    );
    const id = (created.createWorkRequest as { id: string }).id;
    await t.sql(
      `update work_request set status = 'COMPLETED', result = 'SUCCESS', worker_id = (select id from worker where name = 'cloud-manual'),
              assigned_at = now() - interval '2 hours', started_at = now() - interval '2 hours', completed_at = now() - interval '1 hour' where id = ?`,
      [Number(id)],
    );
    const [{ concurrency }] = await t.sql<{ concurrency: number }>(
      `select concurrency from worker where name = 'cloud-manual'`,
    );
    const work = await cli(['work', 'show', id]);
    expect(work.stdout).toMatch(
      new RegExp(
        `^Cost:\\s+${(0.6 / concurrency).toFixed(2).replace('.', '\\.')} \\(its share of its instance's cost\\)$`,
        'm',
      ),
    );
    const cleared = await json([
      'pool',
      'update',
      'cloud',
      '--price-per-hour',
      'none',
      '--monthly-cost-budget',
      'none',
    ]);
    expect(cleared.updateWorkerPool).toMatchObject({ pricePerHour: null, monthlyCostBudget: null });
  });

  it('instance and pool-instances failures: unknown pool or instance (3), bad state (64), taken name (6)', async () => {
    expect((await cli(['instance', 'create', 'nowhere'])).code).toBe(EXIT.notFound);
    expect((await cli(['instance', 'launched', 'ghost', '--provider-id', 'x'])).code).toBe(EXIT.notFound);
    expect((await cli(['instance', 'launched', 'ghost'])).code).toBe(EXIT.usage);
    expect((await cli(['pool', 'instances', 'nowhere'])).code).toBe(EXIT.notFound);
    expect((await cli(['pool', 'instances', 'cloud', '--state', 'asleep'])).code).toBe(EXIT.usage);
    expect((await cli(['instance', 'create', 'cloud', '--name', 'cloud-manual'])).code).toBe(EXIT.conflict);
  });

  it('worker terminate makes a pool worker inactive: hidden from the list, its token refused', async () => {
    const created = await cli(['instance', 'create', 'cloud', '--name', 'cloud-doomed']);
    const activation = created.stdout.trim();
    const activated = await ok(
      t,
      'mutation { activateWorker(input: { name: "cloud-doomed" }) { ... on WorkerTokenPayload { token worker { name } } ... on Error { code message } } }',
      {},
      activation,
    );
    expect(activated.activateWorker.worker).toEqual({ name: 'cloud-doomed' });
    const r = await cli(['worker', 'terminate', 'cloud-doomed']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^Worker cloud-doomed is terminated \(INACTIVE\)/);
    expect((await json(['worker', 'list'])).workers.edges.map((e: any) => e.node.name)).not.toContain('cloud-doomed');
    expect((await json(['worker', 'list', '--include-inactive'])).workers.edges.map((e: any) => e.node.name)).toContain(
      'cloud-doomed',
    );
    expect(
      (await json(['worker', 'list', '--status', 'inactive'])).workers.edges.map((e: any) => e.node.name),
    ).toContain('cloud-doomed');
    expect((await t.gql('query { me { username } }', {}, activated.activateWorker.token)).status).toBe(401);
    expect((await cli(['worker', 'terminate', 'ghost'])).code).toBe(EXIT.notFound);
    const staticWorker = await cli(['worker', 'terminate', 'build-1']);
    expect(staticWorker.code).toBe(EXIT.conflict);
    expect(staticWorker.stderr).toMatch(/worker "build-1" is not a pool worker.*\[INVALID_STATE\]/);
  });
});

describe('work and demand', () => {
  let ids: string[] = [];
  let soloToken: string;
  const sbuild = (pkg: string, arch = 'amd64') => [
    'work',
    'create',
    '--workspace',
    'debian/main',
    '--task',
    'sbuild',
    '--data',
    JSON.stringify({ source_package: pkg, host_architecture: arch }),
  ];

  beforeAll(async () => {
    // One connected amd64 sbuild worker with one slot (build-1 from above has two: drain it).
    await cli(['worker', 'drain', 'build-1']);
    await cli(['worker', 'drain', 'arm-1']);
    await cli(['worker', 'disable', 'cloud-1']);
    soloToken = (await cli(['worker', 'register', 'solo'])).stdout.trim();
    await reportMetadata(t, soloToken, AMD64_METADATA);
  });

  it('work create assigns at once to a free worker; the next one waits for capacity', async () => {
    const first = await cli(sbuild('hello'));
    expect(first.stdout).toMatch(
      /^Created work request (\d+) \(worker\/sbuild in debian\/main\): ASSIGNED on solo\.$/m,
    );
    const second = await json(sbuild('world'));
    expect(second.createWorkRequest.status).toBe('PENDING');
    ids = [first.stdout.match(/request (\d+)/)![1], second.createWorkRequest.id];
    const why = await cli(['work', 'why', ids[1]]);
    expect(why.code).toBe(0);
    expect(why.stdout).toMatch(new RegExp(`^${ids[1]}: waiting for capacity: the one matching worker is busy$`, 'm'));
    const assigned = await cli(['work', 'why', ids[0]]);
    expect(assigned.stdout).toBe(`${ids[0]}: assigned to worker solo, which has not started it yet\n`);
  });

  it('work why says what no worker provides, and names the nearest', async () => {
    const r = await json(sbuild('riscv-only', 'riscv64'));
    const why = await cli(['work', 'why', r.createWorkRequest.id]);
    expect(why.stdout).toMatch(/: unschedulable: no worker or pool provides worker:build-arch:riscv64 \(nearest: /);
    expect(why.stdout).toMatch(/^ {2}.*lacks? worker:build-arch:riscv64/m);
    const data = await json(['work', 'why', r.createWorkRequest.id]);
    expect(data.workRequest.diagnosis.state).toBe('UNSCHEDULABLE');
  });

  it('work list filters by status, task and worker; --json is one connection', async () => {
    const pending = await json(['work', 'list', '--status', 'pending']);
    expect(pending.workRequests.edges.map((e: any) => e.node.status)).toEqual(expect.arrayContaining(['PENDING']));
    expect(new Set(pending.workRequests.edges.map((e: any) => e.node.status))).toEqual(new Set(['PENDING']));
    const onSolo = await json(['work', 'list', '--worker', 'solo']);
    expect(onSolo.workRequests.edges.map((e: any) => e.node.id)).toEqual([ids[0]]);
    const table = await cli(['work', 'list', '--task', 'sbuild', '--status', 'assigned,pending']);
    expect(table.stdout).toMatch(/^ID\s+STATUS\s+RESULT\s+TASK\s+WORKSPACE\s+WORKER\s+PRIO\s+BY\s+CREATED$/m);
    expect(table.stdout).toMatch(
      new RegExp(
        `^\\s*${ids[0]}\\s+ASSIGNED\\s+-\\s+worker/sbuild\\s+debian/main\\s+solo\\s+0\\s+admin\\s+\\d+s ago$`,
        'm',
      ),
    );
    expect((await cli(['work', 'list', '--status', 'lost'])).code).toBe(EXIT.usage);
  });

  it('work show: both tag sets with provenance, and where it stands', async () => {
    const r = await cli(['work', 'show', ids[1]]);
    expect(r.stdout).toMatch(/^Where it stands:\s+waiting for capacity: the one matching worker is busy$/m);
    expect(r.stdout).toMatch(/^task:workspace:debian:main\s+system\s+\S+$/m);
    expect(r.stdout).toMatch(/^worker:cap:sbuild\s+system\s+\S+$/m);
    const data = await json(['work', 'show', ids[1]]);
    expect(data.workRequest.taskData).toMatchObject({ source_package: 'world', host_architecture: 'amd64' });
    expect((await cli(['work', 'show', '999999'])).code).toBe(EXIT.notFound);
    expect((await cli(['work', 'show', 'abc'])).code).toBe(EXIT.usage);
  });

  it('a workflow: work show lists its children, work why says the server orchestrates it', async () => {
    // trixie/arm64 was registered above; its children need trixie/amd64 too.
    await cli(['environment', 'create', 'trixie', 'amd64', '--variant', 'sbuild', '--backend', 'unshare']);
    const data = {
      input: { source_package: 'hello' },
      target_distribution: 'debian:trixie',
      architectures: ['amd64', 'arm64'],
    };
    const created = await cli([
      'work',
      'create',
      '--workspace',
      'debian/main',
      '--type',
      'workflow',
      '--task',
      'sbuild',
      '--data',
      JSON.stringify(data),
    ]);
    expect(created.code, created.stderr).toBe(0);
    const id = created.stdout.match(/request (\d+)/)![1];
    const shown = await cli(['work', 'show', id]);
    expect(shown.stdout).toMatch(/^Children\nID\s+STATUS/m);
    const children = (await json(['work', 'show', id])).workRequest.children.edges.map((e: any) => e.node);
    expect(children.length).toBeGreaterThanOrEqual(2);
    for (const child of children)
      expect(shown.stdout).toMatch(new RegExp(`^\\s*${child.id}\\s+${child.status}\\s`, 'm'));
    const childShown = await cli(['work', 'show', children[0].id]);
    expect(childShown.stdout).toMatch(new RegExp(`^Part of:\\s+${id} \\(sbuild\\)$`, 'm'));
    const why = await cli(['work', 'why', id]);
    expect(why.stdout).toMatch(
      new RegExp(`^${id}: orchestrated by the server, never by a worker .*: (running|pending)$`, 'm'),
    );
  });

  it('work create refuses bad task data (4), an unknown workspace (3) and bad JSON (64)', async () => {
    const bad = await cli([
      'work',
      'create',
      '--workspace',
      'debian/main',
      '--task',
      'sbuild',
      '--data',
      '{"host_architecture": 5}',
    ]);
    expect(bad.code).toBe(EXIT.invalidInput);
    expect(bad.stderr).toMatch(/\[INVALID_TASK_DATA\]/);
    expect((await cli(['work', 'create', '--workspace', 'debian/none', '--task', 'noop'])).code).toBe(EXIT.notFound);
    expect(
      (await cli(['work', 'create', '--workspace', 'debian/main', '--task', 'noop', '--data', '{oops'])).code,
    ).toBe(EXIT.usage);
    expect((await cli(['work', 'create', '--task', 'noop'])).code).toBe(EXIT.usage);
  });

  it('work create reads task data from a file and stdin', async () => {
    const file = path.join(scratchDir(), 'task.json');
    fs.writeFileSync(file, JSON.stringify({ source_package: 'from-file', host_architecture: 'amd64' }));
    const fromFile = await json([
      'work',
      'create',
      '--workspace',
      'debian/main',
      '--task',
      'sbuild',
      '--data',
      `@${file}`,
    ]);
    const fromStdin = await json(['work', 'create', '--workspace', 'debian/main', '--task', 'sbuild', '--data', '-'], {
      stdin: '{"source_package": "from-stdin", "host_architecture": "amd64"}',
    });
    const shown = await json(['work', 'show', fromStdin.createWorkRequest.id]);
    expect(shown.workRequest.taskData.source_package).toBe('from-stdin');
    expect((await json(['work', 'show', fromFile.createWorkRequest.id])).workRequest.taskData.source_package).toBe(
      'from-file',
    );
  });

  const APPEND = `mutation($i: AppendWorkRequestLogInput!) { appendWorkRequestLog(input: $i) { __typename ... on WorkRequestLogAck { accepted nextOffset } } }`;
  /** Appends output to a request as its agent does, and returns the offset after it. */
  async function appendLog(id: string, offset: number, text: string): Promise<number> {
    const r = await ok(t, APPEND, { i: { id, offset, bytes: Buffer.byteLength(text), text } }, soloToken);
    expect(r.appendWorkRequestLog).toMatchObject({ accepted: true });
    return r.appendWorkRequestLog.nextOffset;
  }

  it('work log prints the output as it is, page after page, and how the request stands on stderr', async () => {
    const id = ids[0];
    await ok(t, 'mutation($id: ID!) { startWorkRequest(input: { id: $id }) { __typename } }', { id }, soloToken);
    // Two chunks of 700 KiB: more than one page (1 MiB) of output.
    const big = (c: string) => `${c.repeat(1023)}\n`.repeat(700);
    let offset = await appendLog(id, 0, big('a'));
    offset = await appendLog(id, offset, big('b'));
    const r = await cli(['work', 'log', id]);
    expect(r.code).toBe(0);
    expect(r.stdout.length).toBe(offset);
    expect(r.stdout).toBe(big('a') + big('b'));
    expect(r.stderr).toBe(`(work request ${id}: RUNNING)\n`);
    const pages = (await cli(['work', 'log', id, '--json'])).stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(pages.map((p) => p.workRequest.log.offset)).toEqual([0, 1_048_576]);
    const tail = await cli(['work', 'log', id, '--offset', String(offset - 1024)]);
    expect(tail.stdout).toBe(big('b').slice(-1024));
    expect((await cli(['work', 'log', '999999'])).code).toBe(EXIT.notFound);
    expect((await cli(['work', 'log', id], { token: null })).code).toBe(0); // a public workspace's output
  });

  it('work log --follow prints new output as it comes and ends when the request is finished', async () => {
    const id = ids[0];
    const pages = (await cli(['work', 'log', id, '--json'])).stdout.trim().split('\n');
    const before = JSON.parse(pages[pages.length - 1]).workRequest.log.totalBytes as number;
    let seen = '';
    const following = cli(['work', 'log', id, '--follow', '--offset', String(before)], {
      onStdout: (chunk) => (seen += chunk),
    });
    const offset = await appendLog(id, before, 'compiling\n');
    await vi.waitFor(() => expect(seen).toContain('compiling\n'), { timeout: 30_000, interval: 50 });
    await appendLog(id, offset, 'error: it broke\n');
    const done = await ok(
      t,
      'mutation($id: ID!) { completeWorkRequest(input: { id: $id, result: FAILURE, exitCode: 2 }) { __typename ... on WorkRequest { status } } }',
      { id },
      soloToken,
    );
    expect(done.completeWorkRequest.status).toBe('COMPLETED');
    const r = await following;
    expect(r.code).toBe(0);
    expect(r.stdout).toBe('compiling\nerror: it broke\n');
    // The reason is the output's last lines (the server's, up to 1000 characters), on one line.
    expect(r.stderr).toMatch(
      new RegExp(`^\\(work request ${id}: COMPLETED FAILURE, exit code 2: .*b \\| compiling \\| error: it broke\\)\n$`),
    );
  });

  it('work log --follow stops cleanly on Ctrl-C while the request still runs', async () => {
    const id = (await json(sbuild('still-running'))).createWorkRequest.id;
    const stop = new AbortController();
    const following = cli(['work', 'log', id, '--follow'], { signal: stop.signal });
    setTimeout(() => stop.abort(), 500);
    const r = await following;
    expect(r).toEqual({ code: 0, stdout: '', stderr: '' });
  });

  it('work abort, and a second abort is a conflict', async () => {
    const r = await cli(['work', 'abort', ids[1]]);
    expect(r.stdout).toBe(`Work request ${ids[1]} is ABORTED.\n`);
    const again = await cli(['work', 'abort', ids[1]]);
    expect(again.code).toBe(EXIT.conflict);
    expect(again.stderr).toMatch(/already ABORTED \[INVALID_STATE\]/);
  });

  it('work show keeps a multi-line reason in its column, prints the exit code, and drops the escapes a worker wrote', async () => {
    // A worker of its own architecture, so that the request is assigned to it at once.
    const token = (await cli(['worker', 'register', 'escaper'])).stdout.trim();
    await reportMetadata(t, token, { ...AMD64_METADATA, architectures: ['ppc64el'] });
    const id = (await json(sbuild('escapes', 'ppc64el'))).createWorkRequest.id;
    await ok(
      t,
      'mutation($id: ID!) { startWorkRequest(input: { id: $id }) { __typename ... on WorkRequest { status } } }',
      { id },
      token,
    );
    const reason = 'line one\n\u001b[31mred\u001b[0m line two\u001b]0;retitled\u0007\r\nline three\u0008';
    const done = await ok(
      t,
      'mutation($id: ID!, $r: String) { completeWorkRequest(input: { id: $id, result: FAILURE, exitCode: 3, statusReason: $r }) { __typename } }',
      { id, r: reason },
      token,
    );
    expect(done.completeWorkRequest.__typename).toBe('WorkRequest');
    const shown = await cli(['work', 'show', id, '--no-color'], { columns: 200 });
    expect(shown.code).toBe(0);
    expect(shown.stdout).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/);
    expect(shown.stdout).toMatch(/^Exit code:\s+3$/m);
    const lines = shown.stdout.split('\n');
    const at = lines.findIndex((l) => l.startsWith('Reason:'));
    const column = lines[at].indexOf('line one');
    expect(lines.slice(at, at + 3).map((l) => l.slice(column))).toEqual(['line one', 'red line two', 'line three']);
    expect(lines[at + 1].slice(0, column).trim()).toBe('');
    expect(lines[at + 3]).toMatch(/^Where it stands:/);
    const logged = await cli(['work', 'log', id]);
    expect(logged.stderr).toBe(
      `(work request ${id}: COMPLETED FAILURE, exit code 3: line one | red line two | line three)\n`,
    );
    expect((await json(['work', 'show', id])).workRequest.statusReason).toBe(reason);
  });

  it('demand: a table of pools and the unschedulable work; --json as the server answered', async () => {
    const r = await cli(['demand']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^Pending work requests: \d+$/m);
    expect(r.stdout).toMatch(
      /^POOL\s+RUNNABLE\s+SHARE\s+COMING\s+IDLE\s+ACTIVE\s+STARTING\s+NEEDED\s+LAUNCH\s+STOP\s+LIMITED BY\s+AVG TASK$/m,
    );
    expect(r.stdout).toMatch(/^cloud\s+\d+/m);
    expect(r.stdout).toMatch(/^\s+1\s+worker:build-arch:riscv64, .*lacks worker:build-arch:riscv64/m);
    const data = await json(['demand']);
    expect(data.provisioningDemand.pools.map((p: any) => p.pool.name)).toEqual(['cloud']);
    expect(data.provisioningDemand.unschedulable[0].requiredTags).toContain('worker:build-arch:riscv64');
  });

  it('demand --watch refreshes until interrupted, then exits 0', async () => {
    const stop = new AbortController();
    let frames = 0;
    const run = cli(['demand', '--watch', '0.2'], {
      signal: stop.signal,
      onStdout: (chunk) => {
        frames += (chunk.match(/Every 0\.2s: tagsched-admin demand/g) ?? []).length;
        if (frames >= 3) stop.abort();
      },
    });
    const r = await run;
    expect(r.code).toBe(0);
    expect(frames).toBeGreaterThanOrEqual(3);
    expect(r.stderr).toBe('');
  });

  it('demand --watch --json writes one JSON document a line', async () => {
    const stop = new AbortController();
    const lines: string[] = [];
    const r = await cli(['demand', '--watch', '0.2', '--json'], {
      signal: stop.signal,
      onStdout: (chunk) => {
        lines.push(...chunk.split('\n').filter(Boolean));
        if (lines.length >= 2) stop.abort();
      },
    });
    expect(r.code).toBe(0);
    for (const line of lines) expect(JSON.parse(line).provisioningDemand.pendingTotal).toEqual(expect.any(Number));
  });
});

describe('output and failures common to every command', () => {
  it('tables fit a narrow terminal: shrinkable columns are cut with "…"', async () => {
    const wide = await cli(['demand']);
    expect(Math.max(...wide.stdout.split('\n').map((l) => l.length))).toBeGreaterThan(100);
    const narrow = await cli(['demand'], { columns: 100, env: { NO_COLOR: '1' } });
    const lines = narrow.stdout.split('\n');
    expect(Math.max(...lines.map((l) => l.length))).toBeLessThanOrEqual(100);
    expect(narrow.stdout).toContain('…');
    expect(narrow.stdout).not.toContain('\u001b[');
  });

  it('colour only on a terminal, and never with NO_COLOR or --no-color', async () => {
    expect((await cli(['worker', 'list'], { columns: 200 })).stdout).toContain('\u001b[');
    expect((await cli(['worker', 'list'], { columns: 200, env: { NO_COLOR: '' } })).stdout).not.toContain('\u001b[');
    expect((await cli(['worker', 'list', '--no-color'], { columns: 200 })).stdout).not.toContain('\u001b[');
    expect((await cli(['worker', 'list'])).stdout).not.toContain('\u001b[');
  });

  it('a refused token exits 2, says where the token came from, and never shows it', async () => {
    const wrong = 'tsk_admin_this-token-does-not-exist-0123456789';
    const r = await cli(['worker', 'list'], { token: wrong });
    expect(r.code).toBe(EXIT.auth);
    expect(r.stderr).toMatch(
      /^tagsched-admin: the bearer token is not valid \[UNAUTHENTICATED\]\n {2}the token came from TAGSCHED_TOKEN\n$/,
    );
    expect(r.stdout + r.stderr).not.toContain(wrong);
    const none = await cli(['user', 'create', 'x'], { token: null });
    expect(none.code).toBe(EXIT.auth);
    expect(none.stderr).toMatch(/no token: set TAGSCHED_TOKEN, or run `tagsched-admin login`/);
  });

  it('a server that is not there exits 69; a URL that is not GraphQL too; a bad URL is a usage error', async () => {
    const port = await closedPort();
    const down = await runCli(`http://127.0.0.1:${port}/graphql`, ['worker', 'list'], { token: ADMIN_TOKEN });
    expect(down.code).toBe(EXIT.unreachable);
    expect(down.stderr).toMatch(
      new RegExp(
        `^tagsched-admin: cannot reach the server at http://127\\.0\\.0\\.1:${port}/graphql: ECONNREFUSED$`,
        'm',
      ),
    );
    const notGraphql = await runCli(url.replace(/graphql$/, 'nothing-here'), ['worker', 'list'], {
      token: ADMIN_TOKEN,
    });
    expect(notGraphql.code).toBe(EXIT.unreachable);
    expect((await cli(['--server', 'ftp://example.org/', 'worker', 'list'])).code).toBe(EXIT.usage);
  });

  it('a request refused by a limit is invalid input (4), the limit named; a bad --timeout is a usage error', async () => {
    const file = path.join(scratchDir(), 'huge.json');
    fs.writeFileSync(file, JSON.stringify({ source_package: 'x'.repeat(1_100_000), host_architecture: 'amd64' }));
    const r = await cli(['work', 'create', '--workspace', 'debian/main', '--task', 'sbuild', '--data', `@${file}`]);
    expect(r.code).toBe(EXIT.invalidInput);
    expect(r.stderr).toMatch(/over the limit of 1048576 \(TAGSCHED_MAX_BODY_BYTES\) \[LIMIT_EXCEEDED\]/);
    expect((await cli(['worker', 'list', '--timeout', '0'])).code).toBe(EXIT.usage);
  });

  it('--help on every command, with examples; unknown commands and flags are usage errors (64)', async () => {
    const root = await cli(['--help']);
    expect(root.code).toBe(0);
    expect(root.stdout).toMatch(/Exit codes:\n {3}1 {2}unexpected error/);
    const commands = [
      ['login'],
      ['logout'],
      ['whoami'],
      ['user', 'create'],
      ['token', 'list'],
      ['token', 'create'],
      ['token', 'rotate'],
      ['token', 'revoke'],
      ['workspace', 'create'],
      ['workspace', 'list'],
      ['workspace', 'show'],
      ['workspace', 'update'],
      ['workspace', 'member', 'add'],
      ['workspace', 'member', 'list'],
      ['workspace', 'grant', 'add'],
      ['workspace', 'grant', 'remove'],
      ['workspace', 'grant', 'list'],
      ['rule', 'add'],
      ['rule', 'list'],
      ['group', 'create'],
      ['group', 'list'],
      ['group', 'add-member'],
      ['environment', 'create'],
      ['environment', 'list'],
      ['worker', 'list'],
      ['worker', 'show'],
      ['worker', 'register'],
      ['worker', 'enable'],
      ['worker', 'disable'],
      ['worker', 'drain'],
      ['worker', 'undrain'],
      ['worker', 'terminate'],
      ['worker', 'set-static'],
      ['worker', 'rotate-token'],
      ['pool', 'list'],
      ['pool', 'show'],
      ['pool', 'create'],
      ['pool', 'update'],
      ['pool', 'activation-token'],
      ['pool', 'instances'],
      ['instance', 'create'],
      ['instance', 'launched'],
      ['instance', 'stopped'],
      ['demand'],
      ['work', 'list'],
      ['work', 'show'],
      ['work', 'why'],
      ['work', 'log'],
      ['work', 'create'],
      ['work', 'abort'],
    ];
    for (const command of commands) {
      const r = await cli([...command, '--help']);
      expect(r.code, command.join(' ')).toBe(0);
      expect(r.stdout, command.join(' ')).toMatch(new RegExp(`Usage: tagsched-admin ${command.join(' ')}`));
      expect(r.stdout, command.join(' ')).toMatch(new RegExp(`Examples:\\n(.*\\n)*\\s+tagsched-admin ${command[0]}`));
    }
    expect((await cli(['frobnicate'])).code).toBe(EXIT.usage);
    expect((await cli(['worker', 'list', '--colour'])).code).toBe(EXIT.usage);
    expect((await cli(['worker'])).code).toBe(EXIT.usage);
  });
});

describe('the config file', () => {
  it('login reads the token from stdin, checks it, and writes the file 0600; commands then use it', async () => {
    const home = scratchDir();
    const env = { HOME: home, XDG_CONFIG_HOME: path.join(home, 'cfg') };
    const r = await cli(['login'], { token: null, env, stdin: `${ADMIN_TOKEN}\n` });
    expect(r.code, r.stderr).toBe(0);
    const file = path.join(home, 'cfg', 'tagsched', 'admin.json');
    expect(r.stdout).toBe(`Logged in to ${url} as admin (admin); the token is kept in ${file} (mode 0600).\n`);
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    expect(JSON.parse(fs.readFileSync(file, 'utf8'))).toEqual({ server: url, token: ADMIN_TOKEN });
    expect(r.stdout + r.stderr).not.toContain(ADMIN_TOKEN);

    const who = await cli(['whoami'], { token: null, env: { ...env, TAGSCHED_SERVER_URL: undefined } });
    expect(who.stdout).toMatch(/^User:\s+admin$/m);
    expect(who.stdout).toContain(`Token from: ${file}`);
    expect(who.stdout).not.toContain(ADMIN_TOKEN);

    const out = await cli(['logout'], { token: null, env });
    expect(out.stdout).toBe(`Logged out: the token was removed from ${file}.\n`);
    expect(JSON.parse(fs.readFileSync(file, 'utf8'))).toEqual({ server: url });
    expect((await cli(['user', 'create', 'y'], { token: null, env })).code).toBe(EXIT.auth);
  });

  it('login refuses a wrong token and writes nothing', async () => {
    const home = scratchDir();
    const r = await cli(['login'], {
      token: null,
      env: { HOME: home, XDG_CONFIG_HOME: undefined },
      stdin: 'tsk_user_not-a-real-token',
    });
    expect(r.code).toBe(EXIT.auth);
    expect(fs.existsSync(path.join(home, '.config', 'tagsched', 'admin.json'))).toBe(false);
    expect((await cli(['login'], { token: null, env: { HOME: home }, stdin: '' })).code).toBe(EXIT.usage);
  });

  it('a config file others may read is refused (78) until it is 0600; --config names another file', async () => {
    const dir = scratchDir();
    const file = path.join(dir, 'admin.json');
    fs.writeFileSync(file, JSON.stringify({ server: url, token: ADMIN_TOKEN }), { mode: 0o644 });
    fs.chmodSync(file, 0o644);
    const r = await cli(['--config', file, 'whoami'], { token: null });
    expect(r.code).toBe(EXIT.config);
    expect(r.stderr).toMatch(/may be read or written by other users \(mode 644\)/);
    expect(r.stderr).toContain(`chmod 600 ${file}`);
    fs.chmodSync(file, 0o600);
    expect((await json(['--config', file, 'whoami'], { token: null })).me.username).toBe('admin');
    expect((await json(['whoami'], { token: null, env: { TAGSCHED_ADMIN_CONFIG: file } })).me.username).toBe('admin');
    fs.writeFileSync(file, '{not json');
    expect((await cli(['--config', file, 'whoami'], { token: null })).code).toBe(EXIT.config);
  });

  it('logout --revoke revokes the token on the server', async () => {
    const token = (await cli(['token', 'create', '--label', 'to-revoke'])).stdout.trim();
    const home = scratchDir();
    const env = { HOME: home };
    expect((await cli(['login'], { token: null, env, stdin: token })).code).toBe(0);
    const r = await cli(['logout', '--revoke'], { token: null, env });
    expect(r.stdout).toMatch(/removed from .* and revoked on the server\.$/m);
    expect((await cli(['whoami'], { token })).code).toBe(EXIT.auth);
  });
});
