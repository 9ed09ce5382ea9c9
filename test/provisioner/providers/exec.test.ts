import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ProviderError, type LaunchSpec } from '../../../src/providers/provider.js';
import { createExecProvider, EXEC_LIMITS, validateExecPool } from '../../../src/providers/exec.js';
import { cloudInitUserData } from '../../../src/providers/user-data.js';
import { captureLog, providerCall } from './capture-log.js';

const EXAMPLE = path.resolve('examples/exec-provider.mjs');
const TOKEN = 'exec-secret-token-7f3a9c';
const account = { token: TOKEN, nested: { password: 'nested-password-51b2' } };
const environment = { PATH: process.env.PATH ?? '/usr/bin:/bin' };

let dir: string;
const scripts: Record<string, string> = {};

/** Writes an executable test command. */
function script(name: string, body: string): string {
  const file = path.join(dir, name);
  fs.writeFileSync(file, body, { mode: 0o755 });
  scripts[name] = file;
  return file;
}

beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tagsched-exec-'));
  script(
    'leaky.sh',
    '#!/bin/sh\ncat >&2\necho "{\\"error\\":{\\"kind\\":\\"auth\\",\\"message\\":\\"refused token ' +
      TOKEN +
      '\\",\\"code\\":\\"' +
      TOKEN +
      '\\"}}"\nexit 1\n',
  );
  script('garbage.sh', '#!/bin/sh\ncat >/dev/null\necho "hello, I am not JSON"\n');
  script('wrong-shape.sh', '#!/bin/sh\ncat >/dev/null\necho \'{"instances":[{"id":"a","state":"sleeping"}]}\'\n');
  script('huge.sh', `#!/bin/sh\ncat >/dev/null\nhead -c ${EXEC_LIMITS.maxAnswerBytes * 2} /dev/zero | tr '\\0' a\n`);
  script('crash.sh', '#!/bin/sh\ncat >/dev/null\necho "cannot reach the cloud" >&2\nexit 3\n');
  script(
    'capacity.sh',
    '#!/bin/sh\ncat >/dev/null\necho \'{"error":{"kind":"capacity","message":"no machines left in fsn1","code":"resource_unavailable"}}\'\n',
  );
  // Sleeps forever, and so does a child of its, whose pid it leaves in a file: a timeout must kill both.
  script('slow.sh', `#!/bin/sh\nsleep 1000 &\necho $! > "${dir}/child.pid"\nwait\n`);
  // Records its argv and environment, then answers a launch.
  script(
    'record.sh',
    `#!/bin/sh\ncat > "${dir}/stdin.json"\necho "$0 $*" > "${dir}/argv.txt"\nenv > "${dir}/env.txt"\necho '{"id":"rec-1"}'\n`,
  );
  script('echo-id.sh', '#!/bin/sh\ncat >/dev/null\necho "{\\"id\\":\\"' + TOKEN + '\\"}"\n');
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

/** An exec provider that allows `allowed`, and calls for a pool whose command is `command`. */
function provider(command: string[], allowed = [command[0]!]) {
  const log = captureLog();
  const p = createExecProvider({ allowedCommands: allowed, environment, logger: log.logger });
  const call = (acc: Record<string, unknown> | null, timeoutMs?: number) =>
    providerCall(acc, timeoutMs, { name: 'ex-pool', specifications: { command } });
  return { log, provider: p, call };
}

/** A provider for `command` whose operations take only the account (and a timeout). */
function quick(command: string[], allowed?: string[]) {
  const { provider: p, call } = provider(command, allowed);
  return {
    launch: (s: LaunchSpec, acc: Record<string, unknown>, timeoutMs?: number) => p.launch(s, call(acc, timeoutMs)),
    list: (acc: Record<string, unknown>, timeoutMs?: number) => p.list('ex-pool', call(acc, timeoutMs)),
  };
}

