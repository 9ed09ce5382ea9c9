/**
 * The GraphQL operations of the worker protocol, and what their answers mean to the agent. A
 * mutation's union answer is either the expected type or a typed error (code, message); the
 * transport's own failures (network, token refused) are thrown by the client instead.
 */
import { z } from 'zod';
import type { RunStatistics } from '../shared/run-statistics.js';
import type { WorkerMetadataInput } from './facts.js';
import type { TaskResult } from './runner.js';

/** Sends one operation and returns its `data`; see client.ts for what it throws. */
export type Request = (query: string, variables?: Record<string, unknown>) => Promise<Record<string, unknown>>;

/** A typed error member of a mutation's union (NotFoundError, InvalidStateError, …). */
export interface TypedError {
  type: string;
  code: string;
  message: string;
}

/** The answer of a mutation: its value, or the typed error the server chose. */
export type Answer<T> = { ok: true; value: T } | { ok: false; error: TypedError };

/** The server answered something that is neither the expected type nor a typed error. */
export class UnexpectedAnswerError extends Error {
  override readonly name = 'UnexpectedAnswerError';
}

const ERROR_FIELDS = '... on Error { code message }';
const ASSIGNMENT_FIELDS = 'id taskType taskName taskData runLimits { cpus memoryMib }';

export const DOCUMENTS = {
  activateWorker: `mutation ActivateWorker($name: String) {
  activateWorker(input: { name: $name }) { __typename ... on WorkerTokenPayload { token worker { name } } ${ERROR_FIELDS} }
}`,
  reportWorkerMetadata: `mutation ReportWorkerMetadata($m: WorkerMetadataInput!) {
  reportWorkerMetadata(input: { metadata: $m }) { __typename ... on Worker { name status rejectedTags { tag code reason } } ${ERROR_FIELDS} }
}`,
  heartbeat: `mutation Heartbeat($i: HeartbeatInput!) {
  heartbeat(input: $i) { __typename ... on HeartbeatPayload { draining assignedWorkRequests { ${ASSIGNMENT_FIELDS} } } ${ERROR_FIELDS} }
}`,
  startWorkRequest: `mutation StartWorkRequest($id: ID!) {
  startWorkRequest(input: { id: $id }) { __typename ... on WorkRequest { id status } ${ERROR_FIELDS} }
}`,
  completeWorkRequest: `mutation CompleteWorkRequest($id: ID!, $r: WorkRequestResult!, $exitCode: Int, $reason: String, $statistics: RunStatisticsInput) {
  completeWorkRequest(input: { id: $id, result: $r, exitCode: $exitCode, statusReason: $reason, statistics: $statistics }) { __typename ... on WorkRequest { id status } ${ERROR_FIELDS} }
}`,
  appendWorkRequestLog: `mutation AppendWorkRequestLog($i: AppendWorkRequestLogInput!) {
  appendWorkRequestLog(input: $i) { __typename ... on WorkRequestLogAck { nextOffset accepted } ${ERROR_FIELDS} }
}`,
  rotateToken: `mutation RotateToken {
  rotateToken(input: {}) { __typename ... on TokenValuePayload { value token { worker } } ${ERROR_FIELDS} }
}`,
  releaseWorkRequest: `mutation ReleaseWorkRequest($id: ID!, $reason: String!) {
  releaseWorkRequest(input: { id: $id, reason: $reason }) { __typename ... on WorkRequest { id status } ${ERROR_FIELDS} }
}`,
  reportInstanceInterruption: `mutation ReportInstanceInterruption($i: ReportInstanceInterruptionInput!) {
  reportInstanceInterruption(input: $i) { __typename ... on Worker { name status } ${ERROR_FIELDS} }
}`,
  assignments: `subscription Assignments { assignments { ${ASSIGNMENT_FIELDS} } }`,
} as const;

/**
 * What the agent sends over its open WebSocket connection rather than over HTTP: the acknowledgement
 * and the report of an assignment (the server runs them as the connection's worker).
 */
export const OVER_CONNECTION: ReadonlySet<string> = new Set([
  DOCUMENTS.startWorkRequest,
  DOCUMENTS.completeWorkRequest,
]);

const typedError = z.object({ __typename: z.string(), code: z.string(), message: z.string() });
const workRequestState = z.object({ id: z.string(), status: z.string() });

/** One pushed assignment, checked before the agent acts on it. */
export const assignmentSchema = z.object({
  id: z.union([z.string(), z.number()]).transform(String),
  taskType: z.string(),
  taskName: z.string(),
  taskData: z.unknown(),
  /** Its reservation, on a worker that shares its resources (run-limits.ts); null on one with slots. */
  runLimits: z
    .object({ cpus: z.number().int().min(0), memoryMib: z.number().int().min(0) })
    .nullable()
    .optional(),
});
export type Assignment = z.infer<typeof assignmentSchema>;

/** Reads `data[field]`: the `expected` member parsed by `schema`, or a typed error. */
function answer<T>(data: Record<string, unknown>, field: string, expected: string, schema: z.ZodType<T>): Answer<T> {
  const node = data[field] as { __typename?: unknown } | null | undefined;
  if (node?.__typename === expected) {
    const parsed = schema.safeParse(node);
    if (parsed.success) return { ok: true, value: parsed.data };
    throw new UnexpectedAnswerError(
      `${field}: the ${expected} answered does not have the expected fields: ${parsed.error.message}`,
    );
  }
  const error = typedError.safeParse(node);
  if (error.success)
    return { ok: false, error: { type: error.data.__typename, code: error.data.code, message: error.data.message } };
  throw new UnexpectedAnswerError(
    `${field}: expected ${expected} or an error, got ${JSON.stringify(node)?.slice(0, 200)}`,
  );
}

