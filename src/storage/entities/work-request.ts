import { defineEntity, p, type InferEntity } from '@mikro-orm/core';
import type { TagEntry, TagRefusal } from '../../core/tags/types.js';
import type { PartialResources, ResourceSources } from '../../core/tasks/resource-request.js';
import { ACTIVE_SQL, UNFINISHED_SQL, WORK_REQUEST_STATUSES } from '../../core/work-request-status.js';
import { UserSchema } from './user.js';
import { WorkerSchema } from './worker.js';
import { WorkspaceSchema } from './workspace.js';

/** How a completed work request ended. */
export const WORK_REQUEST_RESULTS = ['SUCCESS', 'FAILURE', 'ERROR', 'SKIPPED'] as const;
export type WorkRequestResult = (typeof WORK_REQUEST_RESULTS)[number];

/**
 * The fair key a row gets when a writer did not set one: the fair clock of a workspace with nothing
 * queued (now, in milliseconds; scheduler/rules/queue-order.ts). The column's default in the migration and here.
 */
export const FAIR_KEY_DEFAULT_SQL = `((extract(epoch from now()) * 1000)::bigint)`;

/** Which rows the GIN tag indexes hold: every request but the active ones (ASSIGNED or RUNNING). */
export const TAG_INDEXED_SQL = `"status" not in (${ACTIVE_SQL})`;

/**
 * One task to run. The user's own tags are kept as given until the request becomes PENDING; then
 * the two task tag sets are computed once and frozen (entries for people, `text[]` for matching).
 */
