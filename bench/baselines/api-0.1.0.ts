/**
 * The client phase's documents for a 0.1.0 server (`npm run bench:ws -- --only clients --api 0.1.0`):
 * written for the 0.1.0 schema (commit aac64f2, its schema.graphql), and checked by
 * test/bench/api-dialects.test.ts against `git show aac64f2:schema.graphql`. They select what today's documents (CURRENT_API in
 * bench/clients.ts) select, as far as 0.1.0 allows:
 *
 *   - registerWorker and createWorkRequest have no `idempotencyKey` argument; their inputs take the
 *     same fields as today's variables send (the optional ones null or empty);
 *   - startWorkRequest(id:) and completeWorkRequest(id:, result:) take loose arguments, not an input
 *     object, and a completion has no exit code, reason or statistics: only the result (SUCCESS);
 *   - there is no createWorkRequests: the queue is one request created, then copied in SQL
 *     (bench/queue-copy.ts);
 *   - createWorkspace, reportWorkerMetadata and requestWork are sent as today (0.1.0's agent sent the
 *     same metadata report), and every answer has today's __typename.
 *
 * The selections are written out here rather than built from today's constants, so that a change of
 * today's documents does not change what is sent to 0.1.0.
 */
import { NOOP_INPUT, type ClientsApi } from '../clients.js';

/** The error members as tagsched-admin selects them (0.1.0's InputError has the same path and problems). */
const ERRORS = '__typename ... on Error { code message } ... on InputError { path problems { code message path } }';
const WORKER_FIELDS =
  'name type status pool { name } concurrency activeWorkCount enabled draining shuttingDown lastSeenAt';
const WORK_REQUEST_FIELDS =
  'id status result taskType taskName priority workspace { name } worker { name } createdBy { username } createdAt';

export const API_0_1_0: ClientsApi = {
  name: '0.1.0',
  createWorkspace: `mutation { createWorkspace(input: { name: "${NOOP_INPUT.workspace}" }) { __typename } }`,
  registerWorker: `mutation RegisterWorker($input: RegisterWorkerInput!) {
  registerWorker(input: $input) { ${ERRORS} ... on WorkerTokenPayload { token worker { ${WORKER_FIELDS} } } }
}`,
  registerVariables: (name) => ({ input: { name, concurrency: null, pool: null, type: null, staticMetadata: null } }),
  reportWorkerMetadata: `mutation ReportWorkerMetadata($m: WorkerMetadataInput!) {
  reportWorkerMetadata(input: { metadata: $m }) { __typename ... on Worker { name status rejectedTags { tag code reason } } ... on Error { code message } }
}`,
  createWorkRequest: `mutation CreateWorkRequest($input: CreateWorkRequestInput!) {
  createWorkRequest(input: $input) { ${ERRORS} ... on WorkRequest { ${WORK_REQUEST_FIELDS} } }
}`,
  createVariables: () => ({ input: NOOP_INPUT }),
  requestWork: `mutation RequestWork {
  requestWork { __typename ... on RequestWorkPayload { workRequest { id taskType taskName taskData } } ... on Error { code message } }
}`,
  startWorkRequest: `mutation StartWorkRequest($id: ID!) {
  startWorkRequest(id: $id) { __typename ... on WorkRequest { id status } ... on Error { code message } }
}`,
  completeWorkRequest: `mutation CompleteWorkRequest($id: ID!, $r: WorkRequestResult!) {
  completeWorkRequest(id: $id, result: $r) { __typename ... on WorkRequest { id status } ... on Error { code message } }
}`,
  completeVariables: (id) => ({ id, r: 'SUCCESS' }),
  batchCreate: false,
};
