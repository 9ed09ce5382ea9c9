/**
 * worker_state, the narrow copy of each worker that PostgreSQL keeps (migration worker_state), holds
 * what the availability facts' one list says (AVAILABILITY_FACTS, src/scheduler/rules/availability.ts,
 * and the snapshot's WORKER_STATE_COPIED_COLUMNS and WORKER_STATE_MS_COLUMNS made from it): on a
 * migrated database, the table's columns, the entity's, the column list of the trigger that fires the
 * copy and the insert and update of the function that writes it are exactly those of the lists, each
 * time in epoch milliseconds computed as availabilityColumns computes it.
 */
import type { MikroORM } from '@mikro-orm/postgresql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AVAILABILITY_FACTS, epochMsSql } from '../../src/scheduler/rules/availability.js';
import { WORKER_STATE_COPIED_COLUMNS, WORKER_STATE_MS_COLUMNS } from '../../src/scheduler/storage/worker-snapshot.js';
import { createOrm } from '../../src/storage/orm.js';
import { createTestDatabase } from '../helpers/db.js';

let orm: MikroORM;
let drop: () => Promise<void>;
beforeAll(async () => {
  const db = await createTestDatabase();
  drop = db.drop;
  orm = await createOrm({ clientUrl: db.url });
});
afterAll(async () => {
  await orm?.close();
  await drop?.();
});

const sql = <T>(query: string, params: unknown[] = []) => orm.em.fork().execute<T[]>(query, params);

/** Every column of worker_state: the worker's id, the copied columns, the times in milliseconds. */
const STATE_COLUMNS = ['worker_id', ...WORKER_STATE_COPIED_COLUMNS, ...Object.keys(WORKER_STATE_MS_COLUMNS)];

const sorted = (names: Iterable<string>) => [...names].sort();
const unquoted = (name: string) => name.trim().replace(/^"(.*)"$/, '$1');
/** A space for every run of white space, none inside parentheses. */
const normalized = (expression: string) =>
  expression.replace(/\s+/g, ' ').replace(/\( /g, '(').replace(/ \)/g, ')').trim();

/** The items of a comma-separated list, split at its top level only (not inside parentheses). */
function topLevelItems(list: string): string[] {
  const items: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < list.length; i++) {
    if (list[i] === '(') depth++;
    else if (list[i] === ')') depth--;
    else if (list[i] === ',' && depth === 0) {
      items.push(list.slice(start, i).trim());
      start = i + 1;
    }
  }
  items.push(list.slice(start).trim());
  return items;
}

/** What `text` holds between `open` (a parenthesis ends it) and the parenthesis that closes it. */
function parenthesized(text: string, open: RegExp): string {
  const at = open.exec(text);
  expect(at, `${open} in ${text}`).not.toBeNull();
  let depth = 1;
  const start = at!.index + at![0].length;
  for (let i = start; i < text.length; i++) {
    if (text[i] === '(') depth++;
    else if (text[i] === ')' && --depth === 0) return text.slice(start, i);
  }
  throw new Error(`no closing parenthesis after ${open}`);
}

describe('worker_state holds what the availability facts list', () => {
  it('the lists are made from the facts: each fact column copied, each time of kind ms kept in milliseconds', () => {
    for (const f of AVAILABILITY_FACTS) expect(WORKER_STATE_COPIED_COLUMNS).toContain(f.column);
    for (const f of AVAILABILITY_FACTS.filter((x) => x.kind === 'ms'))
      expect(WORKER_STATE_MS_COLUMNS[f.row]).toBe(f.column);
    expect(new Set(STATE_COLUMNS).size).toBe(STATE_COLUMNS.length);
  });

  it('its table has exactly those columns, and so has its entity', async () => {
    const rows = await sql<{ column_name: string }>(
      `select column_name from information_schema.columns where table_schema = current_schema() and table_name = 'worker_state'`,
    );
    expect(sorted(rows.map((r) => r.column_name))).toEqual(sorted(STATE_COLUMNS));
    const meta = orm.getMetadata().get('WorkerState');
    expect(meta.tableName).toBe('worker_state');
    expect(sorted(meta.props.flatMap((p) => p.fieldNames))).toEqual(sorted(STATE_COLUMNS));
  });

  it('the update trigger fires on a change of exactly the copied columns (and the id)', async () => {
    const [changed] = await sql<{ def: string }>(
      `select pg_get_triggerdef(oid) as def from pg_trigger where tgname = 'worker_state_changed' and tgrelid = 'worker'::regclass`,
    );
    expect(changed.def).toMatch(
      /AFTER UPDATE ON \S*worker FOR EACH ROW WHEN .* EXECUTE FUNCTION \S*worker_state_copy\(\)$/,
    );
    const compared = [...changed.def.matchAll(/old\.("?\w+"?) IS DISTINCT FROM new\.("?\w+"?)/g)].map((m) => {
      expect(m[1]).toBe(m[2]);
      return unquoted(m[1]!);
    });
    expect(sorted(compared)).toEqual(sorted(['id', ...WORKER_STATE_COPIED_COLUMNS]));
    const [created] = await sql<{ def: string }>(
      `select pg_get_triggerdef(oid) as def from pg_trigger where tgname = 'worker_state_new' and tgrelid = 'worker'::regclass`,
    );
    expect(created.def).toMatch(/AFTER INSERT ON \S*worker FOR EACH ROW EXECUTE FUNCTION \S*worker_state_copy\(\)$/);
  });

  it('the function writes each column from its worker column, the times in milliseconds as availabilityColumns reads them', async () => {
    const [fn] = await sql<{ src: string }>(`select prosrc as src from pg_proc where proname = 'worker_state_copy'`);
    const columns = topLevelItems(parenthesized(fn.src, /insert into "worker_state" \(/)).map(unquoted);
    const values = topLevelItems(parenthesized(fn.src, /\bvalues \(/)).map(normalized);
    expect(sorted(columns)).toEqual(sorted(STATE_COLUMNS));
    expect(values).toHaveLength(columns.length);
    const expected = (column: string) =>
      column === 'worker_id'
        ? 'new."id"'
        : column in WORKER_STATE_MS_COLUMNS
          ? normalized(epochMsSql(`new."${WORKER_STATE_MS_COLUMNS[column]}"`))
          : `new."${column}"`;
    expect(values).toEqual(columns.map(expected));
    const updated = topLevelItems(
      fn.src.slice(fn.src.search(/do update set/) + 'do update set'.length, fn.src.search(/;\s*return null/)),
    ).map(normalized);
    expect(sorted(updated)).toEqual(
      sorted(STATE_COLUMNS.filter((c) => c !== 'worker_id').map((c) => `"${c}" = excluded."${c}"`)),
    );
  });
});
