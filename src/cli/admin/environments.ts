/** Environments: what executor tasks run in (one architecture each); work requests name them by id. */
import type { Command } from 'commander';
import { ERROR_SELECTION } from './client.js';
import { renderTable } from './output.js';
import type { Ctx, Register } from './command-context.js';

interface EnvironmentRow {
  id: string;
  codename: string;
  architecture: string;
  variant: string | null;
  backend: string | null;
  imageFormat: string | null;
}

const FIELDS = 'id codename architecture variant backend imageFormat';
const ENVIRONMENTS = `query Environments { environments { ${FIELDS} } }`;
const CREATE = `mutation CreateEnvironment($input: CreateEnvironmentInput!, $key: String) {
  createEnvironment(input: $input, idempotencyKey: $key) { ${ERROR_SELECTION} ... on Environment { ${FIELDS} } }
}`;

async function create(
  ctx: Ctx,
  codename: string,
  architecture: string,
  opts: { variant?: string; backend?: string; imageFormat?: string; idempotencyKey?: string },
) {
  const input = {
    codename,
    architecture,
    variant: opts.variant ?? null,
    backend: opts.backend ?? null,
    imageFormat: opts.imageFormat ?? null,
  };
  const data = await ctx.api().mutate(CREATE, { input, key: opts.idempotencyKey ?? null }, 'createEnvironment');
  if (ctx.out.json) return ctx.out.writeJson(data);
  const e = data.createEnvironment as EnvironmentRow;
  ctx.out.line(`Created environment ${e.id}: ${e.codename}/${e.architecture}${e.variant ? ` (${e.variant})` : ''}.`);
}

async function listEnvironments(ctx: Ctx) {
  const data = await ctx.api().query<{ environments: EnvironmentRow[] }>(ENVIRONMENTS);
  if (ctx.out.json) return ctx.out.writeJson(data);
  ctx.out.write(
    renderTable(ctx.out, data.environments, [
      { header: 'ID', value: (e) => e.id, align: 'right' },
      { header: 'CODENAME', value: (e) => e.codename },
      { header: 'ARCH', value: (e) => e.architecture },
      { header: 'VARIANT', value: (e) => e.variant },
      { header: 'BACKEND', value: (e) => e.backend },
      { header: 'FORMAT', value: (e) => e.imageFormat },
    ]),
  );
}

export const registerEnvironmentCommands: Register = (program: Command, action) => {
  const env = program.command('environment').description('Build environments (one architecture each)');
  action(
    env
      .command('create <codename> <architecture>')
      .description('Registers an environment (admins)')
      .option('--variant <variant>', 'e.g. sbuild, autopkgtest')
      .option('--backend <backend>', 'unshare, incus-lxc, incus-vm or qemu')
      .option('--image-format <format>', 'e.g. tarball, qcow2')
      .option('--idempotency-key <key>', 'a retry with the same key answers the first create')
      .addHelpText(
        'after',
        '\nExamples:\n  tagsched-admin environment create trixie arm64 --variant sbuild --backend unshare',
      ),
    (ctx, [codename, architecture], opts) => create(ctx, codename, architecture, opts),
  );
  action(
    env
      .command('list')
      .description('Lists the environments')
      .addHelpText('after', '\nExamples:\n  tagsched-admin environment list'),
    (ctx) => listEnvironments(ctx),
  );
};
