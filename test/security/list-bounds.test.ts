import {
  getNamedType,
  isInterfaceType,
  isLeafType,
  isListType,
  isNonNullType,
  isObjectType,
  type GraphQLField,
  type GraphQLNamedType,
  type GraphQLObjectType,
  type GraphQLType,
} from 'graphql';
import { describe, expect, it } from 'vitest';
import { schema } from '../../src/api/schema.js';
import { LIST_BOUNDS } from '../../src/api/limits/list-bounds.js';

// Issue 21, item 1: every list of the API is paged or bounded, in one registry (src/api/limits/list-bounds.ts)
// that the cost model reads; this walks the built schema and names each list field that has neither.
const unwrap = (t: GraphQLType): GraphQLType => (isNonNullType(t) ? t.ofType : t);

function outputFields(): { key: string; field: GraphQLField<unknown, unknown>; parent: GraphQLObjectType }[] {
  const out: { key: string; field: GraphQLField<unknown, unknown>; parent: GraphQLObjectType }[] = [];
  for (const type of Object.values(schema.getTypeMap())) {
    if (type.name.startsWith('__') || !isObjectType(type)) continue;
    for (const field of Object.values(type.getFields()))
      out.push({ key: `${type.name}.${field.name}`, field, parent: type });
  }
  return out;
}

/** Whether an item type selects nothing that reads: leaves, and objects of leaves and held lists only. */
function holdsValuesOnly(type: GraphQLNamedType, seen = new Set<string>()): string | null {
  if (isLeafType(type)) return null;
  if (seen.has(type.name)) return null;
  seen.add(type.name);
  if (!isObjectType(type)) return `${type.name} is abstract`;
  for (const f of Object.values(type.getFields())) {
    const key = `${type.name}.${f.name}`;
    const named = getNamedType(f.type);
    if (isListType(unwrap(f.type))) {
      if (LIST_BOUNDS[key]?.kind !== 'held') return `${key} is a list that is not held`;
    } else if (!isLeafType(named)) {
      return `${key} is an object field`;
    }
    const inner = holdsValuesOnly(named, seen);
    if (inner) return inner;
  }
  return null;
}

describe('every list field is paged or bounded (src/api/limits/list-bounds.ts)', () => {
  const fields = outputFields();

  it('each list field has a bound; a page has a first argument, edges belong to paged connections, held items hold values only', () => {
    const problems: string[] = [];
    let lists = 0;
    for (const { key, field } of fields) {
      if (!isListType(unwrap(field.type))) continue;
      lists++;
      const bound = LIST_BOUNDS[key];
      if (!bound) {
        problems.push(`${key}: a list with neither a page argument nor a bound`);
        continue;
      }
      if (bound.kind === 'page' && !field.args.some((a) => a.name === 'first'))
        problems.push(`${key}: a page without a first argument`);
      if (bound.kind === 'page' && !(bound.max > 0 && bound.default <= bound.max))
        problems.push(`${key}: a page without a maximum`);
      if (bound.kind === 'perId' && !field.args.some((a) => a.name === bound.arg && isListType(unwrap(a.type))))
        problems.push(`${key}: no list argument ${bound.arg}`);
      if (bound.kind === 'held') {
        const why = holdsValuesOnly(getNamedType(field.type));
        if (why) problems.push(`${key}: held, but ${why}`);
      }
      if (bound.kind === 'edges') {
        const connection = key.split('.')[0];
        const answering = fields.filter((f) => getNamedType(f.field.type).name === connection);
        if (!answering.length) problems.push(`${key}: no field answers ${connection}`);
        for (const a of answering)
          if (LIST_BOUNDS[a.key]?.kind !== 'page') problems.push(`${a.key}: answers ${connection} but is not a page`);
      }
    }
    expect(problems).toEqual([]);
    expect(lists).toBeGreaterThan(50);
  });

  it('every connection field is a page, and the registry names no field that does not exist', () => {
    const byKey = new Map(fields.map((f) => [f.key, f]));
    const stale = Object.keys(LIST_BOUNDS).filter((k) => !byKey.has(k));
    expect(stale).toEqual([]);
    const connections = fields.filter((f) => {
      const named = getNamedType(f.field.type);
      return (isObjectType(named) || isInterfaceType(named)) && named.name.endsWith('Connection');
    });
    expect(connections.length).toBeGreaterThan(3);
    expect(connections.filter((f) => LIST_BOUNDS[f.key]?.kind !== 'page').map((f) => f.key)).toEqual([]);
  });
});
