import { Kind, getOperationAST, type DocumentNode } from 'graphql';

/**
 * The mutations a worker's WebSocket connection runs as the worker it authenticated as when it
 * opened, without looking its bearer token up again: the agent's acknowledgement and report of each
 * assignment, which it sends on its connection while one is open. Their resolvers use the worker's id only (the
 * viewer holds a reference, not a loaded row), and the token is still checked for every operation:
 * its validity in one statement shared by every check of the same tick (api/ws/token-guard.ts), and a
 * refused token closes the connection (4401), as a revocation does. Every other operation on a
 * connection looks its token up again, as over HTTP.
 */
export const CONNECTION_IDENTITY_MUTATIONS: ReadonlySet<string> = new Set(['startWorkRequest', 'completeWorkRequest']);

/**
 * Whether the operation is a mutation whose root fields are all CONNECTION_IDENTITY_MUTATIONS (or
 * `__typename`), each named directly (a fragment at the root is not looked into: it takes the
 * ordinary path).
 */
export function runsOnConnectionIdentity(document: DocumentNode, operationName: string | null | undefined): boolean {
  const operation = getOperationAST(document, operationName);
  if (operation?.operation !== 'mutation') return false;
  const selections = operation.selectionSet.selections;
  return (
    selections.length > 0 &&
    selections.every(
      (s) =>
        s.kind === Kind.FIELD && (s.name.value === '__typename' || CONNECTION_IDENTITY_MUTATIONS.has(s.name.value)),
    ) &&
    selections.some((s) => s.kind === Kind.FIELD && s.name.value !== '__typename')
  );
}
