/**
 * `tagsched-worker advise` (src/agent/advise.ts, advise-main.ts): the proposal for made-up hosts; the
 * real program run with --yes; the same program in a pseudo-terminal (tmux), its questions answered
 * one by one, a wrong answer asked again; and --register against a real server, the token written to
 * the file only.
 */
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  defaultAnswers,
  envFile,
  envValue,
  propose,
  QUESTIONS,
  type Answers,
  type HostFacts,
} from '../../src/agent/advise.js';
import { ADMIN, useFleet } from '../faults/harness.js';

const GIB = 2 ** 30;
const AGENT_BIN = path.resolve('bin/tagsched-worker.js');

const host = (over: Partial<HostFacts> = {}): HostFacts => ({
  hostname: 'build-7',
  cpuCount: 16,
  memoryBytes: 64 * GIB,
  disk: { dir: '/srv/tagsched', totalBytes: 1000 * GIB, freeBytes: 500 * GIB },
  kvm: true,
  native: ['amd64', 'i386'],
  emulated: ['arm64', 'armhf'],
  executors: ['unshare', 'qemu'],
  tools: ['sbuild', 'autopkgtest'],
  speed: { single: 3800, all: 41000, threads: 16 },
  handler: '/usr/lib/tagsched-worker/tagsched-handler.mjs',
  ...over,
});

