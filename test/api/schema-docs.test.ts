/**
 * The API reads well: every type, field, argument, input field and enum value of the schema the
 * app serves has a description. The schema is read by introspection through the real app, as
 * GraphiQL and client generators read it; graphql's own introspection types are left out.
 */
import {
  buildClientSchema,
  getIntrospectionQuery,
  isEnumType,
  isInputObjectType,
  isInterfaceType,
  isObjectType,
  type IntrospectionQuery,
} from 'graphql';
import { describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';

const t = useTestApp();

/** Every schema element without a description, as `Type`, `Type.field`, `Type.field(arg)` or `Enum.VALUE`. */
function undocumented(data: IntrospectionQuery): string[] {
  const schema = buildClientSchema(data);
  const missing: string[] = [];
  const blank = (d: string | null | undefined) => !d?.trim();
  for (const type of Object.values(schema.getTypeMap())) {
    if (type.name.startsWith('__')) continue;
    if (blank(type.description)) missing.push(type.name);
    if (isObjectType(type) || isInterfaceType(type)) {
      for (const field of Object.values(type.getFields())) {
        if (blank(field.description)) missing.push(`${type.name}.${field.name}`);
        for (const arg of field.args)
          if (blank(arg.description)) missing.push(`${type.name}.${field.name}(${arg.name})`);
      }
    } else if (isInputObjectType(type)) {
      for (const field of Object.values(type.getFields()))
        if (blank(field.description)) missing.push(`${type.name}.${field.name}`);
    } else if (isEnumType(type)) {
      for (const value of type.getValues()) if (blank(value.description)) missing.push(`${type.name}.${value.name}`);
    }
  }
  return missing.sort();
}

describe('schema documentation', () => {
  it('describes every type, field, argument, input field and enum value', async () => {
    const res = await t.gql<IntrospectionQuery>(getIntrospectionQuery({ inputValueDeprecation: true }), {}, null);
    expect(res.errors).toBeUndefined();
    const missing = undocumented(res.data!);
    expect(missing, `without a description:\n${missing.join('\n')}`).toEqual([]);
  });

  it('the check finds an element without a description', () => {
    // The same walk over a schema with one bare field: the test above cannot pass by looking at nothing.
    const bare = {
      __schema: {
        queryType: { name: 'Query', kind: 'OBJECT' },
        mutationType: null,
        subscriptionType: null,
        directives: [],
        types: [
          {
            kind: 'OBJECT',
            name: 'Query',
            description: 'The root',
            interfaces: [],
            fields: [
              {
                name: 'hello',
                description: null,
                args: [],
                type: { kind: 'SCALAR', name: 'String', ofType: null },
                isDeprecated: false,
                deprecationReason: null,
              },
            ],
          },
          { kind: 'SCALAR', name: 'String', description: 'Text' },
        ],
      },
    } as unknown as IntrospectionQuery;
    expect(undocumented(bare)).toEqual(['Query.hello']);
  });
});
