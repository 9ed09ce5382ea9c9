/**
 * A provider account never shows, not even in part, where a provider's text is cut (issue 31, 4):
 * exec pools running real scripts, and ec2 and hetzner pools against their stand-ins, through the
 * provisioner's cycle. A script writes the account back across each limit a text is cut at: the
 * 4 KiB end of stderr, the 500 characters of a failed run's message, the 1000 of a provider
 * message, the 300 of an EC2 fleet error; with values that are numbers, nested deep, and of several
 * lines. Every surface is read: the pool's lastError (anonymous), the instance's error, the
 * offering marks, and every log line.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXEC_LIMITS } from '../../src/providers/exec.js';
import { useTestApp } from '../helpers/app.js';
import { createPool, createWorkspace, ok, sbuild, submitOk } from '../helpers/fixtures.js';
import { captureLog } from './providers/capture-log.js';
import { useCloudStandIns, withCloudStandIns } from './stand-ins/clouds.js';

const HZ_TOKEN = 'hz-token-Qm7vK2pL9xW4nB8cR3tY6uZ1';
const KEY_ID = 'AKIAZ7TAGSCHEDREDACT1';
const AWS_SECRET = 'aws-secret-Jf83kD02mZq7Lp55XcV9bNw4';
const AMI = 'ami-0123456789abcdef0';
const EXEC_TOKEN = 'exec-token-Hq4Zr8Wm2Kd6Tn0Yb5Vc7Xs3';
const NUMBER = 918273645546372;
const DEEP = 'deep-value-Gk5Pz9Rw1Mh3Lc7Qv2Nb';
const KEY_LINES = [
  'Zm9vYmFyYmF6cXV4UGVtTGluZU9uZUFBQUFCQkJCQ0NDQ0RERERFRUVFRkZG',
  'R0dHR0hISEhJSUlJSkpKSktLS0tMTExMTU1NTU5OTk5PT09PUFBQUFFRUVFS',
  'UlJSU1NTU1RUVFRVVVVVVlZWVldXV1dYWFhYWVlZWVpaWlphYWFhYmJiYmNj',
];
const KEY = ['-----BEGIN TEST KEY-----', ...KEY_LINES, '-----END TEST KEY-----'].join('\n');
/** An account value twelve levels down. */
const deep = (value: string, levels = 12): unknown =>
  levels === 0 ? value : { [`level${levels}`]: [deep(value, levels - 1)] };

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tagsched-redaction-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));
const scriptPath = (name: string) => path.join(dir, name);
/** Writes a shell script that reads its request and writes `body` (shell) on stderr or stdout. */
const script = (name: string, body: string) =>
  fs.writeFileSync(scriptPath(name), `#!/bin/sh\ncat >/dev/null\n${body}\n`, { mode: 0o755 });
const dots = (n: number) => `head -c ${n} /dev/zero | tr '\\0' .`;

const SCRIPTS = ['stderr-tail.sh', 'lines.sh', 'numeric.sh', 'deep.sh'];
const log = captureLog();
const clouds = useCloudStandIns({ hetznerToken: HZ_TOKEN, keyId: KEY_ID, secretAccessKey: AWS_SECRET, images: [AMI] });
const t = useTestApp(
  withCloudStandIns(clouds, {
    provisioner: { enabled: true, agentServerUrl: 'http://tagsched.test/graphql', launchBackoffMs: 3_600_000 },
    providers: { callTimeoutMs: 10_000, execCommands: SCRIPTS.map(scriptPath) },
  }),
  { log: () => log.logger },
);

beforeAll(async () => {
  // The issue's script: 200 bytes, a line with the token, 4,065 bytes, exit 1: the 4 KiB cut falls in the token.
  script(
    'stderr-tail.sh',
    `{ ${dots(200)}; printf '\\nrefused token %s\\n' '${EXEC_TOKEN}'; ${dots(4065)}; } >&2\nexit 1`,
  );
  // A key of several lines (a nested value), its last lines the last lines of stderr, across the message's 500 characters.
  fs.writeFileSync(path.join(dir, 'key.txt'), `${KEY}\n`);
  script('lines.sh', `{ ${dots(470)}; printf ' key '; cat '${path.join(dir, 'key.txt')}'; } >&2\nexit 1`);
  // A number across the 500 characters of a failed run's message, and across the 1000 of a provider message.
  script(
    'numeric.sh',
    `if [ -e '${dir}/numeric-answer' ]; then printf '{"error":{"kind":"quota","message":"'; ${dots(969)}; printf ' project ${NUMBER} is over its quota"}}'; exit 1; fi\n` +
      `{ ${dots(481)}; printf ' project ${NUMBER}\\n'; } >&2\nexit 1`,
  );
  // A value nested twelve levels deep, on stderr, in the log.
  script('deep.sh', `printf 'cannot log in with %s\\n' '${DEEP}' >&2\nexit 1`);
  await createWorkspace(t, 'debian/main');
});

