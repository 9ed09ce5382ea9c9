import type { EntityManager } from '@mikro-orm/postgresql';
import { fitsOf, type TaskClassRow, type WorkerTags } from '../rules/fit.js';
import { MatchKeys } from './match-keys.js';

/**
 * The task classes, cached in the process (they never change once created), and the eligible
 * classes of each worker match key (match-keys.ts), computed once per key and extended as new
 * classes appear: the class × class decisions of docs/design.md: scheduler, so the hot path does no tag matching
 * at all. Keys ignore what no class requires (exact disk sizes, cpu counts), so there are few of them.
 */
export class ClassCache {
  private readonly classes: TaskClassRow[] = [];
  private readonly byId = new Map<number, TaskClassRow>();
  private maxId = 0;
  private readonly keys = new MatchKeys();
  private readonly eligible = new Map<string, { upTo: number; ids: number[] }>();
  /** Raised whenever the keys may have changed (a new requirement): keys remembered before it are stale. */
  private keysGeneration = 0;
  /**
   * Keys remembered per provided-tags array: the worker snapshot hands out the same arrays for a
   * worker until its shape changes, so keying 10,000 workers again (most of a demand call) is a
   * lookup each. A state with another array (a fresh read) is keyed afresh.
   */
  private readonly keyOfTags = new WeakMap<
    readonly string[],
    { generation: number; type: string; requiredTags: readonly string[]; key: string }
  >();

  /** Loads the classes created since the last refresh (one indexed query). */
  async refresh(em: EntityManager): Promise<void> {
    const rows = await em.execute<{ id: number; required_tags: string[]; significant_provided_tags: string[] }[]>(
      'select id, required_tags, significant_provided_tags from task_class where id > ? order by id',
      [this.maxId],
    );
    this.add(
      rows.map((r) => ({
        id: r.id,
        requiredTags: r.required_tags,
        significantProvidedTags: r.significant_provided_tags,
      })),
    );
  }

  /** Takes classes newer than every class it has, in id order (refresh; table tests build a cache so, without a database). */
  add(rows: readonly TaskClassRow[]): void {
    for (const row of rows) {
      this.classes.push(row);
      this.byId.set(row.id, row);
      this.maxId = row.id;
      // A requirement no class had before may split a key: start the keys over (rare: a new tag or minimum).
      if (this.keys.add(row.requiredTags)) {
        this.eligible.clear();
        this.keysGeneration++;
      }
    }
  }

  /** Loads new classes only when the database has a class this process has not seen (`latestId` from a query it already makes). */
  async refreshIfBehind(em: EntityManager, latestId: number): Promise<void> {
    if (latestId > this.maxId) await this.refresh(em);
  }

  /** The newest class this process has loaded (0 before any). */
  get latestId(): number {
    return this.maxId;
  }

  /** Every known class. */
  all(): readonly TaskClassRow[] {
    return this.classes;
  }

  /** One class, if this process has loaded it. */
  get(id: number): TaskClassRow | undefined {
    return this.byId.get(id);
  }

  /** The key under which workers get the same eligible classes (match-keys.ts). */
  keyOf(w: WorkerTags): string {
    const known = this.keyOfTags.get(w.providedTags);
    if (
      known &&
      known.generation === this.keysGeneration &&
      known.type === w.type &&
      known.requiredTags === w.requiredTags
    )
      return known.key;
    const key = this.keys.keyOf(w);
    this.keyOfTags.set(w.providedTags, {
      generation: this.keysGeneration,
      type: w.type,
      requiredTags: w.requiredTags,
      key,
    });
    return key;
  }

  /** The ids of the classes a worker with these tags may run. */
  eligibleFor(w: WorkerTags): number[] {
    const key = this.keyOf(w);
    let entry = this.eligible.get(key);
    if (!entry) {
      entry = { upTo: 0, ids: [] };
      this.eligible.set(key, entry);
    }
    if (entry.upTo < this.maxId) {
      const fits = fitsOf(w);
      for (const c of this.classes) if (c.id > entry.upTo && fits(c)) entry.ids.push(c.id);
      entry.upTo = this.maxId;
    }
    return entry.ids;
  }
}
