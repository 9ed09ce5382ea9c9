import type { EntityManager } from '@mikro-orm/postgresql';
import { lockForTransaction, lockForTransactionStatement } from '../../storage/db/advisory-locks.js';
import { executeInOneTrip } from '../../storage/db/one-trip.js';
import { intArray, textArray } from '../../storage/db/arrays.js';
import { tagName, tagNameSql } from '../../core/tags/syntax.js';
import { PENDING_OR_ACTIVE_SQL } from '../../core/work-request-status.js';
import { classKey, classKeyHash } from '../matching/class-key.js';

/** The tags of one work request, as the classifier reads them. */
export interface ClassifiableTags {
  readonly providedTags: readonly string[];
  readonly requiredTags: readonly string[];
}

/**
 * The task class of each tag pair, creating the classes that do not exist yet. A request's provided
 * tags take part only by the names some worker or pool requires, so per-package tags never split a
 * class. Runs inside the caller's transaction, which holds the classification lock until it commits.
 */
export async function classIdsFor(
  em: EntityManager,
  items: readonly ClassifiableTags[],
  exclusive = false,
): Promise<number[]> {
  if (!items.length) return [];
  // Items that hold the same lists (the requests of one analysis in a batch) are read once.
  const providedLists = new Set(items.map((r) => r.providedTags));
  const names = [...new Set([...providedLists].flatMap((tags) => tags.map(tagName)))];
  // The lock (unless the caller holds it exclusively), then the significant tags read under it: one trip.
  const trip = await executeInOneTrip<{ tag: string }[][]>(em, [
    ...(exclusive ? [] : [lockForTransactionStatement('CLASSIFY', 'shared')]),
    ...(names.length
      ? [{ sql: 'select tag from significant_tag where tag = any(?::text[])', params: [textArray(names)] }]
      : []),
  ]);
  const significant = new Set(names.length ? trip[trip.length - 1].map((r) => r.tag) : []);
  const byLists = new Map<
    readonly string[],
    Map<readonly string[], { key: string; required: string[]; sig: string[] }>
  >();
  const keyed = items.map((r) => {
    let byRequired = byLists.get(r.providedTags);
    if (!byRequired) byLists.set(r.providedTags, (byRequired = new Map()));
    let k = byRequired.get(r.requiredTags);
    if (!k) {
      const sig = [...new Set(r.providedTags.filter((t) => significant.has(tagName(t))))].sort();
      const required = [...new Set(r.requiredTags)].sort();
      byRequired.set(r.requiredTags, (k = { key: classKey(required, sig), required, sig }));
    }
    return k;
  });
  const distinct = [...new Map(keyed.map((k) => [k.key, k])).values()];
  const select = async (keys: string[]) => {
    const wanted = new Set(keys);
    const rows = await em.execute<{ id: number; key: string }[]>(
      'select id, key from task_class where key_hash = any(?::text[])',
      [textArray(keys.map(classKeyHash))],
    );
    return rows.filter((c) => wanted.has(c.key));
  };
  const idOf = new Map((await select(distinct.map((d) => d.key))).map((c) => [c.key, c.id]));
  const missing = distinct.filter((d) => !idOf.has(d.key));
  if (missing.length) {
    // Caches load the classes above the highest id they have seen (class-cache.ts): a class committed
    // after one with a higher id would be missed for good. Creators take turns, each until its commit.
    await lockForTransaction(em, 'CREATE_CLASS');
    await em.execute(
      `insert into task_class (key, key_hash, required_tags, significant_provided_tags, created_at)
       select k, h, string_to_array(r, ' '), string_to_array(s, ' '), now()
         from unnest(?::text[], ?::text[], ?::text[], ?::text[]) as v(k, h, r, s)
       on conflict (key_hash) do nothing`,
      [
        textArray(missing.map((d) => d.key)),
        textArray(missing.map((d) => classKeyHash(d.key))),
        textArray(missing.map((d) => d.required.join(' '))),
        textArray(missing.map((d) => d.sig.join(' '))),
      ],
    );
    for (const c of await select(missing.map((d) => d.key))) idOf.set(c.key, c.id);
  }
  return keyed.map((k) => idOf.get(k.key)!);
}

async function reclassify(em: EntityManager, ids: readonly number[]): Promise<void> {
  if (!ids.length) return;
  const rows = await em.execute<{ id: number; provided_tags: string[]; required_tags: string[] }[]>(
    'select id, provided_tags, required_tags from work_request where id = any(?::int[])',
    [intArray(ids)],
  );
  const classIds = await classIdsFor(
    em,
    rows.map((r) => ({ providedTags: r.provided_tags, requiredTags: r.required_tags })),
    true,
  );
  await em.execute(
    `update work_request w set class_id = v.class_id from unnest(?::int[], ?::int[]) as v(id, class_id) where w.id = v.id`,
    [intArray(rows.map((r) => r.id)), intArray(classIds)],
  );
}

/**
 * Records tags that a worker or pool requires. A tag name new to the significant set re-classifies
 * the unfinished requests that provide it, so exclusive workers find them. Runs inside the caller's transaction.
 */
export async function registerSignificantTags(em: EntityManager, requiredTags: readonly string[]): Promise<void> {
  const names = [...new Set(requiredTags.map(tagName))];
  if (!names.length) return;
  const known = await em.execute<{ tag: string }[]>('select tag from significant_tag where tag = any(?::text[])', [
    textArray(names),
  ]);
  const fresh = names.filter((n) => !known.some((k) => k.tag === n));
  if (!fresh.length) return;
  await lockForTransaction(em, 'CLASSIFY');
  await em.execute(
    `insert into significant_tag (tag, created_at) select unnest(?::text[]), now() on conflict do nothing`,
    [textArray(fresh)],
  );
  // The affected requests are those providing a tag of one of these names (plain, or with a value);
  // assigned and running ones too, since a lease or a release can put them back in the queue.
  const affected = await em.execute<{ id: number }[]>(
    `select id from work_request where status in (${PENDING_OR_ACTIVE_SQL})
        and exists (select 1 from unnest(provided_tags) t where ${tagNameSql('t')} = any(?::text[]))`,
    [textArray(fresh)],
  );
  await reclassify(
    em,
    affected.map((a) => a.id),
  );
}
