/** A worker as the bulk questions (candidates, diagnosis, demand) see it: its shape and its state now. */
import type { UnavailableReason } from '../rules/availability.js';

/** A worker as the bulk questions (candidates, diagnosis, demand) see it. */
export interface WorkerState {
  readonly id: number;
  readonly name: string;
  readonly type: string;
  readonly poolId: number | null;
  readonly providedTags: readonly string[];
  readonly requiredTags: readonly string[];
  readonly concurrency: number;
  /** Requests it holds (its active work: rules/active-work.ts). */
  readonly active: number;
  readonly unavailable: UnavailableReason | null;
  /** Free slots now: 0 when unavailable. */
  readonly free: number;
  /** When it last finished work, or was created: idle since then when it holds nothing. */
  readonly idleSince: Date | null;
  /** When its instance was created (a pool worker launched by the provisioner); absent or null otherwise. */
  readonly instanceCreatedAt?: Date | null;
}

/** Groups items by a key, keeping first-seen order. */
export function groupBy<T>(items: readonly T[], key: (item: T) => string): Map<string, T[]> {
  const out = new Map<string, T[]>();
  for (const item of items) {
    const k = key(item);
    const list = out.get(k);
    if (list) list.push(item);
    else out.set(k, [item]);
  }
  return out;
}

/** The key under which workers decide every task identically: type and both tag sets. */
export const workerSignature = (w: Pick<WorkerState, 'type' | 'providedTags' | 'requiredTags'>) =>
  `${w.type}\u0000${[...w.providedTags].sort().join(' ')}\u0000${[...w.requiredTags].sort().join(' ')}`;