describe('the proposal', () => {
  it('defaults: mixed work, VMs where KVM and a VM executor are, a CPU and a tenth of the memory kept for the host', () => {
    expect(defaultAnswers(host())).toEqual({
      jobs: 'mixed',
      vms: true,
      keepCpus: 1,
      keepMemoryGib: 4,
      keepDiskGib: 50,
    });
    expect(defaultAnswers(host({ kvm: false, cpuCount: 2, memoryBytes: 4 * GIB }))).toMatchObject({
      vms: false,
      keepCpus: 0,
      keepMemoryGib: 1,
    });
  });

  it.each<
    [
      string,
      Partial<HostFacts>,
      Partial<Answers>,
      { concurrency: number; parallel: number; memoryLimitMib: number; cacheGib: number },
    ]
  >([
    // 15 CPUs, 60 GiB, 450 GiB free less a 50 GiB cache; a mixed job in a VM takes 2 CPUs and 4 GiB: the CPUs decide.
    ['mixed in VMs', {}, {}, { concurrency: 7, parallel: 2, memoryLimitMib: 8777, cacheGib: 50 }],
    // builds take 4 CPUs each: 3 at once, -j5.
    [
      'builds without VMs',
      {},
      { jobs: 'builds', vms: false },
      { concurrency: 3, parallel: 5, memoryLimitMib: 20480, cacheGib: 50 },
    ],
    // 8 GiB less 1 kept: 7 GiB for tests of 2 GiB each, 3 at once on 8 CPUs less 1.
    [
      'a small tester',
      { cpuCount: 8, memoryBytes: 8 * GIB },
      { jobs: 'tests', vms: false, keepMemoryGib: 1 },
      { concurrency: 3, parallel: 2, memoryLimitMib: 2389, cacheGib: 50 },
    ],
    // 60 GiB free less 10 kept: a 10 GiB cache, 40 GiB for images of 30 GiB: one at a time.
    [
      'images on a small disk',
      { disk: { dir: '/w', totalBytes: 100 * GIB, freeBytes: 60 * GIB } },
      { jobs: 'images', vms: false, keepDiskGib: 10 },
      { concurrency: 1, parallel: 15, memoryLimitMib: 61440, cacheGib: 10 },
    ],
  ])('%s', (_name, over, answers, expected) => {
    const f = host(over);
    const p = propose(f, { ...defaultAnswers(f), ...answers });
    expect({
      concurrency: p.concurrency,
      parallel: p.parallel,
      memoryLimitMib: p.memoryLimitMib,
      cacheGib: p.cacheGib,
    }).toEqual(expected);
    expect(p.warnings).toEqual([]);
  });

  it('says what is short: memory for one job, a VM executor, the disk unknown', () => {
    const f = host({
      memoryBytes: 2 * GIB,
      executors: ['unshare'],
      disk: { dir: '/w', totalBytes: null, freeBytes: null },
    });
    const p = propose(f, { ...defaultAnswers(f), vms: true });
    expect(p.concurrency).toBe(1);
    expect(p.warnings.join('\n')).toMatch(/less than one mixed job takes \(4 GiB\)/);
    expect(p.warnings.join('\n')).toMatch(/no VM executor/);
    expect(p.warnings.join('\n')).toMatch(/free disk of \/w is unknown/);
  });

  it('reads answers: a kind of job, yes or no, whole numbers within the host; a VM without KVM is refused', () => {
    const f = host({ kvm: false });
    const q = Object.fromEntries(QUESTIONS.map((x) => [x.key, x]));
    expect(q.jobs.read('Builds', f)).toEqual({ value: 'builds' });
    expect(q.jobs.read('compile', f)).toEqual({ error: 'answer one of builds, tests, images, mixed' });
    expect(q.vms.read('yes', f)).toEqual({ error: expect.stringMatching(/no \/dev\/kvm/) });
    expect(q.vms.read('n', f)).toEqual({ value: false });
    expect(q.keepCpus.read('3', f)).toEqual({ value: 3 });
    expect(q.keepCpus.read('16', f)).toEqual({ error: 'answer a whole number of CPUs from 0 to 15' });
    expect(q.keepCpus.read('-1', f)).toMatchObject({ error: expect.any(String) });
    expect(q.keepMemoryGib.read('1e3', f)).toMatchObject({ error: expect.any(String) });
    expect(q.keepDiskGib.read('99999999999999999999', f)).toMatchObject({ error: expect.any(String) });
  });

  it('the environment file: the agent settings, the cache, the image handler for the tools it has, quoted for a shell', () => {
    const f = host();
    const a = defaultAnswers(f);
    const text = envFile(f, a, propose(f, a), { server: 'https://ci.example.org/graphql', now: new Date(0) });
    expect(text).toContain('TAGSCHED_SERVER_URL=https://ci.example.org/graphql\n');
    expect(text).toContain('TAGSCHED_HANDLER_MEMORY_LIMIT=8777\n');
    expect(text).toContain(
      "TAGSCHED_HANDLERS='sbuild=node /usr/lib/tagsched-worker/tagsched-handler.mjs sbuild;autopkgtest=node /usr/lib/tagsched-worker/tagsched-handler.mjs autopkgtest'\n",
    );
    expect(text).toContain('CCACHE_MAXSIZE=50G\n');
    expect(text).toContain('# register it (an admin): tagsched-admin worker register build-7 --concurrency 7');
    expect(text).toContain('# runs natively: amd64 i386; by emulation: arm64 armhf');
    expect(text).not.toContain('TAGSCHED_WORKER_TOKEN');
    // Sourced by a shell, every variable is what it says.
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'advise-')), 'worker.env');
    fs.writeFileSync(file, text);
    const shown = execFileSync('sh', [
      '-c',
      `set -a; . '${file}'; printf "%s\\n" "$TAGSCHED_HANDLERS" "$CCACHE_MAXSIZE"`,
    ]).toString();
    expect(shown).toBe(
      'sbuild=node /usr/lib/tagsched-worker/tagsched-handler.mjs sbuild;autopkgtest=node /usr/lib/tagsched-worker/tagsched-handler.mjs autopkgtest\n50G\n',
    );
    expect(envValue("it's")).toBe(`'it'\\''s'`);
  });
});

/** The environment of a child: this one's without TAGSCHED_* and npm's variables. */
const cleanEnv = (extra: Record<string, string> = {}) => {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env))
    if (v !== undefined && !k.startsWith('TAGSCHED_') && !k.startsWith('npm_')) env[k] = v;
  return { ...env, ...extra };
};

