import type { EntityManager } from '@mikro-orm/postgresql';
import { GraphQLError, TypeInfo, visit, visitWithTypeInfo, type DocumentNode, type GraphQLSchema } from 'graphql';
import {
  fieldExtensionsEstimator,
  getComplexity,
  simpleEstimator,
  type ComplexityEstimator,
  type ComplexityEstimatorArgs,
} from 'graphql-query-complexity';
import { itemsCounted, LIST_BOUNDS, type ListBound, type ListSettings } from './list-bounds.js';
import { countLists as countListsNow } from '../../services/input/list-counts.js';

/**
 * What fields cost, in units of about one object read and shown (some 10 µs on the bench machine).
 * Any field costs 1 plus what it selects; a list costs the items its bound counts (list-bounds.ts: its
 * page size, or the most rows it can hold) times what each item selects, so nested lists multiply. The
 * scheduler's questions cost what they were measured to cost (bench/README.md: 2 cores,
 * PostgreSQL 15), whatever the selection:
 */
export const FIELD_COSTS = {
  /** provisioningDemand: 38 ms at 1,000 workers and 10,000 pending, 170 ms at 10,000 and 1,000,000. */
  provisioningDemand: 5_000,
  /** WorkRequest.diagnosis, each: the request matched against every match key and pool (the workers' state is read once per operation). */
  diagnosis: 100,
  /** One request's candidates: 1,000 requests take 49–87 ms, about 0.05–0.09 ms each. */
  candidatesPerRequest: 10,
  /** Reading every worker's state, once per operation that asks for candidates (about 30 ms at 10,000 workers). */
  workerStates: 1_000,
} as const;

type CostArgs = Pick<ComplexityEstimatorArgs, 'args' | 'childComplexity'>;

/** A field with a fixed cost of its own, on top of what it selects. */
export function fixedCost(cost: number) {
  return ({ childComplexity }: CostArgs): number => cost + childComplexity;
}

/**
 * What the candidate questions cost besides their items' selection: the workers' state read once per
 * operation, and each request's candidates (one batch for every request of the operation, in memory).
 */
const LIST_WORK: Readonly<Record<string, { once: number; each: number }>> = {
  'Query.candidateWorkers': { once: FIELD_COSTS.workerStates, each: FIELD_COSTS.candidatesPerRequest },
  'WorkRequest.candidateWorkers': { once: FIELD_COSTS.candidatesPerRequest, each: 0 },
};

/** Values shown from memory (a name, an id), ten of which cost about one object read. */
const VALUES_PER_UNIT = 10;

/**
 * The cost of a list or a page (list-bounds.ts): 1, plus what each item selects (at least 1) times the
 * items its bound counts, plus the work of LIST_WORK; a page of values costs one per ten values, and what
 * held values select is counted once.
 */
function listCost(
  bound: ListBound,
  key: string,
  { args, childComplexity }: CostArgs,
  settings: ListSettings,
  counted: number | undefined,
): number {
  if (bound.kind === 'edges') return childComplexity;
  if (bound.kind === 'held') return 1 + childComplexity;
  const items = itemsCounted(bound, args, settings, counted);
  const work = LIST_WORK[key] ?? { once: 0, each: 0 };
  const each =
    bound.kind === 'page' && bound.values
      ? Math.max(1, childComplexity) / VALUES_PER_UNIT
      : Math.max(1, childComplexity);
  return 1 + work.once + Math.ceil(items * (work.each + each));
}

/** The estimator of list-bounds.ts: the cost of every field it names. */
function listBoundEstimator(settings: ListSettings, counts: ListCounts): ComplexityEstimator {
  return ({ type, field, args, childComplexity }) => {
    const key = `${type.name}.${field.name}`;
    const bound = LIST_BOUNDS[key];
    return bound ? listCost(bound, key, { args, childComplexity }, settings, counts[key]) : undefined;
  };
}

/** The `extensions` a Pothos field takes to declare its cost. */
export const costOf = (complexity: number | ((args: CostArgs) => number)) => ({ complexity });

/**
 * The estimated cost of an operation: lists and pages by their bounds (list-bounds.ts; `counts`, when
 * given, what countLists found), field costs declared in the schema (`extensions.complexity`), 1 per
 * field otherwise. Throws GraphQLError for variables that do not fit the operation.
 */
export function operationCost(
  schema: GraphQLSchema,
  document: DocumentNode,
  variables: Record<string, unknown> | undefined,
  operationName: string | null | undefined,
  settings: ListSettings,
  counts: ListCounts = {},
): number {
  return getComplexity({
    schema,
    query: document,
    variables: variables ?? {},
    operationName: operationName ?? undefined,
    estimators: [
      listBoundEstimator(settings, counts),
      fieldExtensionsEstimator(),
      simpleEstimator({ defaultComplexity: 1 }),
    ],
  });
}

/** The items that lists with a `count` (list-bounds.ts) hold now, by `Type.field`. */
export type ListCounts = Readonly<Record<string, number>>;

/** The fields of a document (every operation and fragment of it) that have a `count`, by `Type.field`. */
export function countedFields(schema: GraphQLSchema, document: DocumentNode): string[] {
  const keys = new Set<string>();
  const typeInfo = new TypeInfo(schema);
  visit(
    document,
    visitWithTypeInfo(typeInfo, {
      Field(node) {
        const parent = typeInfo.getParentType();
        const key = parent ? `${parent.name}.${node.name.value}` : '';
        const bound = LIST_BOUNDS[key];
        if (bound && (bound.kind === 'page' || bound.kind === 'rows') && bound.count) keys.add(key);
      },
    }),
  );
  return [...keys];
}

/** Counts, with `em`, what the lists of `keys` hold now, in one statement (services/input/list-counts.ts). */
export async function countLists(em: EntityManager, keys: string[]): Promise<ListCounts> {
  const counted = keys.flatMap((key) => {
    const bound = LIST_BOUNDS[key];
    return bound && (bound.kind === 'page' || bound.kind === 'rows') && bound.count
      ? [{ key, count: bound.count }]
      : [];
  });
  if (!counted.length) return {};
  const found = await countListsNow(
    em,
    counted.map((c) => c.count),
  );
  return Object.fromEntries(counted.map((c) => [c.key, found.get(c.count) ?? 0]));
}

/** The refusal of an operation that costs too much. */
export function costError(cost: number, max: number): GraphQLError {
  return new GraphQLError(
    `Query cost limit of ${max} exceeded, found ${cost} (TAGSCHED_MAX_COST; nested lists multiply: ask for smaller pages, fewer lists or fewer fields)`,
    {
      extensions: { code: 'LIMIT_EXCEEDED', limit: 'TAGSCHED_MAX_COST', max, found: cost },
    },
  );
}
