import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { envelop, useEngine, useSchema } from '@envelop/core';
import * as graphql from 'graphql';
import { describe, expect, it } from 'vitest';
import { DOCUMENTS } from '../../src/agent/operations.js';
import { loadConfig } from '../../src/core/config/config.js';
import { GRAPHIQL_EXAMPLES } from '../../src/api/graphiql-examples.js';
import { operationCost } from '../../src/api/limits/cost.js';
import { graphqlLimitPlugins } from '../../src/api/limits/graphql.js';
import { createLogger } from '../../src/core/log.js';
import { schema } from '../../src/api/schema.js';

// Issue 21, item 1, the other way round: what the agent and tagsched-admin send and what the docs and
// GraphiQL show passes the default limits. Each operation goes through the server's own limit plugins
// (tokens while parsing; depth, aliases, directives while validating) and its cost estimate, without
// running it. The status pages are not here: they read the database through the services, not GraphQL.
const ROOT = path.resolve(import.meta.dirname, '../..');
const config = loadConfig({});
const settings = { maxBatchRequests: config.input.maxBatchRequests };
const getEnveloped = envelop({
  plugins: [useEngine(graphql), useSchema(schema), ...graphqlLimitPlugins(config, createLogger('silent'))],
});

/** The refusals of the default limits for one document (empty: it passes), and its cost. */
function check(source: string, variables: Record<string, unknown> = {}): { refusals: string[]; cost: number } {
  const { parse, validate, schema: s } = getEnveloped({});
  let document: graphql.DocumentNode;
  try {
    document = parse(source);
  } catch (err) {
    return { refusals: [(err as Error).message], cost: 0 };
  }
  const refusals = validate(s, document).map((e: graphql.GraphQLError) => e.message);
  let cost = 0;
  for (const op of document.definitions) {
    if (op.kind !== graphql.Kind.OPERATION_DEFINITION) continue;
    const c = operationCost(
      s,
      document,
      { ...variablesFor(document, op.name?.value), ...variables },
      op.name?.value,
      settings,
    );
    cost = Math.max(cost, c);
    if (c > config.limits.maxCost)
      refusals.push(`${op.name?.value ?? 'anonymous'} costs ${c} > ${config.limits.maxCost}`);
  }
  return { refusals, cost };
}

/**
 * The string constants of the modules (backquoted or quoted) and their `${NAME}`s resolved: a name of
 * the same module first, else the one module that exports it.
 */