/** Runs `tagsched-worker advise ARGS` to its end, stdin closed. */
function advise(args: string[], env: Record<string, string> = {}) {
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = spawn(process.execPath, [AGENT_BIN, 'advise', ...args], {
      env: cleanEnv(env),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('tagsched-worker advise', () => {
  const f = useFleet();

  it('--yes asks nothing and prints the proposal for this host on stdout; bad usage exits 64 with nothing written', async () => {
    const r = await advise(['--yes', '--speed-test', '50', '--work-dir', path.join(f.dir, 'none-yet')]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^# tagsched-worker configuration proposed by `tagsched-worker advise` on /);
    expect(r.stdout).toMatch(/\n# host: \d+ CPUs, speed \d+ on one core and \d+ on \d+, \d+ GiB of memory/);
    expect(r.stdout).toMatch(/\n# answers: mixed, VMs (yes|no), kept for the host/);
    expect(r.stdout).toMatch(/\nTAGSCHED_HANDLER_MEMORY_LIMIT=\d+\n/);
    expect(r.stdout).not.toContain('?'); // no question was asked
    const file = path.join(f.dir, 'never.env');
    for (const bad of [
      ['--yes', '--speed-test', '5'],
      ['--yes', '--server', 'ftp://x'],
      ['--yes', '--register', 'w1'],
      ['--yes', '--register', 'w1', '--write', file],
      ['--yes', '--unknown'],
    ]) {
      const b = await advise(bad);
      expect(b.code, bad.join(' ')).toBe(64);
      expect(b.stdout).toBe('');
    }
    expect(fs.existsSync(file)).toBe(false);
  });

  it('in a terminal: each question with its default, a wrong answer asked again, the file written at the end', async () => {
    if (spawnSync('tmux', ['-V']).status !== 0) throw new Error('tmux is needed for this test (Debian package tmux)');
    const out = path.join(f.dir, 'asked.env');
    const session = `advise-${process.pid}`;
    const tmux = (...args: string[]) => execFileSync('tmux', args, { env: cleanEnv() }).toString();
    const screen = () => tmux('capture-pane', '-p', '-t', session, '-S', '-100');
    const waitFor = async (text: string | RegExp) => {
      for (let i = 0; i < 600; i++) {
        const s = screen();
        if (typeof text === 'string' ? s.includes(text) : text.test(s)) return s;
        await new Promise((r) => setTimeout(r, 50));
      }
      throw new Error(`not on the screen: ${text}\n${screen()}`);
    };
    const command = [process.execPath, AGENT_BIN, 'advise', '--speed-test', '0', '--work-dir', f.dir, '--write', out]
      .map((a) => `'${a}'`)
      .join(' ');
    tmux('new-session', '-d', '-s', session, '-x', '200', '-y', '50', `${command}; echo "exit=$?"; sleep 60`);
    try {
      await waitFor('What will this worker mostly run? (builds, tests, images, mixed) [mixed]:'); // tmux drops trailing spaces
      tmux('send-keys', '-t', session, 'compile', 'Enter');
      await waitFor('answer one of builds, tests, images, mixed');
      tmux('send-keys', '-t', session, 'tests', 'Enter');
      await waitFor(/Run each job in a virtual machine\? \(yes, no\) \[(yes|no)\]:/);
      tmux('send-keys', '-t', session, 'no', 'Enter');
      await waitFor(/CPUs to keep for the host \[\d+\]:/);
      tmux('send-keys', '-t', session, '0', 'Enter');
      await waitFor(/Memory to keep for the host, in GiB \[\d+\]:/);
      tmux('send-keys', '-t', session, '', 'Enter'); // the default
      await waitFor(/Disk to keep free in the work directory, in GiB \[\d+\]:/);
      tmux('send-keys', '-t', session, '3', 'Enter');
      const end = await waitFor(/exit=\d+/);
      expect(end).toContain(`Wrote ${out}.`);
      expect(end).toContain('exit=0');
    } finally {
      spawnSync('tmux', ['kill-session', '-t', session]);
    }
    const text = fs.readFileSync(out, 'utf8');
    expect(text).toMatch(/\n# answers: tests, VMs no, kept for the host: 0 CPUs, \d+ GiB of memory, 3 GiB of disk\n/);
    expect(fs.statSync(out).mode & 0o777).toBe(0o600);
    // Not over an existing file without --force.
    const again = await advise(['--yes', '--speed-test', '0', '--write', out]);
    expect(again.code).toBe(64);
    expect(again.stderr).toContain('exists: give --force to replace it');
    expect(fs.readFileSync(out, 'utf8')).toBe(text);
  }, 90_000);

  it('--register: the worker is registered with the proposed concurrency and the facts; its token is in the file only, and works', async () => {
    const server = await f.server();
    const out = path.join(f.dir, 'registered.env');
    const refused = await advise(
      ['--yes', '--speed-test', '50', '--server', server.url, '--register', 'adv-1', '--write', out],
      {
        TAGSCHED_TOKEN: 'tsk_user_not-a-real-token',
      },
    );
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('the server did not register adv-1');
    expect(fs.existsSync(out)).toBe(false);
    // A place that cannot be written is found before the registration, which then never happens; a file
    // given with --force is left as it was when the registration is refused; no partial file stays behind.
    const nowhere = await advise(
      [
        '--yes',
        '--speed-test',
        '0',
        '--server',
        server.url,
        '--register',
        'adv-1',
        '--write',
        path.join(f.dir, 'no', 'such', 'dir.env'),
      ],
      { TAGSCHED_TOKEN: ADMIN },
    );
    expect(nowhere.code).toBe(64);
    expect(nowhere.stderr).toContain('cannot write');
    const kept = path.join(f.dir, 'kept.env');
    fs.writeFileSync(kept, 'OLD=1\n');
    const refusedAgain = await advise(
      ['--yes', '--speed-test', '0', '--server', server.url, '--register', 'adv-1', '--write', kept, '--force'],
      { TAGSCHED_TOKEN: 'tsk_user_not-a-real-token' },
    );
    expect(refusedAgain.code).toBe(1);
    expect(fs.readFileSync(kept, 'utf8')).toBe('OLD=1\n');
    expect(fs.readdirSync(f.dir).filter((n) => n.endsWith('.tmp'))).toEqual([]);
    expect((await f.gql(server.url, `{ worker(name: "adv-1") { name } }`)).data?.worker).toBeNull();

    const r = await advise(
      ['--yes', '--speed-test', '50', '--server', server.url, '--register', 'adv-1', '--write', out],
      {
        TAGSCHED_TOKEN: ADMIN,
      },
    );
    expect(r.code, r.stderr).toBe(0);
    const text = fs.readFileSync(out, 'utf8');
    const token = /\nTAGSCHED_WORKER_TOKEN=(\S+)\n/.exec(text)?.[1];
    expect(token).toMatch(/^tsk_/);
    expect(r.stdout + r.stderr).not.toContain(token!);
    const concurrency = Number(/\n# (\d+) requests? at once/.exec(text)?.[1]);
    const w = await f.gql(server.url, `{ worker(name: "adv-1") { concurrency providedTags { tag provenance } } }`);
    expect(w.data?.worker.concurrency).toBe(concurrency);
    const tags = (w.data?.worker.providedTags as { tag: string; provenance: string }[]).map(
      (t) => `${t.tag} ${t.provenance}`,
    );
    expect(tags).toEqual(expect.arrayContaining([expect.stringMatching(/^worker:cpu-speed-all=\d+ ADMIN$/)]));
    // The token is the worker's: the server takes it (as rotate-token.test.ts checks a token), a wrong one not.
    expect((await f.gql(server.url, '{ tokens { id } }', {}, token)).status).toBe(200);
    expect((await f.gql(server.url, '{ tokens { id } }', {}, `${token}x`)).status).not.toBe(200);
  });
});
