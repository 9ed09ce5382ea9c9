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
    defaultUnionOptions: {
      name: ({ fieldName }) => `${upperFirst(fieldName)}Result`,
      description:
        'What the mutation answers: its result, or one of the typed errors it can return (select `... on Error { code message path }` for those)',
    },
    defaultResultOptions: { name: ({ fieldName }) => `${upperFirst(fieldName)}Success` },
  },
  relay: {
    clientMutationId: 'omit',
    cursorType: 'String',
    nodeQueryOptions: false,
    nodesQueryOptions: false,
    pageInfoTypeOptions: {
      description: 'Where a page of a list stands: pass endCursor as `after` to read the next page',
    },
    pageInfoFieldOptions: { description: 'Whether there are more pages, and the cursors to read them' },
    hasNextPageFieldOptions: { description: 'True when rows follow this page' },
    hasPreviousPageFieldOptions: { description: 'True when this page was read with an `after` cursor' },
    startCursorFieldOptions: { description: 'The cursor of the first row of the page; null for an empty page' },
    endCursorFieldOptions: {
      description: 'The cursor of the last row of the page, to pass as `after`; null for an empty page',
    },
    edgesFieldOptions: { description: 'The rows of the page, in the order of the list' },
    nodeFieldOptions: { description: 'The row' },
    cursorFieldOptions: { description: 'Where this row stands in the list: pass it as `after` to read what follows' },
  },
});