function templates(files: string[]): Map<string, string> {
  const raw = new Map<string, Map<string, string>>();
  const decl = /(?:const|let)\s+([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(?:`([^`]*)`|'([^'\n]*)')/g;
  for (const file of files) {
    const names = new Map<string, string>();
    for (const m of readFileSync(file, 'utf8').matchAll(decl)) names.set(m[1]!, m[2] ?? m[3]!);
    raw.set(path.basename(file), names);
  }
  const lookup = (file: string, name: string): string | undefined => {
    const own = raw.get(file)!.get(name);
    if (own !== undefined) return own;
    const others = [...raw.values()].map((n) => n.get(name)).filter((v) => v !== undefined);
    return others.length === 1 ? others[0] : undefined;
  };
  const resolve = (file: string, text: string, depth = 0): string =>
    text.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (whole, name: string) => {
      const found = depth < 5 ? lookup(file, name) : undefined;
      return found === undefined ? whole : resolve(file, found, depth + 1);
    });
  const out = new Map<string, string>();
  for (const [file, names] of raw) for (const [name, text] of names) out.set(`${file}:${name}`, resolve(file, text));
  return out;
}

/** Variables of the right types for an operation (the cost reads list lengths and `first`s; these are empty and absent). */
function variablesFor(document: graphql.DocumentNode, operationName: string | undefined): Record<string, unknown> {
  const value = (type: graphql.GraphQLInputType): unknown => {
    if (graphql.isNonNullType(type)) return value(type.ofType);
    if (graphql.isListType(type)) return [];
    if (graphql.isEnumType(type)) return type.getValues()[0]!.value;
    if (graphql.isInputObjectType(type)) {
      const out: Record<string, unknown> = {};
      for (const f of Object.values(type.getFields()))
        if (graphql.isNonNullType(f.type) && f.defaultValue === undefined) out[f.name] = value(f.type);
      return out;
    }
    return (
      { ID: '1', String: 'x', Int: 1, Float: 1, Boolean: true, DateTime: new Date(0).toISOString() }[type.name] ?? {}
    );
  };
  const op = document.definitions.find(
    (d): d is graphql.OperationDefinitionNode =>
      d.kind === graphql.Kind.OPERATION_DEFINITION && d.name?.value === operationName,
  );
  const out: Record<string, unknown> = {};
  for (const v of op?.variableDefinitions ?? []) {
    if (v.type.kind !== graphql.Kind.NON_NULL_TYPE) continue;
    out[v.variable.name.value] = value(graphql.typeFromAST(schema, v.type) as graphql.GraphQLInputType);
  }
  return out;
}

const operationText = /^\s*(query|mutation|subscription)\b/;

function cliOperations(): [string, string][] {
  const dir = path.join(ROOT, 'src/cli/admin');
  const files = readdirSync(dir)
    .filter((f) => f.endsWith('.ts'))
    .map((f) => path.join(dir, f));
  const ops: [string, string][] = [];
  // workers.ts builds one mutation per switch (enable, disable, drain, …) from the field's name.
  const switches = [...readFileSync(path.join(dir, 'workers.ts'), 'utf8').matchAll(/field: '([A-Za-z]+)'/g)].map(
    (m) => m[1]!,
  );
  for (const [key, text] of templates(files)) {
    if (!operationText.test(text)) continue;
    if (text.includes('${field}')) {
      for (const field of switches) ops.push([`${key}(${field})`, text.replaceAll('${field}', field)]);
    } else ops.push([key, text]);
  }
  return ops;
}

function markdownFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? markdownFiles(p) : e.name.endsWith('.md') ? [p] : [];
  });
}

function docOperations(): [string, string][] {
  const ops: [string, string][] = [];
  for (const file of [path.join(ROOT, 'README.md'), ...markdownFiles(path.join(ROOT, 'docs'))]) {
    const text = readFileSync(file, 'utf8');
    let i = 0;
    for (const m of text.matchAll(/```graphql\n([\s\S]*?)```/g)) {
      i++;
      if (
        /^\s*(type|input|enum|union|interface|scalar|schema|extend|directive)\b/m.test(m[1]!) &&
        !operationText.test(m[1]!)
      )
        continue; // SDL, not an operation
      // A block may show several operations, each sent on its own.
      if (m[1]!.includes('…')) continue; // an illustration with elisions, not an operation to send
      const doc = graphql.parse(m[1]!);
      const fragments = doc.definitions.filter((d) => d.kind === graphql.Kind.FRAGMENT_DEFINITION);
      for (const op of doc.definitions.filter((d) => d.kind === graphql.Kind.OPERATION_DEFINITION)) {
        ops.push([
          `${path.relative(ROOT, file)} block ${i}`,
          graphql.print({ kind: graphql.Kind.DOCUMENT, definitions: [op, ...fragments] }),
        ]);
      }
    }
  }
  return ops;
}

describe('every documented operation passes the default limits', () => {
  it('the agent’s operations', () => {
    const entries = Object.entries(DOCUMENTS);
    expect(entries.length).toBeGreaterThan(5);
    const refused = entries.map(([name, doc]) => [name, check(doc).refusals] as const).filter(([, r]) => r.length);
    expect(refused).toEqual([]);
  });

  it('tagsched-admin’s operations, none left unresolved', () => {
    const ops = cliOperations();
    expect(ops.length).toBeGreaterThan(40);
    const unresolved = ops.filter(([, text]) => text.includes('${')).map(([key]) => key);
    expect(unresolved).toEqual([]);
    const refused = ops.map(([name, doc]) => [name, check(doc).refusals] as const).filter(([, r]) => r.length);
    expect(refused).toEqual([]);
  });

  it('the GraphQL examples of README.md and docs/, and GraphiQL’s', () => {
    const ops = [...docOperations(), ['graphiql-examples.ts', GRAPHIQL_EXAMPLES] as [string, string]];
    expect(ops.length).toBeGreaterThan(5);
    const refused = ops.map(([name, doc]) => [name, check(doc).refusals] as const).filter(([, r]) => r.length);
    expect(refused).toEqual([]);
  });

  it('candidates for 1,000 requests with 20 worker names each, as the benchmark asks, pass', () => {
    const bench = readFileSync(path.join(ROOT, 'bench/measure.ts'), 'utf8').match(/CANDIDATES_QUERY = `([^`]*)`/)![1]!;
    const ids = Array.from({ length: 1000 }, (_, i) => String(i + 1));
    const { refusals, cost } = check(bench, { ids });
    expect(refusals).toEqual([]);
    expect(cost).toBeGreaterThan(10_000); // 1,000 requests are costed, not one
  });

  it('the probe of issue 21, rules of a workspace nested 6 deep, is refused by the cost', () => {
    const nest = (n: number): string => (n === 0 ? 'name' : `rules { name workspace { ${nest(n - 1)} } }`);
    const { refusals, cost } = check(`query Probe { workspaces { ${nest(6)} } }`);
    expect(cost).toBeGreaterThan(1_000_000 * config.limits.maxCost);
    expect(refusals).toEqual([expect.stringMatching(/^Probe costs \d+ > 20000$/)]);
  });
});
