import type { MikroORM } from '@mikro-orm/postgresql';
import DataLoader from 'dataloader';
import { stillValidTokenIds } from '../../services/identity/tokens.js';

/**
 * Checks tokens again: before events are sent, and before a worker's acknowledgement or report on its
 * connection runs (api/ws/connection-identity.ts). All the checks asked for in one turn of the event loop
 * (every subscriber of one event, every message read from the sockets in one poll) are one statement:
 * the batch goes out once the I/O callbacks of the turn have run (setImmediate), so a busy server
 * makes one check for many operations and an idle one waits for nothing. Nothing is cached: each
 * check asks afresh.
 */
export function createTokenGuard(orm: MikroORM) {
  const loader = new DataLoader<number, boolean>(
    async (ids) => {
      const valid = await stillValidTokenIds(orm.em.fork(), ids);
      return ids.map((id) => valid.has(id));
    },
    { cache: false, maxBatchSize: 5_000, batchScheduleFn: (run) => setImmediate(run) },
  );
  return { isValid: (tokenId: number): Promise<boolean> => loader.load(tokenId) };
}
export type TokenGuard = ReturnType<typeof createTokenGuard>;
