/**
 * What an orchestration step reports to its caller: the requests it changed (to publish after the
 * commit) and the requests that finished (to settle). Shared by queueing, expansion and settling.
 */
/** A request whose change is to be published: `workRequestChanged` carries its id and workspace. */
export interface RequestChange {
  readonly id: number;
  readonly workspaceId: number;
}

/** What running an orchestrated request changed: requests it created or queued, and requests that finished (to settle). */
export interface Orchestrated {
  changed: RequestChange[];
  finished: number[];
}
