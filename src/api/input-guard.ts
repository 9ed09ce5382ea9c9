/**
 * A Pothos plugin that runs the arguments of every field through the client-input check of
 * services/input/validate.ts before its resolver (or subscription) runs: one step for every string and
 * JSON value a client can send, whichever field it reaches. Listed after the errors plugin in
 * builder.ts, so its InputError becomes the field's result-union member where the field has one,
 * and a GraphQL error with code INVALID_INPUT elsewhere.
 */
import SchemaBuilder, { BasePlugin, type PothosOutputFieldConfig, type SchemaTypes } from '@pothos/core';
import type { GraphQLFieldResolver } from 'graphql';
import { InputError, type InputProblem } from '../core/errors.js';
import { clientInputProblems } from '../services/input/validate.js';

function checkArgs(args: Record<string, unknown>): void {
  const problems: InputProblem[] = [];
  for (const [name, value] of Object.entries(args)) problems.push(...clientInputProblems(value, name));
  if (problems.length) throw InputError.of(problems);
}

class InputGuardPlugin<Types extends SchemaTypes> extends BasePlugin<Types> {
  override wrapResolve(
    resolver: GraphQLFieldResolver<unknown, Types['Context'], object>,
    fieldConfig: PothosOutputFieldConfig<Types>,
  ): GraphQLFieldResolver<unknown, Types['Context'], object> {
    if (!Object.keys(fieldConfig.args).length) return resolver;
    return (parent, args, context, info) => {
      checkArgs(args as Record<string, unknown>);
      return resolver(parent, args, context, info);
    };
  }

  override wrapSubscribe(
    subscribe: GraphQLFieldResolver<unknown, Types['Context'], object> | undefined,
    fieldConfig: PothosOutputFieldConfig<Types>,
  ): GraphQLFieldResolver<unknown, Types['Context'], object> | undefined {
    if (!subscribe || !Object.keys(fieldConfig.args).length) return subscribe;
    return (parent, args, context, info) => {
      checkArgs(args as Record<string, unknown>);
      return subscribe(parent, args, context, info);
    };
  }
}

declare global {
  export namespace PothosSchemaTypes {
    export interface Plugins<Types extends SchemaTypes> {
      inputGuard: InputGuardPlugin<Types>;
    }
  }
}

const pluginName = 'inputGuard' as const;
SchemaBuilder.registerPlugin(pluginName, InputGuardPlugin);

/** The plugin's name, for the builder's plugin list. */
export default pluginName;
