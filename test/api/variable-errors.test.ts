/**
 * A value graphql-js refuses in the variables (an Int of 1e12, -1e12, 1.5 or "x"; a Float of "x") gets
 * an error with a code naming its variable, as every other bad value does (issue 31, finding 9): the
 * sweep covers every Int and Float input of every root field, found by walking the schema.
 */
import {
  GraphQLFloat,
  GraphQLInt,
  isInputObjectType,
  isListType,
  isNonNullType,
  isScalarType,
  getNamedType,
  isCompositeType,
  type GraphQLField,
  type GraphQLInputType,
  type GraphQLObjectType,
} from 'graphql';
import { beforeAll, describe, expect, it } from 'vitest';
import { schema } from '../../src/api/schema.js';
import { useTestApp } from '../helpers/app.js';
import { ERROR_FIELDS, snapshot } from '../helpers/fixtures.js';
import { collect, wsClient } from '../helpers/ws.js';

const t = useTestApp();

/** One Int or Float inside an argument: its path in the argument, and the argument's value holding `bad` there. */
interface Leaf {
  readonly path: string;
  readonly scalar: 'Int' | 'Float';
  readonly value: (bad: unknown) => unknown;
}

/** Every Int and Float reachable in an input type (each input type once per branch: no cycles). */
function leaves(type: GraphQLInputType, seen: ReadonlySet<string> = new Set()): Leaf[] {
  if (isNonNullType(type)) return leaves(type.ofType, seen);
  if (isListType(type))
    return leaves(type.ofType, seen).map((l) => ({ ...l, path: `[0]${l.path}`, value: (bad) => [l.value(bad)] }));
  if (isScalarType(type))
    return type === GraphQLInt || type === GraphQLFloat
      ? [{ path: '', scalar: type.name as 'Int' | 'Float', value: (bad) => bad }]
      : [];
  if (!isInputObjectType(type) || seen.has(type.name)) return [];
  const inner = new Set([...seen, type.name]);
  return Object.values(type.getFields()).flatMap((f) =>
    leaves(f.type, inner).map((l) => ({
      ...l,
      path: `.${f.name}${l.path}`,
      value: (bad: unknown) => ({ [f.name]: l.value(bad) }),
    })),
  );
}

/** Values graphql-js refuses for each scalar (1e12, -1e12 and 1.5 are Floats: their bounds are the resolvers', with an InputError naming the field). */
const BAD: Record<Leaf['scalar'], unknown[]> = { Int: [1e12, -1e12, 1.5, 'x'], Float: ['x', true] };

interface Case {
  readonly name: string;
  readonly query: string;
  readonly variables: Record<string, unknown>;
  /** How the message names the bad value: `"v.input.maxLaunchesPerMinute"`, or `"$v"` for the argument itself. */
  readonly names: string;
}

/** A case for every bad value of every Int and Float of every argument of every root field. */
function cases(): Case[] {
  const out: Case[] = [];
  const roots: [string, GraphQLObjectType | null | undefined][] = [
    ['query', schema.getQueryType()],
    ['mutation', schema.getMutationType()],
    ['subscription', schema.getSubscriptionType()],
  ];
  for (const [operation, root] of roots) {
    for (const field of Object.values(root?.getFields() ?? {}) as GraphQLField<unknown, unknown>[]) {
      for (const arg of field.args) {
        // The field's other required arguments as variables too (not given: refused as well, with the same code).
        const others = field.args.filter((a) => a !== arg && isNonNullType(a.type) && a.defaultValue === undefined);
        const definitions = [`$v: ${String(arg.type)}`, ...others.map((a, i) => `$o${i}: ${String(a.type)}`)].join(
          ', ',
        );
        const args = [`${arg.name}: $v`, ...others.map((a, i) => `${a.name}: $o${i}`)].join(', ');
        const selection = isCompositeType(getNamedType(field.type)) ? '{ __typename }' : '';
        for (const leaf of leaves(arg.type)) {
          for (const bad of BAD[leaf.scalar]) {
            out.push({
              name: `${field.name}(${arg.name}${leaf.path}: ${JSON.stringify(bad)})`,
              query: `${operation}(${definitions}) { ${field.name}(${args}) ${selection} }`,
              variables: { v: leaf.value(bad) },
              names: leaf.path ? `at "v${leaf.path}"` : 'Variable "$v" got invalid value',
            });
          }
        }
      }
    }
  }
  return out;
}

