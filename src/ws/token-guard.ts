import type { MikroORM } from '@mikro-orm/postgresql';
import DataLoader from 'dataloader';
import { stillValidTokenIds } from '../services/identity/tokens.js';

/**
 * Checks tokens again before events are sent: all the checks a process makes in one tick (every
 * subscriber of one event) are one statement. Nothing is cached: each event asks afresh.
 */
export function createTokenGuard(orm: MikroORM) {
  const loader = new DataLoader<number, boolean>(
    async (ids) => {
      const valid = await stillValidTokenIds(orm.em.fork(), ids);
      return ids.map((id) => valid.has(id));
    },
    { cache: false, maxBatchSize: 5_000 },
  );
  return { isValid: (tokenId: number): Promise<boolean> => loader.load(tokenId) };
}
export type TokenGuard = ReturnType<typeof createTokenGuard>;
