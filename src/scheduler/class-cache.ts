import type { EntityManager } from '@mikro-orm/postgresql';
import { matchTags } from '../tags/match.js';

/** A task class as the scheduler decides it. */
export interface TaskClassRow {
  readonly id: number;
  readonly requiredTags: readonly string[];
  readonly significantProvidedTags: readonly string[];
}

/** What decides which classes a worker may take: its type and its two tag sets. */
export interface WorkerTags {
  readonly type: string;
  readonly providedTags: readonly string[];
  readonly requiredTags: readonly string[];
}

/** The DESIGN §2.2 rule at class level: the class's requirements ⊆ worker's provided, and the worker's requirements ⊆ the class's significant provided tags. */
export function classFits(c: TaskClassRow, w: WorkerTags): boolean {
  if (w.type === 'not-assignable') return false; // never gets work, whatever it provides
  return matchTags({ provided: c.significantProvidedTags, required: c.requiredTags }, { provided: w.providedTags, required: w.requiredTags }).ok;
}

const signature = (w: WorkerTags) => `${w.type}\u0000${w.providedTags.join(' ')}\u0000${w.requiredTags.join(' ')}`;

/**
 * The task classes, cached in the process (they never change once created), and each worker tag
 * signature's eligible classes, computed once per signature and extended as new classes appear:
 * the class × class decisions of DESIGN §6, so the hot path does no tag matching at all.
 */
export class ClassCache {
  private readonly classes: TaskClassRow[] = [];
  private maxId = 0;
  private readonly eligible = new Map<string, { upTo: number; ids: number[] }>();

  /** Loads the classes created since the last refresh (one indexed query). */
  async refresh(em: EntityManager): Promise<void> {
    const rows = await em.execute<{ id: number; required_tags: string[]; significant_provided_tags: string[] }[]>(
      'select id, required_tags, significant_provided_tags from task_class where id > ? order by id',
      [this.maxId],
    );
    for (const r of rows) {
      this.classes.push({ id: r.id, requiredTags: r.required_tags, significantProvidedTags: r.significant_provided_tags });
      this.maxId = r.id;
    }
  }

  /** Every known class. */
  all(): readonly TaskClassRow[] {
    return this.classes;
  }

  /** The ids of the classes a worker with these tags may run. */
  eligibleFor(w: WorkerTags): number[] {
    const key = signature(w);
    let entry = this.eligible.get(key);
    if (!entry) {
      entry = { upTo: 0, ids: [] };
      this.eligible.set(key, entry);
    }
    if (entry.upTo < this.maxId) {
      for (const c of this.classes) if (c.id > entry.upTo && classFits(c, w)) entry.ids.push(c.id);
      entry.upTo = this.maxId;
    }
    return entry.ids;
  }
}
