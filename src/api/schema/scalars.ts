import { GraphQLError, Kind } from 'graphql';
import { builder } from '../builder.js';
import { MAX_INPUT_DEPTH } from '../../services/input/validate.js';

builder.scalarType('DateTime', {
  description: 'An instant, as an ISO 8601 string in UTC',
  serialize: (value) => (value instanceof Date ? value.toISOString() : new Date(String(value)).toISOString()),
  parseValue: (value) => {
    const d = new Date(String(value));
    if (typeof value !== 'string' || Number.isNaN(d.getTime()))
      throw new GraphQLError('DateTime must be an ISO 8601 string');
    return d;
  },
});

builder.scalarType('JSON', {
  description: 'Any JSON value',
  serialize: (value) => value,
  parseValue: (value) => value,
  parseLiteral: function parse(ast, _variables, depth = 0): unknown {
    // Bounded here, before recursing: the arguments' check (input-guard.ts) sees the value only once parsed.
    if (depth > MAX_INPUT_DEPTH)
      throw new GraphQLError(`JSON literals may be nested at most ${MAX_INPUT_DEPTH} levels deep`, {
        extensions: { code: 'INVALID_INPUT' },
      });
    switch (ast.kind) {
      case Kind.STRING:
      case Kind.BOOLEAN:
        return ast.value;
      case Kind.INT:
      case Kind.FLOAT:
        return Number(ast.value);
      case Kind.NULL:
        return null;
      case Kind.LIST:
        return ast.values.map((v) => parse(v, _variables, depth + 1));
      case Kind.OBJECT:
        return Object.fromEntries(ast.fields.map((f) => [f.name.value, parse(f.value, _variables, depth + 1)]));
      default:
        throw new GraphQLError('JSON literals may not use variables inside');
    }
  },
});
