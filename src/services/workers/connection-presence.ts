/**
 * The presence of the workers whose WebSocket connections this process holds (api/ws/server.ts tells
 * it of each connection's events): a worker is connected while it has a connection here, and the
 * last one to close marks it disconnected.
 *
 * Each worker's writes are made one after the other, in the order of its connections' events: a
 * disconnection written after a newer connection's "connected" would leave an open connection's worker
 * marked disconnected (and given no work). The writes themselves go in batches (createPresenceWriter:
 * a reconnection storm makes a few statements). A worker connected here is owned by this process
 * (`processId`, its row in the process registry); a disconnection written here touches only the workers
 * this process still owns, never one whose agent reconnected to another process meanwhile. When the process stops, the connections' ends write
 * nothing; finishStop() records every worker it held disconnected in one statement, once the writes
 * in flight are done, so that none lands after it.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Logger } from '../../core/log.js';
import type { Events } from '../../storage/events.js';
import { createPresenceWriter, markManyConnected, markManyDisconnected, reclaimConnected } from './presence.js';

/** What a process's WebSocket server tells of its worker connections; see {@link createConnectionPresence}. */
export interface ConnectionPresence {
  /**
   * A worker's connection is being accepted: counted, and the worker recorded connected after its
   * earlier writes. False, with nothing counted or written, while the process stops (the worker
   * connects to another); rejects when the write failed, the connection then no longer counted.
   */
  opened(workerId: number): Promise<boolean>;
  /**
   * A counted connection that will not be acknowledged (it closed while it was being accepted) is no
   * longer counted; when it was the worker's last, the worker's disconnection is written after its
   * writes so far, decided when its turn comes (a "connected" that failed partway may have been written).
   */
  dropped(workerId: number): void;
  /**
   * An acknowledged connection closed: when it was the worker's last, its disconnection is written after
   * the worker's earlier writes, unless a connection opened meanwhile; resolves once that is done (a
   * failure is logged). Nothing is written while the process stops.
   */
  closed(workerId: number): Promise<void>;
  /**
   * After a take-over marked this process's workers disconnected (its heartbeat had lapsed: it was paused,
   * or cut off from the database), those it still holds connections of are connected and owned here again,
   * each after its writes so far; the number taken back. Nothing is written while the process stops.
   */
  reclaim(): Promise<number>;
  /** The process stops: from now on no worker connection is accepted and no connection's end writes anything. */
  beginStop(): void;
  /** After beginStop() and the connections closed: the writes in flight end, then every worker held here and still owned by this process is recorded disconnected (one statement). */
  finishStop(): Promise<void>;
}

/** The presence of one process's worker connections, written with EntityManagers from `fork`. */
export function createConnectionPresence(deps: {
  fork: () => EntityManager;
  events: Events;
  log: Logger;
  /** This process's id in the process registry (services/processes/registry.ts). */
  processId: number;
}): ConnectionPresence {
  const { fork, events, log, processId } = deps;
  // Open worker connections of this process, to mark a worker disconnected when its last one closes.
  const connections = new Map<number, number>();
  // Each worker's last write in order (inOrder).
  const writes = new Map<number, Promise<unknown>>();
  const writer = createPresenceWriter({
    connected: (ids) => markManyConnected(fork(), events, ids, processId),
    disconnected: (ids) => markManyDisconnected(fork(), events, ids, processId),
  });
  let stopping = false;
  // Disconnections being recorded: finishStop() records them too, in case the ORM closes under them.
  const recording = new Map<number, Promise<void>>();

  /** inOrder for one write of several workers: after the earlier writes of each, before their next ones. */
  const inOrderMany = <T>(ids: readonly number[], write: () => Promise<T>): Promise<T> => {
    const before = Promise.all(ids.map((id) => (writes.get(id) ?? Promise.resolve()).catch(() => undefined)));
    const run = before.then(write);
    for (const id of ids) {
      writes.set(id, run);
      void run
        .catch(() => undefined)
        .then(() => {
          if (writes.get(id) === run) writes.delete(id);
        });
    }
    return run;
  };
  const inOrder = <T>(id: number, write: () => Promise<T>): Promise<T> => inOrderMany([id], write);

  /** One connection of the worker fewer; true when it was its last one here. */
  const uncount = (id: number): boolean => {
    const n = (connections.get(id) ?? 1) - 1;
    if (n > 0) {
      connections.set(id, n);
      return false;
    }
    connections.delete(id);
    return true;
  };

  /** The worker's disconnection, after its writes so far, unless it has a connection here again by then. */
  const disconnectInTurn = (id: number): Promise<void> =>
    inOrder(id, async () => {
      if (!connections.has(id) && !stopping) await writer.disconnected(id);
    }).catch((err: unknown) => {
      if (!stopping) log.warn({ err, workerId: id }, 'could not record a disconnection');
    });

  const dropped = (id: number): void => {
    if (uncount(id)) void disconnectInTurn(id);
  };

  return {
    async opened(id) {
      if (stopping) return false;
      connections.set(id, (connections.get(id) ?? 0) + 1);
      try {
        await inOrder(id, () => writer.connected(id));
      } catch (err) {
        dropped(id);
        throw err;
      }
      return true;
    },
    dropped,
    async closed(id) {
      if (stopping || !uncount(id)) return; // finishStop() records them all at once
      // Decided when its turn comes (after this worker's earlier writes), then written with the next
      // batch: a connection opened meanwhile keeps the worker connected, its own write queued behind.
      const recorded = disconnectInTurn(id);
      recording.set(id, recorded);
      await recorded;
      if (recording.get(id) === recorded) recording.delete(id);
    },
    async reclaim() {
      const ids = [...connections.keys()];
      if (stopping || !ids.length) return 0;
      // Decided when their turn comes: a worker whose last connection closed meanwhile is not taken back.
      const taken = await inOrderMany(ids, () =>
        stopping
          ? Promise.resolve([])
          : reclaimConnected(
              fork(),
              events,
              ids.filter((id) => connections.has(id)),
              processId,
            ),
      );
      if (taken.length)
        log.warn(
          { workers: taken.map((w) => w.name) },
          'workers taken over while this process was silent are connected here again',
        );
      return taken.length;
    },
    beginStop() {
      stopping = true;
    },
    async finishStop() {
      const held = [...new Set([...connections.keys(), ...recording.keys()])];
      connections.clear();
      // Disconnections being recorded publish their events when they are done: before the events close.
      // Every presence write in flight ends first, so that none lands after the one below.
      await Promise.all(recording.values());
      await Promise.all([...writes.values()].map((w) => w.catch(() => undefined)));
      await writer.idle();
      await markManyDisconnected(fork(), events, held, processId).catch((err: unknown) =>
        log.warn({ err, workers: held.length }, 'could not record the disconnections'),
      );
    },
  };
}
