/**
 * The operations GraphiQL opens with (yoga's `defaultQuery`): a first session, each operation named
 * so that GraphiQL's run button offers them one by one. test/api/graphiql.test.ts checks that each
 * validates against the schema.
 */
export const GRAPHIQL_EXAMPLES = `# Welcome to tagsched. Put your token in the Headers tab below:
#   { "Authorization": "Bearer <your token>" }
# Then pick an operation with the run button. Ctrl-Space completes names; every type, field
# and argument is described in the Docs panel.

# Admins: a public workspace, where users submit work.
mutation CreateWorkspace {
  createWorkspace(input: { name: "debian/main", isPublic: true }) {
    __typename
    ... on Workspace { name isPublic }
    ... on Error { code message path }
  }
}

# Submit a noop task (a worker runs \`true\`): note its id and status.
mutation SubmitNoop {
  createWorkRequest(input: { workspace: "debian/main", taskType: "worker", taskName: "noop", taskData: {} }) {
    __typename
    ... on WorkRequest { id status requiredTags { tag provenance source } }
    ... on Error { code message path }
  }
}

# Watch the work of a workspace change as workers take it (over WebSocket; stop it with the button).
subscription WatchWorkRequests {
  workRequestChanged(workspace: "debian/main") { id taskName status result statusReason worker { name } }
}

# Why is it pending? Put the id of your request here: the diagnosis says, per group of workers
# and per pool, which tags are missing on which side.
query WhyPending {
  workRequest(id: "1") {
    status
    diagnosis {
      state
      matchingWorkers availableWorkers busyWorkers
      unavailableWorkers { reason count }
      matchingPools
      mismatches { pool workerCount workerNames missingOnWorker missingOnTask }
    }
  }
}

# What the pools should start and stop now, and the work no worker or pool could ever run.
query Demand {
  provisioningDemand {
    pendingTotal
    pools { pool { name } pendingRunnable launch limitedBy stopWorkers { name } }
    unschedulable { count requiredTags nearest { pool workerNames missingOnWorker missingOnTask } }
  }
}
`;
