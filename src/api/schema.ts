import { printSchema, lexicographicSortSchema } from 'graphql';
import { builder } from './builder.js';
import './schema/scalars.js';
import './schema/errors.js';
import './schema/tag-entry.js';
import './schema/resources.js';
import './schema/worker-image.js';
import './schema/worker-pool.js';
import './schema/worker.js';
import './schema/instance.js';
import './schema/workspace.js';
import './schema/token.js';
import './schema/environment.js';
import './schema/work-request.js';
import './schema/run-statistics.js';
import './schema/task-statistics.js';
import './schema/work-lifecycle.js';
import './schema/scheduling.js';
import './schema/job-output.js';
import './schema/leaders.js';
import './schema/subscriptions.js';
import './schema/server-processes.js';

builder.queryType({
  description:
    'What can be read: workers, pools, work requests and why they wait, demand, workspaces, tokens. Each list shows only what the caller may see',
});
builder.mutationType({
  description:
    'What can be changed. Each mutation answers its result or a typed error (a member of Error, with a stable code)',
});

/** The executable GraphQL schema. */
export const schema = builder.toSchema();

/** The SDL committed as schema.graphql (sorted, so the diff of a change shows only the change). */
export function printedSchema(): string {
  return printSchema(lexicographicSortSchema(schema));
}
