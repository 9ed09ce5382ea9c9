import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { executeInOneTrip } from '../../src/storage/db/one-trip.js';
import { useTestApp } from '../helpers/app.js';

const t = useTestApp();

describe('executeInOneTrip: several statements in one round trip, each as if sent alone', () => {
  it("answers each statement's rows in order, its parameters in their places, and one statement's rows as a list of one", async () => {
    const em = t.app.orm.em.fork();
    const rows = await executeInOneTrip<[{ a: number }[], { b: string }[], { c: number }[]]>(em, [
      { sql: 'select ?::int as a', params: [1] },
      { sql: `select ?::text as b union all select ?::text`, params: ["it's", 'two'] },
      { sql: 'select ?::int + ?::int as c', params: [2, 3] },
    ]);
    expect(rows).toEqual([[{ a: 1 }], [{ b: "it's" }, { b: 'two' }], [{ c: 5 }]]);
    expect(await executeInOneTrip(em, [{ sql: 'select 7 as x' }])).toEqual([[{ x: 7 }]]);
    expect(await executeInOneTrip(em, [])).toEqual([]);
  });

  it('a statement that waited for a lock reads, in the next one, what was committed while it waited', async () => {
    await t.sql('create table trip_probe (id int)');
    const other = new pg.Client({ connectionString: t.app.config.server.databaseUrl! });
    await other.connect();
    try {
      // Another session holds an advisory lock and writes a row it commits only later.
      await other.query('begin');
      await other.query('select pg_advisory_xact_lock(4242)');
      await other.query('insert into trip_probe values (1)');
      const trip = t.app.orm.em
        .fork()
        .transactional((tx) =>
          executeInOneTrip<[unknown[], { n: number }[]]>(tx, [
            { sql: 'select pg_advisory_xact_lock(4242)' },
            { sql: 'select count(*)::int as n from trip_probe' },
          ]),
        );
      await new Promise((r) => setTimeout(r, 200)); // the trip is waiting for the lock
      await other.query('commit');
      const [, [{ n }]] = await trip;
      expect(n).toBe(1); // a snapshot of its own, taken after the lock: one statement would have read 0
    } finally {
      await other.end();
    }
  });

  it('a failing statement fails the trip with the driver exception, and the ones after it do not run', async () => {
    await t.sql('create table trip_fail (id int)');
    const em = t.app.orm.em.fork();
    await expect(
      executeInOneTrip(em, [
        { sql: 'insert into trip_fail values (1)' },
        { sql: 'select 1/0' },
        { sql: 'insert into trip_fail values (2)' },
      ]),
    ).rejects.toMatchObject({
      name: 'DriverException',
      code: '22012',
    });
    // Outside a transaction the trip is one implicit transaction: nothing of it stays.
    expect(await t.sql('select count(*)::int as n from trip_fail')).toEqual([{ n: 0 }]);
  });

  it('refuses, before sending anything, a statement whose `?` are not its parameters, or that ends with a `;` of its own', async () => {
    await t.sql('create table trip_refused (id int)');
    const em = t.app.orm.em.fork();
    const insert = { sql: 'insert into trip_refused values (?)', params: [1] };
    await expect(executeInOneTrip(em, [insert, { sql: `select '{"a":1}'::jsonb ? 'a'` }])).rejects.toThrow(
      /1 `\?` for 0 parameters/,
    );
    await expect(executeInOneTrip(em, [insert, { sql: 'select ?::int', params: [1, 2] }])).rejects.toThrow(
      /1 `\?` for 2 parameters/,
    );
    await expect(executeInOneTrip(em, [insert, { sql: 'select 1;' }])).rejects.toThrow(/ends with its own `;`/);
    expect(await t.sql('select count(*)::int as n from trip_refused')).toEqual([{ n: 0 }]);
  });
});
