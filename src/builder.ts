import SchemaBuilder from '@pothos/core';
import DataloaderPlugin from '@pothos/plugin-dataloader';
import ErrorsPlugin from '@pothos/plugin-errors';
import RelayPlugin from '@pothos/plugin-relay';
import type { Context } from './context.js';
import InputGuardPlugin from './input-guard.js';

const upperFirst = (s: string) => s.charAt(0).toUpperCase() + s.slice(1);

/** The Pothos builder every `schema/*.ts` file adds its types to; it defines no types itself. */
export const builder = new SchemaBuilder<{
  Context: Context;
  DefaultFieldNullability: false;
  Scalars: {
    DateTime: { Input: Date; Output: Date };
    JSON: { Input: unknown; Output: unknown };
  };
}>({
  // The errors plugin first: it wraps the others' resolvers, so the input guard's errors become union members.
  plugins: [ErrorsPlugin, DataloaderPlugin, RelayPlugin, InputGuardPlugin],
  defaultFieldNullability: false,
  errors: {
    directResult: true,
    defaultUnionOptions: { name: ({ fieldName }) => `${upperFirst(fieldName)}Result` },
    defaultResultOptions: { name: ({ fieldName }) => `${upperFirst(fieldName)}Success` },
  },
  relay: {
    clientMutationId: 'omit',
    cursorType: 'String',
    nodeQueryOptions: false,
    nodesQueryOptions: false,
  },
});