const spec: LaunchSpec = {
  pool: 'ex-pool',
  name: 'ex-pool-0001',
  specifications: { instanceType: 'cx22' },
  agent: {
    serverUrl: 'https://ci.example.org/graphql',
    activationToken: 'tsk_activation_abc',
    workerName: 'ex-pool-0001',
  },
  userData: cloudInitUserData({
    serverUrl: 'https://ci.example.org/graphql',
    activationToken: 'tsk_activation_abc',
    workerName: 'ex-pool-0001',
  }),
};

async function failure(promise: Promise<unknown>): Promise<ProviderError> {
  const err = await promise.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ProviderError);
  return err as ProviderError;
}

describe('exec provider against the example script', () => {
  it('launches, lists, terminates, and terminates again what is gone', async () => {
    const state = fs.mkdtempSync(path.join(dir, 'state-'));
    const { provider: p, log, call: callFor } = provider([EXAMPLE, state]);
    const call = callFor(account);
    const { id } = await p.launch(spec, call);
    expect(id).toMatch(/^ex-/);
    const listed = await p.list('ex-pool', call);
    expect(listed).toEqual([{ id, name: 'ex-pool-0001', state: 'running', createdAt: expect.any(Date) }]);
    await p.terminate(id, call);
    expect(await p.list('ex-pool', call)).toEqual([]);
    await p.terminate(id, call);
    expect(log.text()).not.toContain(TOKEN);
    expect(log.text()).not.toContain('tsk_activation_abc');
  });

  it('says quota when the example refuses more instances', async () => {
    const state = fs.mkdtempSync(path.join(dir, 'state-'));
    const { provider: p, call } = provider([EXAMPLE, state, '--max-instances', '1']);
    await p.launch(spec, call(account));
    const err = await failure(p.launch({ ...spec, name: 'ex-pool-0002' }, call(account)));
    expect(err.kind).toBe('quota');
    expect(err.providerCode).toBe('instance_limit');
    expect(err.retryable).toBe(true);
  });

  it('says auth when the account has no token', async () => {
    const state = fs.mkdtempSync(path.join(dir, 'state-'));
    const { provider: p, call } = provider([EXAMPLE, state]);
    const err = await failure(p.list('ex-pool', call({ user: 'someone' })));
    expect(err.kind).toBe('auth');
    expect(err.retryable).toBe(false);
  });
});