/** Whether `text` holds `min` characters in a row of `secret`. */
function holdsPart(text: string, secret: string, min = 8): string | null {
  for (let i = 0; i + min <= secret.length; i++)
    if (text.includes(secret.slice(i, i + min))) return secret.slice(i, i + min);
  return null;
}

const SECRETS = [HZ_TOKEN, AWS_SECRET, EXEC_TOKEN, String(NUMBER), DEEP, ...KEY_LINES];

/** Every surface of a pool after its launch failed: none holds a part of any secret. */
async function expectNothingShown(
  pool: string,
  logFrom: number,
): Promise<{ lastError: string; instanceError: string | null; logText: string }> {
  const anonymous = await ok(t, `query($n: String!) { workerPool(name: $n) { lastError } }`, { n: pool }, null);
  const admin = await ok(
    t,
    `query($n: String!) { workerPool(name: $n) { lastError offerings { unavailableReason } instances { edges { node { state error } } } } }`,
    { n: pool },
  );
  const lastError = anonymous.workerPool.lastError as string;
  expect(lastError, 'the launch failed').toBeTruthy();
  const instanceError = admin.workerPool.instances.edges[0]?.node.error ?? null;
  const marks = await t.sql<{ reason: string }>(
    `select m.reason from pool_offering_unavailable m join worker_pool p on p.id = m.pool_id where p.name = ?`,
    [pool],
  );
  const logText = log.lines.slice(logFrom).join('');
  const surfaces = { lastError, admin: JSON.stringify(admin), marks: JSON.stringify(marks), log: logText };
  for (const [where, text] of Object.entries(surfaces)) {
    for (const secret of SECRETS)
      expect(holdsPart(text, secret), `${where} holds part of ${secret}:\n${text.slice(0, 3000)}`).toBeNull();
  }
  return { lastError, instanceError, logText };
}

/** Creates an enabled exec pool on `script` with `account`, queues a request for it, runs one cycle, and disables the pool again. */
async function failedExecLaunch(pool: string, scriptName: string, account: Record<string, unknown>) {
  const from = log.lines.length;
  await createPool(t, {
    name: pool,
    providerType: 'exec',
    providerAccount: account,
    maxActiveInstances: 1,
    specifications: { command: [scriptPath(scriptName)], enableTasks: ['noop'] },
  });
  await submitOk(t, { workspace: 'debian/main', taskType: 'worker', taskName: 'noop', taskData: {} });
  expect(await t.app.provisioner.runCycle({ reconcile: false })).toMatchObject({ launchFailures: 1 });
  await ok(t, `mutation($n: String!) { updateWorkerPool(input: { name: $n, enabled: false }) { __typename } }`, {
    n: pool,
  });
  return from;
}

/** The `stderr` fields of the exec provider's log lines since `from`. */
const loggedStderr = (from: number) =>
  log.lines
    .slice(from)
    .map((line) => JSON.parse(line) as { msg: string; stderr?: string })
    .filter((line) => line.msg === 'exec provider call failed')
    .map((line) => line.stderr ?? '');

