import type { EntityManager } from '@mikro-orm/postgresql';
import { intArray } from '../../storage/db/arrays.js';
import { ALWAYS, type SqlCondition } from '../../storage/db/condition.js';
import { fitsOf, type TaskClassRow } from '../rules/fit.js';
import { tagName } from '../../core/tags/syntax.js';
import { classKey } from './class-key.js';
import { MatchKeys } from './match-keys.js';
import { groupBy, type WorkerState } from './worker-state.js';
import { hostCandidate, RESOURCE_COLUMNS, type Resources } from '../rules/resources.js';

/** What a worker that shares its resources offers and has free now. */
export interface HostResources {
  readonly offered: Resources;
  readonly free: Resources;
}

/** The tags of a work request, as the bulk matcher reads them. */
export interface TaskTagsRow {
  readonly id: number;
  readonly providedTags: readonly string[];
  readonly requiredTags: readonly string[];
  /** What it reserves of a worker that shares its resources (rules/resources.ts); none when absent. */
  readonly reserved?: Resources;
}

/**
 * The workers that could run each task, decided class × class: tasks are grouped by their required
 * tags and the provided tags some worker requires, workers by their match key for these tasks'
 * requirements, and each pair of groups is matched once. `availableOnly` keeps the workers with a
 * free slot now. Each list is in worker name order. `keying` gives the match key of a worker for
 * the tasks' requirements: a fresh MatchKeys by default, or a process's WorkerSnapshot.keying, which
 * keeps each worker's key between calls. `hosts`, what the workers that share their resources offer and
 * have free by id, keeps such a worker only for the tasks that fit it (rules/resources.ts: hostCandidate;
 * with `availableOnly`, that fit what it has free now); a task that reserves nothing fits any.
 */
export function candidatesOf(
  tasks: readonly TaskTagsRow[],
  workers: readonly WorkerState[],
  availableOnly: boolean,
  keying: (requiredTags: readonly string[]) => (w: WorkerState) => string = (requiredTags) => {
    const keys = new MatchKeys(requiredTags);
    return (w) => keys.keyOf(w);
  },
  hosts: ReadonlyMap<number, HostResources> = new Map(),
): Map<number, WorkerState[]> {
  const byName = inNameOrder(availableOnly ? workers.filter((w) => w.free > 0) : workers);
  const significant = new Set<string>();
  for (const w of workers) for (const tag of w.requiredTags) significant.add(tagName(tag));
  // Workers by match key: a key's workers decide every one of these tasks alike.
  const keyOf = keying(tasks.flatMap((t) => t.requiredTags));
  const keyIndex = new Map<string, number>();
  const fitsOfKey: ((c: TaskClassRow) => boolean)[] = [];
  const keyOfWorker = byName.map((w) => {
    const key = keyOf(w);
    let k = keyIndex.get(key);
    if (k === undefined) {
      keyIndex.set(key, (k = fitsOfKey.length));
      fitsOfKey.push(fitsOf(w));
    }
    return k;
  });
  const taskGroups = groupBy(
    tasks.map((t) => {
      const sig = t.providedTags.filter((tag) => significant.has(tagName(tag)));
      return {
        task: t,
        cls: { id: 0, requiredTags: t.requiredTags, significantProvidedTags: sig } satisfies TaskClassRow,
      };
    }),
    (x) => classKey(x.cls.requiredTags, x.cls.significantProvidedTags),
  );
  // Each key's workers, as positions in name order: a list is gathered from the keys that fit, in
  // time proportional to its length, not to the number of workers.
  const positionsOfKey: number[][] = fitsOfKey.map(() => []);
  keyOfWorker.forEach((k, i) => positionsOfKey[k].push(i));
  const marked = new Uint8Array(byName.length); // positions of one list, for the lists gathered from several keys
  const out = new Map<number, WorkerState[]>();
  const lists = new Map<string, WorkerState[]>(); // task groups that fit the same keys share one list
  const filtered = new Map<string, WorkerState[]>(); // and the hosts of a list that fit some figures
  for (const group of taskGroups.values()) {
    const fitting = fitsOfKey.flatMap((fitsClass, k) => (fitsClass(group[0].cls) ? [k] : []));
    const which = fitting.join(',');
    let list = lists.get(which);
    if (!list) {
      if (fitting.length === 1) {
        list = positionsOfKey[fitting[0]].map((i) => byName[i]); // already in name order
      } else {
        // Name order of the union without sorting it: mark the positions, then read them in order,
        // from the first marked to the last.
        let size = 0;
        let first = byName.length;
        let last = -1;
        for (const k of fitting) {
          const positions = positionsOfKey[k];
          size += positions.length;
          if (positions.length) {
            first = Math.min(first, positions[0]);
            last = Math.max(last, positions[positions.length - 1]);
          }
          for (const i of positions) marked[i] = 1;
        }
        list = new Array<WorkerState>(size);
        let at = 0;
        for (let i = first; i <= last; i++) {
          if (marked[i]) {
            list[at++] = byName[i];
            marked[i] = 0;
          }
        }
      }
      lists.set(which, list);
    }
    for (const { task } of group) {
      const reserved = task.reserved;
      if (!hosts.size || !reserved) {
        out.set(task.id, list);
        continue;
      }
      // Tasks of one list that reserve the same figures share one filtered list.
      const key = `${which}|${reserved.cpus},${reserved.memoryMib},${reserved.diskMib}`;
      let fitting = filtered.get(key);
      if (!fitting) {
        const of = list; // the list of this group, for the closure
        fitting = of.filter((w) => {
          const host = hosts.get(w.id);
          return !host || hostCandidate(reserved, host, availableOnly);
        });
        filtered.set(key, fitting);
      }
      out.set(task.id, fitting);
    }
  }
  return out;
}

/** The workers in name order (code unit order): as given when they already are (the snapshot reads them so), else sorted. */
function inNameOrder(workers: readonly WorkerState[]): readonly WorkerState[] {
  let sorted = true;
  for (let i = 1; i < workers.length && sorted; i++) sorted = workers[i - 1].name < workers[i].name;
  return sorted ? workers : [...workers].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/**
 * Loads the tags of many work requests in one statement; with `visible` (a condition on the alias
 * `wr`, services/identity/visibility.ts), only of those the viewer may see.
 */
export async function loadTaskTags(
  em: EntityManager,
  ids: readonly number[],
  visible: SqlCondition = ALWAYS,
): Promise<TaskTagsRow[]> {
  if (!ids.length) return [];
  const c = RESOURCE_COLUMNS.workRequest;
  const rows = await em.execute<
    { id: number; provided_tags: string[]; required_tags: string[]; cpus: number; memory: number; disk: number }[]
  >(
    // Arrays as JSON: the driver parses JSON natively, text[] several times slower.
    `select wr.id, to_json(wr.provided_tags) as provided_tags, to_json(wr.required_tags) as required_tags,
            wr.${c.cpus} as cpus, wr.${c.memoryMib} as memory, wr.${c.diskMib} as disk
       from work_request wr where wr.id = any(?::int[]) and ${visible.sql}`,
    [intArray(ids), ...visible.params],
  );
  return rows.map((r) => ({
    id: r.id,
    providedTags: r.provided_tags,
    requiredTags: r.required_tags,
    reserved: { cpus: Number(r.cpus), memoryMib: Number(r.memory), diskMib: Number(r.disk) },
  }));
}
