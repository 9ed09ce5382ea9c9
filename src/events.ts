import { createPubSub, type PubSub } from 'graphql-yoga';

/**
 * The events the service publishes after a commit. Payloads are small ids, never entities: a
 * subscriber reloads what it shows through its own EntityManager, with its own visibility rules.
 */
export type Topics = {
  workRequestChanged: [{ id: number; workspaceId: number }];
  workerChanged: [{ id: number; name: string }];
  /** A request was assigned to a worker (published after the commit). */
  workAssigned: [{ workRequestId: number; workerId: number }];
};

/** The pub/sub every operation publishes to. */
export type Events = PubSub<Topics>;

/** An in-process pub/sub (one server process, or the embedded database). */
export function createLocalEvents(): Events {
  return createPubSub<Topics>();
}
