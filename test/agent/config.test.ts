import { CommanderError } from 'commander';
import { describe, expect, it } from 'vitest';
import { ENV, parseConfig, parseHandlers, splitHandlerList, UsageError } from '../../src/agent/config.js';

const cwd = '/srv/agent';
const parse = (argv: string[] = [], env: NodeJS.ProcessEnv = {}) => parseConfig(argv, env, { cwd });

/** Runs commander with its output captured (help, errors). */
function capture(argv: string[]) {
  let out = '';
  let err = '';
  try {
    parseConfig(
      argv,
      {},
      { cwd, version: '9.9.9', output: { writeOut: (s) => (out += s), writeErr: (s) => (err += s) } },
    );
  } catch (e) {
    return { error: e, out, err };
  }
  return { error: null, out, err };
}

describe('parseConfig', () => {
  it('has the documented defaults', () => {
    const c = parse();
    expect(c).toMatchObject({
      serverUrl: 'http://127.0.0.1:4000/graphql',
      wsUrl: 'ws://127.0.0.1:4000/graphql',
      token: null,
      activationToken: null,
      name: null,
      workDir: '/srv/agent/.tagsched-worker',
      stateFile: '/srv/agent/.tagsched-worker/state.json',
      providedTags: [],
      heartbeatIntervalMs: 30_000,
      metadataIntervalMs: 600_000,
      maxBackoffMs: 30_000,
      requestTimeoutMs: 30_000,
      keepAliveMs: 10_000,
      logLevel: 'info',
      memoryCgroup: 'auto',
      handlerMemoryLimitBytes: null,
    });
    expect(c.handlers.size).toBe(0);
    expect(Object.isFrozen(c)).toBe(true);
  });

  it('reads every option from its flag', () => {
    const c = parse([
      '--server',
      'https://ci.example.org/graphql',
      '--token',
      'tok',
      '--activation-token',
      'act',
      '--name',
      'arm-1',
      '--work-dir',
      'wd',
      '--state-file',
      '/etc/tagsched/state.json',
      '--handler',
      'sbuild=run-sbuild -v',
      '--handler',
      'noop=true',
      '--provided-tag',
      'worker:cap:kvm',
      '--heartbeat-interval',
      '0.5',
      '--metadata-interval',
      '60',
      '--max-backoff',
      '2',
      '--request-timeout',
      '5',
      '--keepalive-interval',
      '1',
      '--log-level',
      'debug',
      '--memory-cgroup',
      'off',
      '--handler-memory-limit',
      '2048',
    ]);
    expect(c).toMatchObject({
      serverUrl: 'https://ci.example.org/graphql',
      wsUrl: 'wss://ci.example.org/graphql',
      token: 'tok',
      activationToken: 'act',
      name: 'arm-1',
      workDir: '/srv/agent/wd',
      stateFile: '/etc/tagsched/state.json',
      providedTags: ['worker:cap:kvm'],
      heartbeatIntervalMs: 500,
      metadataIntervalMs: 60_000,
      maxBackoffMs: 2000,
      requestTimeoutMs: 5000,
      keepAliveMs: 1000,
      logLevel: 'debug',
      memoryCgroup: 'off',
      handlerMemoryLimitBytes: 2048 * 2 ** 20,
    });
    expect([...c.handlers]).toEqual([
      ['sbuild', 'run-sbuild -v'],
      ['noop', 'true'],
    ]);
  });

  it('reads every option from its environment variable', () => {
    const c = parse([], {
      [ENV.server]: 'http://10.0.0.1:4000/graphql',
      [ENV.token]: 'tok',
      [ENV.activationToken]: 'act',
      [ENV.name]: 'n',
      [ENV.workDir]: '/var/lib/tagsched',
      [ENV.handler]: 'noop=true;sbuild=run-sbuild',
      [ENV.providedTag]: 'worker:cap:kvm, worker:bogomips=5000',
      [ENV.heartbeatInterval]: '10',
      [ENV.metadataInterval]: '20',
      [ENV.maxBackoff]: '3',
      [ENV.requestTimeout]: '4',
      [ENV.keepaliveInterval]: '6',
      [ENV.logLevel]: 'warn',
      [ENV.memoryCgroup]: 'off',
      [ENV.handlerMemoryLimit]: '64',
    });
    expect(c).toMatchObject({
      serverUrl: 'http://10.0.0.1:4000/graphql',
      token: 'tok',
      activationToken: 'act',
      name: 'n',
      workDir: '/var/lib/tagsched',
      stateFile: '/var/lib/tagsched/state.json',
      providedTags: ['worker:cap:kvm', 'worker:bogomips=5000'],
      heartbeatIntervalMs: 10_000,
      metadataIntervalMs: 20_000,
      maxBackoffMs: 3000,
      requestTimeoutMs: 4000,
      keepAliveMs: 6000,
      logLevel: 'warn',
      memoryCgroup: 'off',
      handlerMemoryLimitBytes: 64 * 2 ** 20,
    });
    expect(Object.fromEntries(c.handlers)).toEqual({ noop: 'true', sbuild: 'run-sbuild' });
  });

  it('lets a flag win over the environment, and adds repeatable flags to the variable', () => {
    const c = parse(['--token', 'from-flag', '--handler', 'noop=false', '--provided-tag', 'b'], {
      [ENV.token]: 'from-env',
      [ENV.handler]: 'noop=true\nsbuild=x',
      [ENV.providedTag]: 'a b',
    });
    expect(c.token).toBe('from-flag');
    expect(Object.fromEntries(c.handlers)).toEqual({ noop: 'false', sbuild: 'x' });
    expect(c.providedTags).toEqual(['a', 'b']);
  });

  it('treats an empty variable as unset', () => {
    expect(parse([], { [ENV.token]: '', [ENV.heartbeatInterval]: '' })).toMatchObject({
      token: null,
      heartbeatIntervalMs: 30_000,
    });
  });

  it.each<[string, string[], NodeJS.ProcessEnv, RegExp]>([
    [
      'a non-number interval',
      ['--heartbeat-interval', 'soon'],
      {},
      /--heartbeat-interval \(or TAGSCHED_HEARTBEAT_INTERVAL\) must be a positive number of seconds, got "soon"/,
    ],
    ['a zero interval', [], { [ENV.maxBackoff]: '0' }, /--max-backoff .* positive/],
    ['a negative timeout', ['--request-timeout', '-1'], {}, /--request-timeout/],
    ['a WebSocket URL as server', ['--server', 'ws://x/graphql'], {}, /must be an http:\/\/ or https:\/\/ URL/],
    ['a server that is no URL', [], { [ENV.server]: 'localhost:4000' }, /--server \(or TAGSCHED_SERVER_URL\)/],
    ['a handler without =', ['--handler', 'sbuild'], {}, /handler "sbuild" is not NAME=COMMAND/],
    ['a handler with an empty command', ['--handler', 'sbuild= '], {}, /not NAME=COMMAND/],
    ['a handler with a bad name', ['--handler', 'a b=true'], {}, /not NAME=COMMAND/],
    [
      'an invalid provided tag',
      ['--provided-tag', 'worker:memory-gib>=4'],
      {},
      /--provided-tag .*worker:memory-gib>=4/,
    ],
    ['an unknown log level', [], { [ENV.logLevel]: 'loud' }, /--log-level .* one of fatal, error/],
    [
      'an unknown memory cgroup mode',
      ['--memory-cgroup', 'v1'],
      {},
      /--memory-cgroup \(or TAGSCHED_MEMORY_CGROUP\) must be one of auto, off, got "v1"/,
    ],
    [
      'a memory limit in another unit',
      ['--handler-memory-limit', '2G'],
      {},
      /--handler-memory-limit \(or TAGSCHED_HANDLER_MEMORY_LIMIT\) must be a whole number of MiB/,
    ],
    ['a memory limit below 4 MiB', [], { [ENV.handlerMemoryLimit]: '3' }, /--handler-memory-limit .* from 4 to/],
    ['a huge memory limit', [], { [ENV.handlerMemoryLimit]: '1e400' }, /--handler-memory-limit/],
    ['a fractional memory limit', ['--handler-memory-limit', '64.5'], {}, /--handler-memory-limit/],
  ])('refuses %s with a message naming the option', (_name, argv, env, message) => {
    expect(() => parse(argv, env)).toThrow(UsageError);
    expect(() => parse(argv, env)).toThrow(message);
  });

  it('prints a help that names every variable, and exits 0', () => {
    const { error, out } = capture(['--help']);
    expect(error).toBeInstanceOf(CommanderError);
    expect((error as CommanderError).exitCode).toBe(0);
    for (const variable of Object.values(ENV)) expect(out).toContain(variable);
    expect(out).toContain('TAGSCHED_PARALLEL');
    expect(out).toMatch(/Exit codes:/);
  });

  it('prints the version', () => {
    const { error, out } = capture(['--version']);
    expect((error as CommanderError).exitCode).toBe(0);
    expect(out.trim()).toBe('9.9.9');
  });

  it('refuses an unknown flag with a non-zero exit code', () => {
    const { error, err } = capture(['--tokn', 'x']);
    expect((error as CommanderError).exitCode).not.toBe(0);
    expect(err).toMatch(/unknown option '--tokn'/);
  });
});

describe('TAGSCHED_HANDLERS', () => {
  it.each<[string, string, string[]]>([
    ['one entry', 'noop=true', ['noop=true']],
    ['";" between entries', 'noop=true;sbuild=run', ['noop=true', 'sbuild=run']],
    ['newlines between entries', 'noop=true\n  sbuild=run\n', ['noop=true', 'sbuild=run']],
    ['a ";" inside a command', 'sbuild=cd /srv; exec run;noop=true', ['sbuild=cd /srv; exec run', 'noop=true']],
    ['spaces after ";"', 'a=x; b=y', ['a=x', 'b=y']],
    ['nothing', '', []],
  ])('splits %s', (_name, value, entries) => {
    expect(splitHandlerList(value)).toEqual(entries);
  });

  it('keeps "=" inside a command and lets a later entry win', () => {
    expect(Object.fromEntries(parseHandlers(['sbuild=env A=1 run', 'noop=true', 'noop=false']))).toEqual({
      sbuild: 'env A=1 run',
      noop: 'false',
    });
  });
});