describe('exec provider against misbehaving commands', () => {
  it('passes the account and the bootstrap on stdin only: not in argv, not in the environment', async () => {
    const { provider: p, call } = provider([scripts['record.sh']!, '--flag']);
    expect(await p.launch(spec, call(account))).toEqual({ id: 'rec-1' });
    const request = JSON.parse(fs.readFileSync(path.join(dir, 'stdin.json'), 'utf8'));
    expect(request).toEqual({
      version: 1,
      operation: 'launch',
      pool: 'ex-pool',
      account,
      name: spec.name,
      specifications: spec.specifications,
      agent: spec.agent,
      userData: spec.userData,
    });
    expect(fs.readFileSync(path.join(dir, 'argv.txt'), 'utf8').trim()).toBe(`${scripts['record.sh']} --flag`);
    const env = fs.readFileSync(path.join(dir, 'env.txt'), 'utf8');
    expect(env).not.toContain(TOKEN);
    expect(env).not.toContain('tsk_activation_abc');
    // Only the listed variables of the server pass: not DATABASE_URL, not the secret key.
    const names = env
      .split('\n')
      .filter(Boolean)
      .map((line) => line.split('=')[0]);
    expect(names.filter((n) => !['PATH', 'PWD', 'SHLVL', '_'].includes(n!))).toEqual([]);
  });

  it('redacts the account from the error, its code and the logged stderr of a command that echoes it', async () => {
    const { provider: p, log, call } = provider([scripts['leaky.sh']!]);
    const err = await failure(p.launch(spec, call(account)));
    expect(err.kind).toBe('auth');
    expect(err.message).toContain('refused token [redacted]');
    expect(`${err.message} ${err.providerCode} ${err.stack}`).not.toContain(TOKEN);
    expect(log.text()).toContain('exec provider call failed');
    expect(log.text()).toContain('[redacted]');
    expect(log.text()).not.toContain(TOKEN);
    expect(log.text()).not.toContain('nested-password-51b2');
    expect(log.text()).not.toContain('tsk_activation_abc');
  });

  it('refuses an answer that carries the account', async () => {
    const err = await failure(quick([scripts['echo-id.sh']!]).launch(spec, account));
    expect(err.kind).toBe('invalid');
    expect(err.message).toContain('carries the provider account');
    expect(err.message).not.toContain(TOKEN);
  });

  it('passes on the kind a command gives (capacity)', async () => {
    const err = await failure(quick([scripts['capacity.sh']!]).launch(spec, account));
    expect([err.kind, err.providerCode]).toEqual(['capacity', 'resource_unavailable']);
    expect(err.message).toContain('no machines left in fsn1');
  });

  it('kills the whole process group when the call times out', async () => {
    fs.rmSync(path.join(dir, 'child.pid'), { force: true });
    const err = await failure(quick([scripts['slow.sh']!]).list(account, 300));
    expect(err.kind).toBe('timeout');
    const childPid = Number(fs.readFileSync(path.join(dir, 'child.pid'), 'utf8'));
    await expect.poll(() => alive(childPid), { timeout: 10_000 }).toBe(false);
  });

  it('stops when the caller aborts', async () => {
    const controller = new AbortController();
    const { provider: p, call } = provider([scripts['slow.sh']!]);
    const pending = p.list('ex-pool', { ...call(account, 60_000), signal: controller.signal });
    controller.abort();
    const err = await failure(pending);
    expect(err.kind).toBe('unavailable');
    expect(err.providerCode).toBe('cancelled');
  });

  it.each([
    ['garbage.sh', 'invalid', 'malformed_answer', 'not a JSON document'],
    ['wrong-shape.sh', 'invalid', 'malformed_answer', 'instances.0.state'],
    ['huge.sh', 'invalid', 'answer_too_large', 'was cut'],
    ['crash.sh', 'unavailable', 'exit 3', 'cannot reach the cloud'],
  ])('refuses what %s answers', async (name, kind, code, message) => {
    const err = await failure(quick([scripts[name]!]).list(account));
    expect([err.kind, err.providerCode]).toEqual([kind, code]);
    expect(err.message).toContain(message);
  });

  it('refuses to run a command the server does not allow, and one that does not exist', async () => {
    const notAllowed = await failure(quick([scripts['crash.sh']!], ['/usr/local/bin/other']).list(account));
    expect([notAllowed.kind, notAllowed.providerCode]).toEqual(['invalid', 'command_not_allowed']);
    const missing = await failure(quick([path.join(dir, 'no-such-command')]).list(account));
    expect([missing.kind, missing.providerCode]).toEqual(['invalid', 'ENOENT']);
  });
});

describe('exec pool validation', () => {
  const allowedCommands = ['/usr/local/bin/provider'];
  const check = (specifications: Record<string, unknown>, allowed = allowedCommands) =>
    validateExecPool({ name: 'p', specifications, account: { anything: 1 } }, { allowedCommands: allowed });

  it('accepts an allowed command with arguments, and any account', () => {
    expect(check({ command: ['/usr/local/bin/provider', '--region', 'x'], instanceType: 'big' })).toEqual([]);
  });

  it('names every problem of the command', () => {
    expect(check({}).map((p) => p.path)).toEqual(['input.specifications.command']);
    expect(check({ command: 'provider' })[0]!.message).toContain('non-empty list of strings');
    const problems = check({ command: ['/bin/sh', '-c', 'x\0y'] });
    expect(problems.map((p) => p.path)).toEqual(['input.specifications.command[0]', 'input.specifications.command[2]']);
    expect(problems[0]!.message).toContain('/usr/local/bin/provider');
    expect(check({ command: ['/usr/local/bin/provider'] }, [])[0]!.message).toContain(
      'TAGSCHED_EXEC_COMMANDS is empty',
    );
  });
});

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