export const WorkRequestSchema = defineEntity({
  name: 'WorkRequest',
  tableName: 'work_request',
  properties: {
    id: p.integer().primary().autoincrement(),
    workspace: () => p.manyToOne(WorkspaceSchema),
    createdBy: () => p.manyToOne(UserSchema),
    taskType: p.string().length(20),
    taskName: p.string().length(100),
    taskData: p.json<Record<string, unknown>>(),
    status: p.enum([...WORK_REQUEST_STATUSES]).default('BLOCKED'),
    result: p.enum([...WORK_REQUEST_RESULTS]).nullable(),
    /** Why the request failed, was aborted, or went back to the queue; null when nothing went wrong. */
    statusReason: p.text().nullable(),
    /** The handler's exit code, as its agent reported it; null when it did not exit by itself (a signal) or nobody said. */
    exitCode: p.integer().nullable(),
    priorityBase: p.integer().default(0),
    priorityAdjustment: p.integer().default(0),
    /** Its place among workspaces at equal priority (scheduler/rules/queue-order.ts): set when it is written. */
    fairKey: p.bigint('number').defaultRaw(FAIR_KEY_DEFAULT_SQL),
    worker: () => p.manyToOne(WorkerSchema).nullable(),
    /** The workflow that created it (services/workflows/orchestration.ts); null for a request submitted by a client. */
    parent: () => p.manyToOne(WorkRequestSchema).nullable(),
    dependencies: () =>
      p
        .manyToMany(WorkRequestSchema)
        .pivotTable('work_request_dependency')
        .owner()
        .joinColumn('work_request_id')
        .inverseJoinColumn('depends_on_id'),
    userProvidedTags: p.array().columnType('text[]').default([]),
    userRequiredTags: p.array().columnType('text[]').default([]),
    providedTags: p.array().columnType('text[]').default([]),
    requiredTags: p.array().columnType('text[]').default([]),
    providedEntries: p.json<TagEntry[]>().default('[]'),
    requiredEntries: p.json<TagEntry[]>().default('[]'),
    /** Rule tags refused for their provenance when the sets were computed. */
    droppedTags: p.json<TagRefusal[]>().default('[]'),
    /** The task class of a PENDING request (src/scheduler/storage/classes.ts); null before. */
    classId: p.integer().nullable(),
    /**
     * The class of a BLOCKED request as its tags were at submission, for demand's coming work
     * (src/scheduler/rules/look-ahead.ts); its tags are computed again when it is queued.
     */
    expectedClassId: p.integer().nullable(),
    /** The resources the user asked for at submission (core/tasks/resource-request.ts), as given; null for none. */
    userResources: p.json<PartialResources>().nullable(),
    /**
     * What it reserves of a worker that shares its resources (scheduler/rules/resources.ts), frozen with its
     * tags; 0 before. Where each figure came from is in `resourceSources`.
     */
    reservedCpus: p.integer().default(0),
    reservedMemoryMib: p.integer().default(0),
    reservedDiskMib: p.integer().default(0),
    resourceSources: p.json<ResourceSources>().nullable(),
    retryCount: p.integer().default(0),
    /** A noop the server gave a quarantined worker to see whether it runs work again (services/work/quarantine-probes.ts); never queued, never re-queued. */
    quarantineProbe: p.boolean().default(false),
    createdAt: p.datetime().onCreate(() => new Date()),
    /** When it last became PENDING (a re-queued request is pending again from then). */
    pendingAt: p.datetime().nullable(),
    assignedAt: p.datetime().nullable(),
    startedAt: p.datetime().nullable(),
    completedAt: p.datetime().nullable(),
    /**
     * The first start estimate its diagnosis gave while it was PENDING (never changed after, until it is
     * re-queued: a lease ended or its worker released it); its error is recorded when it starts.
     */
    estimatedStartAt: p.datetime().nullable(),
  },
  indexes: [
    { properties: 'workspace' },
    { properties: 'worker' },
    { properties: 'status' },
    // A workflow's children.
    {
      name: 'work_request_parent',
      expression: `create index "work_request_parent" on "work_request" ("parent_id") where "parent_id" is not null`,
    },
    // Tag filters of `workRequests(filter: {requiresTag, providesTag})`, over requests that are not
    // ASSIGNED or RUNNING (TAG_INDEXED_SQL): an assignment and a start then write no GIN entries (some
    // forty per request), and the few active requests are checked apart (tagFilter in api/schema/work-request.ts).
    // fastupdate is off because the GIN pending list made containment queries ten times slower after bulk inserts.
    {
      name: 'work_request_provided_tags_gin',
      expression: `create index "work_request_provided_tags_gin" on "work_request" using gin ("provided_tags") with (fastupdate = off) where ${TAG_INDEXED_SQL}`,
    },
    {
      name: 'work_request_required_tags_gin',
      expression: `create index "work_request_required_tags_gin" on "work_request" using gin ("required_tags") with (fastupdate = off) where ${TAG_INDEXED_SQL}`,
    },
    // The queue order of docs/design.md: scheduler, over pending work only.
    {
      name: 'work_request_pending_order',
      expression: `create index "work_request_pending_order" on "work_request" (("priority_base" + "priority_adjustment") desc, "created_at", "id") where "status" = 'PENDING'`,
    },
    // The scheduler's probe: the head of the queue of one task class.
    {
      name: 'work_request_pending_class_order',
      expression: `create index "work_request_pending_class_order" on "work_request" ("class_id", ("priority_base" + "priority_adjustment") desc, "fair_key", "created_at", "id") where "status" = 'PENDING'`,
    },
    // The metrics' age of the oldest pending request: one probe at the start of the index.
    {
      name: 'work_request_pending_since',
      expression: `create index "work_request_pending_since" on "work_request" ("pending_at") where "status" = 'PENDING'`,
    },
    // The metrics' count of unfinished work per workspace and status, read with an index-only scan.
    {
      name: 'work_request_unfinished_workspace',
      expression: `create index "work_request_unfinished_workspace" on "work_request" ("workspace_id", "status") where "status" in (${UNFINISHED_SQL})`,
    },
    // A worker's quarantine probes, newest last (when it was last probed).
    {
      name: 'work_request_quarantine_probe',
      expression: `create index "work_request_quarantine_probe" on "work_request" ("worker_id", "id") where "quarantine_probe"`,
    },
    // A worker's load: what it holds now.
    {
      name: 'work_request_active_worker',
      expression: `create index "work_request_active_worker" on "work_request" ("worker_id") where "status" in (${ACTIVE_SQL})`,
    },
  ],
});
export type WorkRequest = InferEntity<typeof WorkRequestSchema>;

/**
 * A work request's columns and references as its entity holds them, or as createWorkRequests wrote
 * them: a plain record, not an entity (services/work/create-work-requests.ts). What the GraphQL type
 * WorkRequest reads.
 */
export type WorkRequestRecord = Omit<WorkRequest, 'dependencies'>;