describe('a secret across a cut is not shown in part', () => {
  it('exec: the 4 KiB end of stderr, cut inside the token (the issue’s script)', async () => {
    const from = await failedExecLaunch('cut-stderr', 'stderr-tail.sh', { token: EXEC_TOKEN });
    const { lastError, instanceError } = await expectNothingShown('cut-stderr', from);
    expect(lastError).toMatch(/^exec launch: the command failed \(exit 1\): \.+/);
    expect(instanceError).toBe(lastError);
    // The log keeps at most the limit, the end of what was written.
    const [stderr] = loggedStderr(from);
    expect(Buffer.byteLength(stderr!)).toBeGreaterThan(4000);
    expect(Buffer.byteLength(stderr!)).toBeLessThanOrEqual(EXEC_LIMITS.maxStderrBytes);
    expect(stderr).toMatch(/^\n\.{4065}$/);
  });

  it('exec: a nested key of several lines, the last lines of stderr and across the 500 characters of the message', async () => {
    const from = await failedExecLaunch('cut-lines', 'lines.sh', { token: EXEC_TOKEN, tls: { key: KEY } });
    const { lastError } = await expectNothingShown('cut-lines', from);
    expect(lastError).toBe(`exec launch: the command failed (exit 1): ${'.'.repeat(470)} key [redacted]`);
    expect(loggedStderr(from)).toEqual([`${'.'.repeat(470)} key [redacted]\n`]);
  });

  it('exec: a number, across the 500 characters of a failed run’s message and the 1000 of a provider message', async () => {
    const from = await failedExecLaunch('cut-number', 'numeric.sh', { token: EXEC_TOKEN, project: NUMBER });
    const { lastError } = await expectNothingShown('cut-number', from);
    expect(lastError).toBe(`exec launch: the command failed (exit 1): ${'.'.repeat(481)} project [redacted]`);

    fs.writeFileSync(path.join(dir, 'numeric-answer'), '');
    const again = await failedExecLaunch('cut-number-2', 'numeric.sh', { token: EXEC_TOKEN, project: NUMBER });
    const second = await expectNothingShown('cut-number-2', again);
    expect(second.lastError).toBe(
      `${`exec launch: ${'.'.repeat(969)} project [redacted] is over its quota`.slice(0, 1000)}…`,
    );
  });

  it('exec: a value nested twelve levels down, in the log and the message', async () => {
    const from = await failedExecLaunch('cut-deep', 'deep.sh', { token: EXEC_TOKEN, nested: deep(DEEP) });
    const { lastError } = await expectNothingShown('cut-deep', from);
    expect(lastError).toBe('exec launch: the command failed (exit 1): cannot log in with [redacted]');
    expect(loggedStderr(from)).toEqual(['cannot log in with [redacted]\n']);
  });

  it('ec2: the 300 characters of a fleet error, cut inside the secret key, and its code', async () => {
    const from = log.lines.length;
    await createPool(t, {
      name: 'cut-ec2',
      providerType: 'ec2',
      maxActiveInstances: 1,
      providerAccount: { accessKeyId: KEY_ID, secretAccessKey: AWS_SECRET, region: 'eu-central-1' },
      specifications: {
        providerImage: AMI,
        offerings: [{ instanceType: 'c6i.large', location: 'eu-central-1a' }],
        enableTasks: ['sbuild'],
        enableBackends: ['unshare'],
        architectures: ['amd64'],
      },
    });
    // The stand-in's message is "<code>: no …": the key across its 300th character, and whole in the code.
    clouds.ec2.unavailable.set('c6i.large@*', `Capacity${'.'.repeat(280)}${AWS_SECRET}`);
    await submitOk(t, sbuild('debian/main'));
    expect(await t.app.provisioner.runCycle({ reconcile: false })).toMatchObject({ launchFailures: 1 });
    await ok(t, `mutation { updateWorkerPool(input: { name: "cut-ec2", enabled: false }) { __typename } }`);
    const { lastError } = await expectNothingShown('cut-ec2', from);
    expect(lastError).toContain(`ec2 launch: CreateFleet: Capacity${'.'.repeat(280)}`);
    expect(lastError).toContain('[redacted]');
  });

  it('hetzner: an error code that carries the token, in the log', async () => {
    const from = log.lines.length;
    await createPool(t, {
      name: 'cut-hz',
      providerType: 'hetzner',
      maxActiveInstances: 1,
      providerAccount: { token: HZ_TOKEN },
      specifications: { instanceType: 'cpx31', providerImage: 'debian-12', location: 'fsn1', enableTasks: ['noop'] },
    });
    clouds.hetzner.failNext(403, `forbidden_for_${HZ_TOKEN}`, 'this token may not do that');
    await submitOk(t, { workspace: 'debian/main', taskType: 'worker', taskName: 'noop', taskData: {} });
    expect(await t.app.provisioner.runCycle({ reconcile: false })).toMatchObject({ launchFailures: 1 });
    await ok(t, `mutation { updateWorkerPool(input: { name: "cut-hz", enabled: false }) { __typename } }`);
    const { lastError, logText } = await expectNothingShown('cut-hz', from);
    expect(lastError).toContain('(forbidden_for_[redacted])');
    expect(logText).toContain('forbidden_for_[redacted]');
  });
});