let before: Record<string, string>;
let url: string;
beforeAll(async () => {
  ({ url } = await t.app.start());
  before = await snapshot(t);
});

describe('a value out of range in the variables gets a coded error naming it', () => {
  it('every Int and Float of every root field, with 1e12, -1e12, 1.5 and "x" (Int) or "x" and true (Float): INVALID_INPUT naming the variable and the path, nothing run', async () => {
    const all = cases();
    const names = all.map((c) => c.name);
    expect(names).toContain('createWorkerPool(input.maxInstanceLifetimeSeconds: 1000000000000)');
    expect(names).toContain('updateWorkerPool(input.maxLaunchesPerMinute: 1000000000000)');
    expect(names).toContain('workers(first: 1000000000000)');
    expect(names.length).toBeGreaterThan(200);
    const wrong: string[] = [];
    for (const c of all) {
      const r = await t.gql(c.query, c.variables);
      const errors = r.errors ?? [];
      const named = errors.find((e) => e.message.includes(c.names));
      const ok =
        r.status < 500 &&
        !r.data &&
        errors.length > 0 &&
        errors.every((e) => e.extensions?.code === 'INVALID_INPUT') &&
        named?.extensions?.variable === 'v';
      if (!ok) wrong.push(`${c.name}: ${r.status} ${JSON.stringify(r.errors ?? r.data)}`);
    }
    expect(wrong).toEqual([]);
    expect(await snapshot(t)).toEqual(before);
  });

  it('the issue’s two fields: the variable’s error names the field and carries a code, as the same value written in the document does', async () => {
    const query = `mutation($i: WorkerPoolInput!) { createWorkerPool(input: $i) { __typename ${ERROR_FIELDS} } }`;
    for (const field of ['maxInstanceLifetimeSeconds', 'maxLaunchesPerMinute']) {
      const r = await t.gql(query, { i: { name: 'big-pool', providerType: 'local', [field]: 1e12 } });
      expect(r.status).toBe(200);
      expect(r.errors).toEqual([
        {
          message: `Variable "$i" got invalid value 1000000000000 at "i.${field}"; Int cannot represent non 32-bit signed integer value: 1000000000000`,
          locations: [{ line: 1, column: 10 }],
          extensions: { code: 'INVALID_INPUT', variable: 'i' },
        },
      ]);
      const inline = await t.gql(
        `mutation { createWorkerPool(input: { name: "big-pool", providerType: "local", ${field}: 1000000000000 }) { __typename } }`,
      );
      expect(inline.errors?.[0].extensions?.code).toBe('GRAPHQL_VALIDATION_FAILED');
    }
  });

  it('several bad variables: each problem is reported, each with its code', async () => {
    const r = await t.gql(
      'query($a: Int, $b: Int, $c: String!) { workers(first: $a) { pageInfo { hasNextPage } } users(first: $b) { pageInfo { hasNextPage } } workerPool(name: $c) { name } }',
      {
        a: 1e12,
        b: 'x',
      },
    );
    expect(r.errors?.map((e) => [e.extensions?.code, e.extensions?.variable])).toEqual([
      ['INVALID_INPUT', 'a'],
      ['INVALID_INPUT', 'b'],
      ['INVALID_INPUT', 'c'],
    ]);
  });

  it('over a WebSocket too: a query with an Int of 1e12 and a subscription with a Float of "x" get the same coded error', async () => {
    const { client } = wsClient(url, t.adminToken);
    try {
      for (const query of [
        'query($n: Int) { workers(first: $n) { pageInfo { hasNextPage } } }',
        'subscription($n: Float) { workRequestLog(id: "1", offset: $n) { text } }',
      ]) {
        const sub = collect(client, query, { n: query.startsWith('query') ? 1e12 : 'x' });
        await sub.completed.catch(() => undefined);
        for (let i = 0; i < 100 && !sub.errors.length; i++) await new Promise((r) => setTimeout(r, 20));
        const errors = sub.errors.flat() as { message: string; extensions?: Record<string, unknown> }[];
        expect(errors.length, query).toBeGreaterThan(0);
        expect(errors.map((e) => e.extensions)).toEqual(errors.map(() => ({ code: 'INVALID_INPUT', variable: 'n' })));
        sub.dispose();
      }
    } finally {
      await client.dispose();
    }
  });
});
