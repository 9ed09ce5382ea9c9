/**
 * `tagsched-worker advise`: reads the host, asks its few questions on the terminal (on stderr, each
 * with its default shown; an empty line takes it), and prints the configuration it proposes as an environment
 * file (advise.ts holds the rules). `--yes` asks nothing and takes every default; `--write FILE`
 * writes the file instead of printing it; `--register NAME` registers the worker on the server with
 * the proposal's concurrency and the facts read (an admin's TAGSCHED_TOKEN), and puts its token in
 * that file only.
 */
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createInterface, type Interface } from 'node:readline/promises';
import { Command, CommanderError, Option } from 'commander';
import { postGraphql } from '../shared/graphql-post.js';
import { defaultAnswers, envFile, propose, QUESTIONS, type Answers, type HostFacts } from './advise.js';
import { detectFacts, parseArchTest, systemProbe, type Probe } from './facts.js';
import { measureSpeed, SPEED_TEST_DEFAULT_MS, SPEED_TEST_MAX_MS, type HostSpeed } from './speed.js';

/** Where an installed image handler is looked for: beside the running agent, then the image's place. */
const HANDLER_PLACES = (argv1: string | undefined) => [
  ...(argv1 ? [path.join(path.dirname(argv1), 'tagsched-handler.mjs')] : []),
  '/usr/lib/tagsched-worker/tagsched-handler.mjs',
];

/** The nearest directory of `dir` that exists (the work directory may not exist before the first start). */
function existingDir(dir: string): string {
  let d = path.resolve(dir);
  while (!fs.existsSync(d) && path.dirname(d) !== d) d = path.dirname(d);
  return d;
}

/** Reads the host: the agent's own facts, plus the disk's size, what runs by emulation and the speed. */
export async function readHost(
  probe: Probe,
  workDir: string,
  speed: HostSpeed | null,
  argv1: string | undefined,
): Promise<HostFacts> {
  const dir = existingDir(workDir);
  const facts = await detectFacts(probe, dir);
  let totalBytes: number | null = null;
  try {
    const s = await fsp.statfs(dir);
    totalBytes = s.blocks * s.bsize;
  } catch {
    totalBytes = null;
  }
  const runnable = (await probe.has('arch-test')) ? parseArchTest((await probe.output('arch-test', [])) ?? '') : [];
  const handler = HANDLER_PLACES(argv1).find((p) => fs.existsSync(p)) ?? null;
  return {
    hostname: os.hostname(),
    cpuCount: facts.cpuCount,
    memoryBytes: facts.totalPhysicalMemory,
    disk: { dir, totalBytes, freeBytes: facts.diskFree },
    kvm: await probe.exists('/dev/kvm'),
    native: facts.architectures,
    emulated: runnable.filter((a) => !facts.architectures.includes(a)),
    executors: facts.executors,
    tools: facts.tools,
    speed,
    handler,
  };
}

/** Asks each question on `rl`; an empty line (or the end of the input) takes the default. */
async function ask(rl: Interface, f: HostFacts, prompts: NodeJS.WritableStream): Promise<Answers> {
  const answers: Record<string, unknown> = { ...defaultAnswers(f) };
  let ended = false;
  rl.once('close', () => (ended = true));
  for (const q of QUESTIONS) {
    for (;;) {
      if (ended) break;
      const shown = (q.shown as (v: unknown) => string)(answers[q.key]);
      let line: string;
      try {
        line = await rl.question(`${q.text} [${shown}]: `);
      } catch {
        ended = true; // the input ended: the defaults stand
        break;
      }
      if (!line.trim()) break;
      const r = q.read(line, f);
      if ('value' in r) {
        answers[q.key] = r.value;
        break;
      }
      prompts.write(`  ${r.error}\n`);
    }
  }
  return answers as unknown as Answers;
}

const REGISTER = `mutation Register($input: RegisterWorkerInput!) {
  registerWorker(input: $input) {
    __typename
    ... on WorkerTokenPayload { token worker { name } }
    ... on Error { message }
  }
}`;

/** Registers the worker with the proposal's concurrency and the facts as its static metadata; its token. */
async function register(
  server: string,
  adminToken: string,
  name: string,
  f: HostFacts,
  concurrency: number,
): Promise<string> {
  const { status, body } = await postGraphql({
    url: server,
    token: adminToken,
    query: REGISTER,
    variables: {
      input: {
        name,
        concurrency,
        staticMetadata: {
          architectures: f.native,
          cpuCount: f.cpuCount,
          totalPhysicalMemory: f.memoryBytes,
          ...(f.disk.freeBytes === null ? {} : { diskFree: f.disk.freeBytes }),
          ...(f.speed ? { cpuSpeed: f.speed.single, cpuSpeedAll: f.speed.all } : {}),
        },
      },
    },
    timeoutMs: 30_000,
  });
  const b = body as { data?: { registerWorker?: unknown }; errors?: { message: string }[] } | null;
  const r = b?.data?.registerWorker as { __typename?: string; token?: string; message?: string } | undefined;
  if (r?.__typename === 'WorkerTokenPayload') return String(r.token);
  const why = r?.message ?? b?.errors?.map((e) => e.message).join('; ') ?? `HTTP ${status}`;
  throw new Error(`the server did not register ${name}: ${why}`);
}