/** What the server says after a metadata report. */
export interface WorkerReport {
  name: string;
  status: string;
  rejectedTags: { tag: string; code?: string; reason: string }[];
}

/** How a run ended, reported with its result. */
export interface RunReport {
  /** The handler's exit code; null when it did not exit by itself. */
  exitCode: number | null;
  /** Why it failed, when the agent knows (a signal, a handler that did not start, the handler's reason file); null lets the server take the last lines of the output. */
  reason: string | null;
  /** What the run used, when the agent measured it. */
  statistics?: RunStatistics | null;
}

/** A chunk of a run's output: `bytes` bytes of the output, from byte `offset`, decoded as `text`. */
export interface LogChunk {
  id: string;
  offset: number;
  bytes: number;
  text: string;
}

/** The worker protocol's mutations. */
export interface Api {
  activateWorker(name: string | null): Promise<Answer<{ token: string; workerName: string }>>;
  reportWorkerMetadata(metadata: WorkerMetadataInput): Promise<Answer<WorkerReport>>;
  /** The answer also lists what is assigned to this worker and not acknowledged: a push the subscription lost. */
  heartbeat(input: {
    shuttingDown: boolean;
    running: string[];
  }): Promise<Answer<{ draining: boolean; assigned: Assignment[] }>>;
  startWorkRequest(id: string): Promise<Answer<{ id: string; status: string }>>;
  completeWorkRequest(
    id: string,
    result: TaskResult,
    report?: RunReport,
  ): Promise<Answer<{ id: string; status: string }>>;
  /** The answer says where the next chunk starts (the server's count): a repeat or a misplaced chunk is not stored twice. */
  appendWorkRequestLog(chunk: LogChunk): Promise<Answer<{ nextOffset: number; accepted: boolean }>>;
  releaseWorkRequest(id: string, reason: string): Promise<Answer<{ id: string; status: string }>>;
  /** A new value for the token of this request; the server revokes the one used at once. */
  rotateToken(): Promise<Answer<{ token: string; workerName: string }>>;
  /** The provider is taking this machine away: the server terminates the worker and re-queues its work, without counting a retry. */
  reportInstanceInterruption(notice: {
    action: string;
    time: string | null;
  }): Promise<Answer<{ name: string; status: string }>>;
}

/** The protocol's mutations over one transport. */
export function createApi(request: Request): Api {
  return {
    async activateWorker(name) {
      const data = await request(DOCUMENTS.activateWorker, { name });
      const schema = z
        .object({ token: z.string(), worker: z.object({ name: z.string() }) })
        .transform((p) => ({ token: p.token, workerName: p.worker.name }));
      return answer(data, 'activateWorker', 'WorkerTokenPayload', schema);
    },
    async reportWorkerMetadata(metadata) {
      const data = await request(DOCUMENTS.reportWorkerMetadata, { m: metadata });
      const schema = z.object({
        name: z.string(),
        status: z.string(),
        rejectedTags: z
          .array(z.object({ tag: z.string(), code: z.string().optional(), reason: z.string() }))
          .default([]),
      });
      return answer(data, 'reportWorkerMetadata', 'Worker', schema);
    },
    async heartbeat(input) {
      const data = await request(DOCUMENTS.heartbeat, { i: input });
      const schema = z
        .object({
          draining: z.boolean().nullish().transform(Boolean),
          assignedWorkRequests: z.array(assignmentSchema).nullish(),
        })
        .transform((p) => ({ draining: p.draining, assigned: p.assignedWorkRequests ?? [] }));
      return answer(data, 'heartbeat', 'HeartbeatPayload', schema);
    },
    async startWorkRequest(id) {
      return answer(
        await request(DOCUMENTS.startWorkRequest, { id }),
        'startWorkRequest',
        'WorkRequest',
        workRequestState,
      );
    },
    async completeWorkRequest(id, result, report) {
      const statistics = report?.statistics ?? null;
      const variables = {
        id,
        r: result,
        exitCode: report?.exitCode ?? null,
        reason: report?.reason ?? null,
        statistics,
      };
      return answer(
        await request(DOCUMENTS.completeWorkRequest, variables),
        'completeWorkRequest',
        'WorkRequest',
        workRequestState,
      );
    },
    async appendWorkRequestLog(chunk) {
      const schema = z.object({ nextOffset: z.number(), accepted: z.boolean() });
      return answer(
        await request(DOCUMENTS.appendWorkRequestLog, { i: chunk }),
        'appendWorkRequestLog',
        'WorkRequestLogAck',
        schema,
      );
    },
    async releaseWorkRequest(id, reason) {
      return answer(
        await request(DOCUMENTS.releaseWorkRequest, { id, reason }),
        'releaseWorkRequest',
        'WorkRequest',
        workRequestState,
      );
    },
    async reportInstanceInterruption(notice) {
      const schema = z.object({ name: z.string(), status: z.string() });
      return answer(
        await request(DOCUMENTS.reportInstanceInterruption, { i: notice }),
        'reportInstanceInterruption',
        'Worker',
        schema,
      );
    },
    async rotateToken() {
      const schema = z
        .object({ value: z.string(), token: z.object({ worker: z.string() }) })
        .transform((p) => ({ token: p.value, workerName: p.token.worker }));
      return answer(await request(DOCUMENTS.rotateToken), 'rotateToken', 'TokenValuePayload', schema);
    },
  };
}
