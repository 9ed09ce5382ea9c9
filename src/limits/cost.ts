import { GraphQLError, type DocumentNode, type GraphQLSchema } from 'graphql';
import { fieldExtensionsEstimator, getComplexity, simpleEstimator, type ComplexityEstimatorArgs } from 'graphql-query-complexity';
import { PAGE } from './page.js';

/**
 * What fields cost, in units of about one object read and shown (some 10 µs on the bench machine).
 * Any field costs 1 plus what it selects; a list costs its page size (`first`, or the default page)
 * times what each item selects. The scheduler's questions cost what they were measured to cost
 * (README, "Benchmarks": 2 cores, PostgreSQL 15), whatever the selection:
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

/**
 * The cost of a list field paged by `first` (default `defaultSize`): each item's selection, that many
 * times. A `first` past PAGE.max counts as PAGE.max: the field refuses it with its own error.
 */
export function pagedCost(defaultSize: number = PAGE.default) {
  return ({ args, childComplexity }: CostArgs): number => {
    const size = Math.min(PAGE.max, Math.max(0, Number(args.first ?? defaultSize) || 0));
    return 1 + size * Math.max(1, childComplexity);
  };
}

/** A field with a fixed cost of its own, on top of what it selects. */
export function fixedCost(cost: number) {
  return ({ childComplexity }: CostArgs): number => cost + childComplexity;
}

/** candidateWorkers(workRequestIds): the workers' state once, then each request's candidates and selection. */
export function candidatesQueryCost({ args, childComplexity }: CostArgs): number {
  const ids = Array.isArray(args.workRequestIds) ? args.workRequestIds.length : 1;
  return FIELD_COSTS.workerStates + ids * (FIELD_COSTS.candidatesPerRequest + childComplexity);
}

/** The `extensions` a Pothos field takes to declare its cost. */
export const costOf = (complexity: number | ((args: CostArgs) => number)) => ({ complexity });

/**
 * The estimated cost of an operation: field costs declared in the schema (`extensions.complexity`),
 * 1 per field otherwise. Throws GraphQLError for variables that do not fit the operation.
 */
export function operationCost(schema: GraphQLSchema, document: DocumentNode, variables: Record<string, unknown> | undefined, operationName: string | null | undefined): number {
  return getComplexity({
    schema,
    query: document,
    variables: variables ?? {},
    operationName: operationName ?? undefined,
    estimators: [fieldExtensionsEstimator(), simpleEstimator({ defaultComplexity: 1 })],
  });
}

/** The refusal of an operation that costs too much. */
export function costError(cost: number, max: number): GraphQLError {
  return new GraphQLError(`Query cost limit of ${max} exceeded, found ${cost} (TAGSCHED_MAX_COST; lists cost their page size: ask for smaller pages or fewer fields)`, {
    extensions: { code: 'LIMIT_EXCEEDED', limit: 'TAGSCHED_MAX_COST', max, found: cost },
  });
}