/** The advisor's program; returns its exit code (0, or 64 for bad usage, 1 for a failure). */
export async function advise(
  argv: readonly string[],
  env: NodeJS.ProcessEnv,
  io: { input: NodeJS.ReadableStream; output: NodeJS.WritableStream; error: NodeJS.WritableStream; argv1?: string },
): Promise<number> {
  const program = new Command('tagsched-worker advise')
    .description(
      "Reads this host (CPUs, memory, disk, KVM, architectures, tools, speed), asks a few questions and proposes the worker's configuration as an environment file.",
    )
    .helpOption('-h, --help', 'show this help and exit')
    .exitOverride()
    .configureOutput({ writeOut: (s) => io.output.write(s), writeErr: (s) => io.error.write(s) })
    .option('-y, --yes', 'ask nothing: take every default')
    .option('--write <file>', 'write the environment file there (not over an existing file without --force)')
    .option('--force', 'with --write: replace an existing file')
    .addOption(
      new Option('--work-dir <dir>', 'where the worker keeps its runs: its disk is measured')
        .env('TAGSCHED_WORK_DIR')
        .default('./.tagsched-worker'),
    )
    .addOption(
      new Option('--server <url>', 'the GraphQL endpoint the worker uses')
        .env('TAGSCHED_SERVER_URL')
        .default('http://127.0.0.1:4000/graphql'),
    )
    .option(
      '--register <name>',
      "register the worker under this name (an admin's TAGSCHED_TOKEN); its token goes into --write's file only",
    )
    .addOption(
      new Option('--speed-test <ms>', `the CPU benchmark's time, 0 for none (at most ${SPEED_TEST_MAX_MS})`).default(
        String(SPEED_TEST_DEFAULT_MS),
      ),
    );
  try {
    program.parse([...argv], { from: 'user' });
  } catch (err) {
    if (err instanceof CommanderError) return err.exitCode === 0 ? 0 : 64;
    throw err;
  }
  const o = program.opts<{
    yes?: boolean;
    write?: string;
    force?: boolean;
    workDir: string;
    server: string;
    register?: string;
    speedTest: string;
  }>();
  const usage = (message: string) => {
    io.error.write(`tagsched-worker advise: ${message}\n`);
    return 64;
  };
  const speedMs = Number(o.speedTest);
  if (!/^\d+$/.test(o.speedTest) || speedMs > SPEED_TEST_MAX_MS || (speedMs > 0 && speedMs < 30))
    return usage(`--speed-test must be 0 or a whole number of milliseconds from 30 to ${SPEED_TEST_MAX_MS}`);
  if (!/^https?:\/\//.test(o.server))
    return usage(`--server must be an http:// or https:// URL, got ${JSON.stringify(o.server)}`);
  if (o.register !== undefined && !o.write)
    return usage('--register needs --write: the worker token is written to that file, never printed');
  const adminToken = env.TAGSCHED_TOKEN ?? '';
  if (o.register !== undefined && !adminToken) return usage("--register needs an admin's token in TAGSCHED_TOKEN");
  if (o.write && !o.force && fs.existsSync(o.write)) return usage(`${o.write} exists: give --force to replace it`);
  // A new file beside the one asked for is opened before anything else is done, so that a registration
  // never loses its token to a place that cannot be written. It replaces that file once the proposal is
  // in it, and is removed otherwise: a file given with --force is left as it was.
  const partial = o.write ? path.join(path.dirname(o.write), `.${path.basename(o.write)}.${process.pid}.tmp`) : null;
  let file: number | null = null;
  if (partial) {
    try {
      file = fs.openSync(partial, 'wx', 0o600);
    } catch (err) {
      return usage(`cannot write ${o.write}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
  }
  let r: { code: number; wrote: boolean; token: boolean } = { code: 1, wrote: false, token: false };
  try {
    r = await proposal(o, io, env, adminToken, speedMs, file);
  } finally {
    if (file !== null) fs.closeSync(file);
    if (partial && !r.wrote) fs.rmSync(partial, { force: true });
  }
  if (partial && o.write && r.wrote) {
    fs.renameSync(partial, o.write);
    io.output.write(`Wrote ${o.write}${r.token ? ' (it holds the worker token: mode 0600)' : ''}.\n`);
  }
  return r.code;
}

/** advise() past its checks: reads the host, asks, registers if asked to, and writes the proposal to `file` or prints it. */
async function proposal(
  o: { yes?: boolean; write?: string; server: string; workDir: string; register?: string },
  io: { input: NodeJS.ReadableStream; output: NodeJS.WritableStream; error: NodeJS.WritableStream; argv1?: string },
  env: NodeJS.ProcessEnv,
  adminToken: string,
  speedMs: number,
  file: number | null,
): Promise<{ code: number; wrote: boolean; token: boolean }> {
  io.error.write('Reading this host');
  const speed = speedMs > 0 ? await measureSpeed({ budgetMs: speedMs, threads: os.availableParallelism() }) : null;
  const facts = await readHost(systemProbe(env), o.workDir, speed, io.argv1);
  io.error.write(' … done.\n');

  let answers: Answers;
  if (o.yes) answers = defaultAnswers(facts);
  else {
    // The questions go to stderr, so that the proposal alone is on stdout (`advise > worker.env`).
    const rl = createInterface({
      input: io.input,
      output: io.error,
      terminal: (io.input as { isTTY?: boolean }).isTTY === true,
    });
    try {
      answers = await ask(rl, facts, io.error);
    } finally {
      rl.close();
    }
  }
  const proposed = propose(facts, answers);
  let token: string | undefined;
  if (o.register !== undefined) {
    try {
      token = await register(o.server, adminToken, o.register, facts, proposed.concurrency);
    } catch (err) {
      io.error.write(`tagsched-worker advise: ${(err as Error).message}\n`);
      return { code: 1, wrote: false, token: false };
    }
  }
  const text = envFile(facts, answers, proposed, { server: o.server, now: new Date(), name: o.register, token });
  if (file !== null) {
    fs.writeSync(file, text);
    fs.fsyncSync(file);
    return { code: 0, wrote: true, token: token !== undefined };
  }
  io.output.write(text);
  return { code: 0, wrote: false, token: false };
}
