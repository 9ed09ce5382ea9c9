/**
 * Task rules: tags added to the work requests a rule matches (by task name and/or a tag
 * expression). With --workspace, a workspace rule (admins and owners); without, a site rule (admins).
 */
import type { Command } from 'commander';
import { collect, items } from './arguments.js';
import { ERROR_SELECTION } from './client.js';
import { AdminError, EXIT, usageError } from './exit-codes.js';
import { list, renderTable, type Output } from './output.js';
import type { Ctx, Register } from './command-context.js';

/** The fields of a rule shown in lists. */
export const RULE_FIELDS = 'name taskName expression providedTags requiredTags workspace { name }';

/** A rule as RULE_FIELDS selects it. */
export interface RuleRow {
  name: string;
  taskName: string | null;
  expression: string | null;
  providedTags: string[];
  requiredTags: string[];
  workspace: { name: string } | null;
}

/** Rules as a table. */
export function ruleTable(out: Output, rules: readonly RuleRow[]): string {
  return renderTable(out, rules, [
    { header: 'NAME', value: (r) => r.name },
    { header: 'TASK', value: (r) => r.taskName ?? 'any' },
    { header: 'WHEN', value: (r) => r.expression ?? 'always', shrink: true },
    { header: 'PROVIDES', value: (r) => list(r.providedTags), shrink: true },
    { header: 'REQUIRES', value: (r) => list(r.requiredTags), shrink: true },
  ]);
}

const CREATE = `mutation CreateTaskRule($input: CreateTaskRuleInput!) { createTaskRule(input: $input) { ${ERROR_SELECTION} ... on TaskRule { ${RULE_FIELDS} } } }`;
const DELETE = `mutation DeleteTaskRule($input: DeleteTaskRuleInput!) { deleteTaskRule(input: $input) { ${ERROR_SELECTION} ... on TaskRule { ${RULE_FIELDS} } } }`;
const SITE_RULES = `query SiteRules { siteRules { ${RULE_FIELDS} } }`;
const WORKSPACE_RULES = `query WorkspaceRules($name: String!) { workspace(name: $name) { name rules { ${RULE_FIELDS} } } }`;

async function add(
  ctx: Ctx,
  name: string,
  opts: { workspace?: string; task?: string; when?: string; provide?: string[]; require?: string[] },
) {
  const providedTags = items(opts.provide);
  const requiredTags = items(opts.require);
  if (!providedTags.length && !requiredTags.length)
    throw usageError('a rule adds tags: give --provide and/or --require');
  const input = {
    name,
    workspace: opts.workspace ?? null,
    taskName: opts.task ?? null,
    expression: opts.when ?? null,
    providedTags,
    requiredTags,
  };
  const data = await ctx.api().mutate(CREATE, { input }, 'createTaskRule');
  if (ctx.out.json) return ctx.out.writeJson(data);
  const r = data.createTaskRule as RuleRow;
  ctx.out.line(`Created ${r.workspace ? `rule ${r.name} of ${r.workspace.name}` : `site rule ${r.name}`}.`);
}

async function remove(ctx: Ctx, name: string, opts: { workspace?: string }) {
  const data = await ctx.api().mutate(DELETE, { input: { name, workspace: opts.workspace ?? null } }, 'deleteTaskRule');
  if (ctx.out.json) return ctx.out.writeJson(data);
  const r = data.deleteTaskRule as RuleRow;
  ctx.out.line(
    `Removed ${r.workspace ? `rule ${r.name} of ${r.workspace.name}` : `site rule ${r.name}`}; work requests created from now on no longer get its tags.`,
  );
}

async function listRules(ctx: Ctx, opts: { workspace?: string }) {
  let data: unknown;
  let rules: RuleRow[];
  if (opts.workspace) {
    const answer = await ctx
      .api()
      .query<{ workspace: { name: string; rules: RuleRow[] } | null }>(WORKSPACE_RULES, { name: opts.workspace });
    const ws = answer.workspace;
    if (!ws)
      throw new AdminError(
        `no workspace named ${JSON.stringify(opts.workspace)} (or you may not see it)`,
        EXIT.notFound,
        'NOT_FOUND',
      );
    data = { workspace: ws };
    rules = ws.rules;
  } else {
    const answer = await ctx.api().query<{ siteRules: RuleRow[] }>(SITE_RULES);
    data = answer;
    rules = answer.siteRules;
  }
  if (ctx.out.json) return ctx.out.writeJson(data);
  ctx.out.write(ruleTable(ctx.out, rules));
}

export const registerRuleCommands: Register = (program: Command, action) => {
  const rule = program.command('rule').description('Task rules: tags added to the work requests they match');
  action(
    rule
      .command('add <name>')
      .description('Adds a rule: a workspace rule with --workspace (admins and owners), else a site rule (admins)')
      .option('--workspace <scope/name>', 'the workspace it applies to (default: the site)')
      .option('--task <name>', 'only work requests of this task')
      .option(
        '--when <expression>',
        'only when the tags match, e.g. "task:source-package:linux or task:source-package:libreoffice"',
      )
      .option('--provide <tag>', 'a task-provided tag to add (repeatable)', collect)
      .option('--require <tag>', 'a task-required tag to add (repeatable)', collect)
      .addHelpText(
        'after',
        `
Examples:
  tagsched-admin rule add big-packages --workspace debian/main \\
    --when 'task:source-package:linux or task:source-package:libreoffice' --require worker:class:large
  tagsched-admin rule add lintian-anywhere --task lintian --require worker:executor:unshare`,
      ),
    (ctx, [name], opts) => add(ctx, name, opts),
  );
  action(
    rule
      .command('remove <name>')
      .description('Removes a rule: a workspace rule with --workspace (admins and owners), else a site rule (admins)')
      .option('--workspace <scope/name>', 'the workspace of the rule (default: the site)')
      .addHelpText(
        'after',
        '\nExamples:\n  tagsched-admin rule remove big-packages --workspace debian/main\n  tagsched-admin rule remove lintian-anywhere',
      ),
    (ctx, [name], opts) => remove(ctx, name, opts),
  );
  action(
    rule
      .command('list')
      .description("Lists the site rules, or a workspace's rules")
      .option('--workspace <scope/name>', "the workspace's rules")
      .addHelpText(
        'after',
        '\nExamples:\n  tagsched-admin rule list\n  tagsched-admin rule list --workspace debian/main',
      ),
    (ctx, _a, opts) => listRules(ctx, opts),
  );
};
